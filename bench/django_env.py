"""Django for a benchmark: the project's settings on a fresh SQLite database in the work dir."""

from __future__ import annotations

import argparse
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"


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


def fresh_embedded_default(workdir: Path) -> None:
    """Empty ``workdir``, then set Django up on it with the embedded default (no PostgreSQL, no Redis)."""
    shutil.rmtree(workdir, ignore_errors=True)
    (workdir / "checkpoints").mkdir(parents=True)
    os.environ.pop("CKPTWEB_REDIS_URL", None)
    setup_django(workdir)


def embedded_environment(workdir: Path, *, debug: str) -> dict[str, str]:
    """The environment of a process (gunicorn, a worker, beat) on the embedded default in ``workdir``."""
    env = {k: v for k, v in os.environ.items() if k not in ("CKPTWEB_DATABASE_URL", "CKPTWEB_REDIS_URL")}
    env.update(
        CKPTWEB_DATA_DIR=str(workdir),
        CKPTWEB_CHECKPOINT_ROOTS=str(workdir / "checkpoints"),
        CKPTWEB_DEBUG=debug,
        CKPTWEB_LOG_LEVEL="WARNING",
    )
    return env


def fixture_checkpoints() -> list[Path]:
    """The PySpark-written fixture checkpoints (tests/fixtures/*/checkpoint) with a committed batch."""
    return sorted(p / "checkpoint" for p in FIXTURES.iterdir() if (p / "checkpoint" / "commits").is_dir())


def add_embedded_arguments(parser: argparse.ArgumentParser, *, workdir: str, debugged: str) -> None:
    """--workdir (default ``workdir``) and --debug (CKPTWEB_DEBUG of ``debugged``, true as in the demo)."""
    parser.add_argument("--workdir", type=Path, default=Path(workdir))
    parser.add_argument("--debug", choices=("true", "false"), default="true", help=f"CKPTWEB_DEBUG of {debugged}")
