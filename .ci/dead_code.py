"""Dead code: functions, methods, classes, properties and imports nothing refers to (make lint).

vulture reads the project's sources and the tests (a helper only the tests use is still used) and
reports definitions no name refers to. Variables and attributes are left out: Django model fields,
dataclass fields read by templates and settings read by name are variables nobody "uses" in Python.
What Django, DRF, Celery, kombu or Spark call by name, or settings name in a dotted string, is
allowed below, each with its reason; anything else that is reported fails the check.
"""

from __future__ import annotations

import keyword
import re
import sys
from pathlib import Path

import vulture

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ["ckptweb", "dashboards", "workers", "pipelines", "bench", "manage.py", "tests"]
EXCLUDE = ["*/migrations/*", "ckptweb/settings.py"]
KINDS = {"function", "method", "class", "property", "import", "unreachable_code"}
# Called by a framework, by name, or used by a decorator's registration.
ALLOWED_DECORATORS = [
    "@admin.register",
    "@register.*",
    "@pytest.fixture",
    "@pytest.hookimpl",
    "@shared_task",
    "@receiver",
    "@*.connect",  # Celery signal handlers
]
ALLOWED_NAMES = [
    "Command",  # Django's management commands
    "add_arguments",
    "Meta",  # Django models, forms and DRF serializers
    "*Config",  # Django app configs (INSTALLED_APPS) and their ready()
    "ready",
    "clean_*",  # Django form field cleaning
    "has_*_permission",  # Django admin
    "delete_queryset",
    "pytest_*",  # pytest hooks
    "django_db_modify_db_settings",  # a pytest-django fixture named to override its own
    "do_GET",  # http.server handlers in tests
    "do_POST",
    "log_message",
    "has_permission",  # DRF permission classes
    "validate",  # DRF serializers' object-level validation
    "get_*",  # DRF SerializerMethodField getters
    "as_sqlite",  # Django Func: the SQL of another database vendor
    "_put",  # kombu virtual transport channel (ckptweb/filesystem_broker.py)
    "_get",
    "_queue_bind",
    "onQuery*",  # PySpark's StreamingQueryListener callbacks
    "init",  # PySpark's StatefulProcessor callbacks (transformWithStateInPandas, pipelines/tws_queries.py)
    "handleInputRows",
    "handleExpiredTimer",
]
# Where names are used but not as Python names: templates (filters, tags, properties) and the
# dotted strings of settings and urls (hooks, routers, handlers).
NAMES_USED_IN_TEXT = ["templates/**/*.html", "ckptweb/settings.py", "ckptweb/urls.py"]


def find_dead_code() -> list[str]:
    """Return one line per unused definition, as vulture words it."""
    scan = vulture.Vulture(ignore_names=ALLOWED_NAMES, ignore_decorators=ALLOWED_DECORATORS)
    scan.scavenge([str(ROOT / source) for source in SOURCES], exclude=EXCLUDE)
    scan.scan(_uses_of_words_in_text(), filename="<templates, settings and urls>")
    return [item.get_report() for item in scan.get_unused_code(min_confidence=60) if item.typ in KINDS]


def _uses_of_words_in_text() -> str:
    """A module that uses, as attributes, every word of the templates and of settings' strings."""
    words = set()
    for pattern in NAMES_USED_IN_TEXT:
        for path in ROOT.glob(pattern):
            words.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", path.read_text()))
    return "\n".join(f"_.{word}" for word in sorted(words) if not keyword.iskeyword(word))


if __name__ == "__main__":
    dead = find_dead_code()
    print("\n".join(dead) or "dead code: none")
    sys.exit(1 if dead else 0)
