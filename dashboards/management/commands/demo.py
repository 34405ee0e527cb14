"""`manage.py demo`: the whole system on one machine, with live PySpark queries to watch.

Migrates, creates a demo user, collects the static files (once per change of them), starts the
PySpark demo pipeline (pipelines/demo.py), registers the checkpoints it writes, then runs gunicorn
(static files served as in production: CKPTWEB_SERVE_COLLECTED_STATIC), a Celery worker and
celery beat until Ctrl-C or
SIGTERM, when it stops every process it started. A process that exits meanwhile is started again
and said so (dashboards/management/supervisor.py), instead of ending the demo.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.staticfiles import finders
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from dashboards.management.supervisor import Supervisor

PIPELINE_USER = "demo-pipeline"
# The demo pipeline's spark.sql.streaming.fileSink.log.compactInterval (pipelines/demo.py DEMO_CONF).
DEMO_COMPACT_INTERVAL = 5
DEMO_USER = "demo"
DEMO_SYNC_INTERVAL_SECONDS = 10
PIPELINE_START_TIMEOUT_SECONDS = 300


class Command(BaseCommand):
    help = "Run the dashboard, a worker, celery beat and live demo PySpark queries until interrupted."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--seconds", type=int, default=0, help="Stop after this many seconds (0: run until interrupted)."
        )

    def handle(self, *args, port: int, seconds: int, **options) -> None:
        call_command("migrate", verbosity=0)
        web_env = web_environment()
        collect_static(web_env)
        password = _ensure_demo_user()
        supervisor = Supervisor(self._say)
        # Installed explicitly: a shell that starts us in the background leaves SIGINT ignored.
        _on_stop_signals(_raise_keyboard_interrupt)
        try:
            self._start_all(supervisor, port, web_env, password)
            _supervise(supervisor, seconds)
        except KeyboardInterrupt:
            self.stdout.write("stopping…")
        finally:
            # A second Ctrl-C must not cut the shutdown short.
            _on_stop_signals(signal.SIG_IGN)
            supervisor.stop()

    def _start_all(self, supervisor: Supervisor, port: int, web_env: dict[str, str], password: str) -> None:
        """The pipeline (its checkpoints registered as it announces them), Celery and the web server;
        then where the demo serves and how to sign in."""
        pipeline = _start_pipeline(supervisor, port)
        self._register_demo_checkpoints(pipeline)
        supervisor.start("the Celery worker", _celery("worker", "--loglevel=INFO", "--concurrency=2"))
        supervisor.start("celery beat", _celery("beat", "--loglevel=INFO"))
        supervisor.start("the web server (gunicorn)", web_command(port), env=web_env)
        self.stdout.write(
            self.style.SUCCESS(f"ckptweb demo: http://127.0.0.1:{port}/  user {DEMO_USER!r} password {password!r}")
        )
        self.stdout.write("Press Ctrl-C to stop everything.")

    def _say(self, line: str) -> None:
        self.stdout.write(self.style.WARNING(line))

    def _register_demo_checkpoints(self, pipeline: subprocess.Popen) -> None:
        """Register each checkpoint the pipeline announces on stdout ("checkpoint NAME PATH")."""
        deadline = time.monotonic() + PIPELINE_START_TIMEOUT_SECONDS
        registered = 0
        for line in pipeline.stdout:
            parts = line.decode().split()
            if parts[:1] == ["checkpoint"] and len(parts) == 4:
                self._register(name=parts[1], url=parts[2], sink_log=parts[3])
                registered += 1
            elif parts[:1] == ["ready"] or time.monotonic() > deadline:
                break
        if registered == 0:
            raise CommandError("the demo pipeline announced no checkpoint; see its output above")
        # Keep draining the pipeline's stdout so that it never blocks on a full pipe.
        threading.Thread(target=_copy_lines, args=(pipeline.stdout,), daemon=True).start()

    def _register(self, *, name: str, url: str, sink_log: str) -> None:
        call_command(
            "register_checkpoint",
            name,
            url,
            sink_log=sink_log,
            interval=DEMO_SYNC_INTERVAL_SECONDS,
            compact_interval=DEMO_COMPACT_INTERVAL,
            stdout=self.stdout,
        )


def _on_stop_signals(handler) -> None:
    """Handle SIGINT, SIGTERM and SIGHUP with ``handler``."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, handler)


