"""Static files as `manage.py collectstatic` writes them, referred to by their hashed names in debug mode too.

Django's manifest storage gives templates the plain name while DEBUG is on, so WhiteNoise would send
the demo's plotly.js under a name that may change without notice, revalidated on every visit. With
the hashed name it is sent as in production: a Brotli or gzip copy, cached for a year as immutable.
"""

from __future__ import annotations

from whitenoise.storage import CompressedManifestStaticFilesStorage


class CollectedStaticFilesStorage(CompressedManifestStaticFilesStorage):
    def url(self, name: str | None, force: bool = False) -> str:
        return super().url(name, force=True)
