"""WSGI entry point (gunicorn ckptweb.wsgi)."""

import gc
import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ckptweb.settings")
application = get_wsgi_application()

# Load the URLconf (and so every view module) now, then move everything loaded so far out of the
# garbage collector's reach: it lives as long as the process. Without this, each full collection
# walks the whole of Django and the app, and the list page, which makes some 10,000 objects a
# request at 1,000 checkpoints, set one off every few requests: 80 ms on top of a 70 ms page,
# the difference between its p50 and p95 (docs/benchmarks.md, the checkpoint list).
_ = get_resolver().url_patterns  # the attribute access is what loads the URLconf
gc.freeze()
