"""WSGI entry point (gunicorn ckptweb.wsgi)."""
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ckptweb.settings")
application = get_wsgi_application()
