"""Django for a benchmark: the project's settings on a fresh SQLite database in the work dir."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path


def setup_django(workdir: Path, *, extra_roots: Sequence[str] = ()) -> None:
    """Point CKPTWEB_DATA_DIR and the checkpoint root at ``workdir``, set Django up, migrate.

    ``extra_roots`` are further allowed checkpoint roots (``s3://bucket``, say).
    """
    os.environ["CKPTWEB_DATA_DIR"] = str(workdir)
    os.environ.pop("CKPTWEB_DATABASE_URL", None)
    os.environ["CKPTWEB_CHECKPOINT_ROOTS"] = ",".join([str(workdir / "checkpoints"), *extra_roots])
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ckptweb.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
