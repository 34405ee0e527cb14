"""WSGI entry point (gunicorn ckptweb.wsgi)."""

import gc
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ckptweb.settings")
application = get_wsgi_application()

from ckptweb.warm_up import warm_up, warm_up_connections, warm_up_pages  # noqa: E402  (after Django is set up)

# Pay what the first requests would (ckptweb/warm_up.py), then move everything loaded so far out of
# the garbage collector's reach: it lives as long as the process. Without this, each full collection
# walks the whole of Django and the app, and the list page, which makes some 10,000 objects a
# request at 1,000 checkpoints, set one off every few requests: 80 ms on top of a 70 ms page,
# the difference between its p50 and p95 (docs/benchmarks.md, the checkpoint list).
warm_up()
warm_up_pages()
warm_up_connections()
gc.freeze()