def _start_pipeline(supervisor: Supervisor, port: int) -> subprocess.Popen:
    """The PySpark demo pipeline, sending its progress to our ingest API with the pipeline's token."""
    ingest = {
        "CKPTWEB_INGEST_URL": f"http://127.0.0.1:{port}",
        "CKPTWEB_INGEST_TOKEN": _ensure_pipeline_token(),
    }
    pipeline_env = {**os.environ, **ingest}
    # Started again after a crash, it resumes its queries from their checkpoints, which are
    # registered already: its output then goes straight to ours.
    return supervisor.start(
        "the PySpark demo pipeline",
        [sys.executable, "-m", "pipelines.demo", str(_demo_dir())],
        stdout=subprocess.PIPE,
        env=pipeline_env,
        restart_kwargs={"env": pipeline_env},
    )


def web_environment() -> dict[str, str]:
    """The web server's environment: debug mode, with static files served as production serves them.

    A person deciding whether to adopt ckptweb meets it here, on a first visit: hashed names,
    Brotli or gzip copies, cached for a year (not plotly.js revalidated on every page).
    """
    return {**os.environ, "CKPTWEB_SERVE_COLLECTED_STATIC": "true"}


def web_command(port: int) -> list[str]:
    # No control socket: gunicorn's default is one path for every server of the user
    # (~/.gunicorn/gunicorn.ctl), which a second one (a test's, a bench's) takes over and deletes.
    bind = ["--bind", f"127.0.0.1:{port}", "--workers", "2", "--no-control-socket"]
    return [sys.executable, "-m", "gunicorn", "ckptweb.wsgi", *bind]


def collect_static(environment: dict[str, str]) -> None:
    """Run collectstatic with ``environment``'s storage, unless its output is newer than every static file.

    It compresses every file (plotly.js at Brotli's best takes seconds), so a restart skips it.
    """
    manifest = Path(settings.STATIC_ROOT) / "staticfiles.json"
    if manifest.exists() and manifest.stat().st_mtime > _newest_static_file_mtime():
        return
    command = [sys.executable, str(settings.BASE_DIR / "manage.py"), "collectstatic", "--noinput", "--clear"]
    subprocess.run([*command, "--verbosity=0"], env=environment, check=True)


def _newest_static_file_mtime() -> float:
    found = (storage.path(path) for finder in finders.get_finders() for path, storage in finder.list([]))
    return max(Path(path).stat().st_mtime for path in found)


def _demo_dir() -> Path:
    """The demo writes inside the first configured root, so the web UI may register it."""
    root = Path(settings.CHECKPOINT_ROOTS[0].removeprefix("file://"))
    return root / "demo"


def _ensure_demo_user() -> str:
    password = os.environ.get("CKPTWEB_DEMO_PASSWORD", "ckptweb-demo")
    user, _ = get_user_model().objects.get_or_create(username=DEMO_USER)
    user.is_staff = user.is_superuser = True
    user.set_password(password)
    user.save()
    return password


def _ensure_pipeline_token() -> str:
    """A machine user that may only send progress, and its API token (the listener's credentials)."""
    from django.contrib.auth.models import Permission
    from rest_framework.authtoken.models import Token

    user, _ = get_user_model().objects.get_or_create(username=PIPELINE_USER)
    user.user_permissions.add(Permission.objects.get(codename="ingest_progress"))
    return Token.objects.get_or_create(user=user)[0].key


def _copy_lines(stream) -> None:
    for line in stream:
        sys.stdout.write(line.decode(errors="replace"))


def _celery(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "celery", "-A", "ckptweb", *arguments]


def _supervise(supervisor: Supervisor, seconds: int) -> None:
    deadline = time.monotonic() + seconds if seconds else None
    while deadline is None or time.monotonic() < deadline:
        supervisor.check()
        time.sleep(1)


def _raise_keyboard_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt
