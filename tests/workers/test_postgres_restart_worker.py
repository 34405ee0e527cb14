"""PostgreSQL restarted under a running worker: the worker survives, syncs during the outage fail
and are retried by the next ones, and nothing written meanwhile is missed.

The machine's PostgreSQL serves other runs, so the test makes a cluster of its own (initdb and
pg_ctl, on a free port, as the postgres user when run as root) and drives ckptweb against it in
subprocesses: migrate, register, a real Celery worker. It plays celery beat itself, sending a sync
every half second through the suite's Redis.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.checkpoint_history import read_template, write_batches
from fixture_paths import REPO_DIR
from worker_process import Periodically, celery_worker, free_port, redis_url_or_skip, wait_for
from workers import tasks

pytestmark = [pytest.mark.worker, pytest.mark.slow]


def _as_postgres(command: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


class PrivateCluster:
    def __init__(self, directory: Path, port: int) -> None:
        binaries = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
        if not binaries:
            pytest.skip("PostgreSQL server binaries are not installed")
        self.bin, self.directory, self.port = Path(binaries[-1]), directory, port
        self.url = f"postgres://postgres@127.0.0.1:{port}/postgres"

    def _run(self, *arguments: str) -> None:
        subprocess.run(_as_postgres([str(self.bin / arguments[0]), *arguments[1:]]), check=True, capture_output=True)

    def create(self) -> None:
        self.directory.mkdir()
        if os.geteuid() == 0:
            shutil.chown(self.directory, "postgres")
            shutil.chown(self.directory.parent, "postgres")
        self._run("initdb", "-D", str(self.directory / "data"), "-A", "trust", "-U", "postgres")

    def start(self) -> None:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.directory}"
        self._run(
            "pg_ctl",
            "-D",
            str(self.directory / "data"),
            "-o",
            options,
            "-l",
            str(self.directory / "log"),
            "-w",
            "start",
        )

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.directory / "data"), "-m", "fast", "-w", "stop")

    def query(self, sql: str) -> tuple | None:
        """One row of ``sql``; None while the server does not answer."""
        import psycopg

        try:
            with psycopg.connect(self.url.replace("postgres://", "postgresql://"), connect_timeout=2) as connection:
                return connection.execute(sql).fetchone()
        except psycopg.OperationalError:
            return None

    def latest_batch_id(self) -> int | None:
        row = self.query("SELECT latest_batch_id FROM dashboards_checkpoint WHERE name = 'q'")
        return row[0] if row else None


@pytest.fixture
def cluster():
    redis_url_or_skip()
    if shutil.which("runuser") is None and os.geteuid() == 0:
        pytest.skip("runuser is needed to run initdb as root")
    directory = Path(tempfile_dir()) / "cluster"
    cluster = PrivateCluster(directory, free_port())
    cluster.create()
    cluster.start()
    yield cluster
    subprocess.run(
        _as_postgres([str(cluster.bin / "pg_ctl"), "-D", str(directory / "data"), "-m", "immediate", "stop"]),
        capture_output=True,
    )
    shutil.rmtree(directory.parent, ignore_errors=True)


def tempfile_dir() -> str:
    """A directory the postgres user may enter (pytest's tmp_path lies under root's 0700 /tmp/pytest-of-root)."""
    import tempfile

    path = tempfile.mkdtemp(prefix="ckptweb-pg-")
    os.chmod(path, 0o755)
    return path


def test_syncs_resume_after_postgresql_restarts_and_nothing_written_meanwhile_is_missed(cluster, tmp_path):
    roots = tmp_path / "checkpoints"
    directory = roots / "q"
    write_batches(directory, range(100), read_template())
    env = {
        **os.environ,
        "CKPTWEB_DATABASE_URL": cluster.url,
        "CKPTWEB_CHECKPOINT_ROOTS": str(roots),
        "CKPTWEB_SYNC_LEASE_SECONDS": "3",
        "CKPTWEB_DATA_DIR": str(tmp_path / "var"),
    }
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "-v0"], cwd=REPO_DIR, env=env, check=True)
    subprocess.run(
        [*manage, "register_checkpoint", "q", str(directory)], cwd=REPO_DIR, env=env, check=True, capture_output=True
    )
    checkpoint_id = 1  # the first row of the new database

    with celery_worker(
        os.environ["CKPTWEB_REDIS_URL"],
        roots,
        env={"CKPTWEB_DATABASE_URL": cluster.url, "CKPTWEB_SYNC_LEASE_SECONDS": "3"},
    ) as (
        queue,
        process,
    ):
        beat = Periodically(0.5, lambda: tasks.sync_checkpoint.apply_async(args=[checkpoint_id], queue=queue))

        def synced_to(latest: int) -> bool:
            beat()
            return cluster.latest_batch_id() == latest

        wait_for(lambda: synced_to(99), "the first sync", timeout=60)
        cluster.stop()
        write_batches(directory, range(100, 110), read_template())
        for _ in range(4):  # syncs the worker gets while the database is down
            tasks.sync_checkpoint.apply_async(args=[checkpoint_id], queue=queue)
        time.sleep(2)
        cluster.start()
        back = time.monotonic()
        wait_for(lambda: synced_to(109), "a sync after PostgreSQL is back", timeout=120)
        print(f"current again {time.monotonic() - back:.1f} s after PostgreSQL restarted")
        assert process.poll() is None, "the worker must survive the database's restart"

    assert cluster.query(
        "SELECT count(*), count(DISTINCT batch_id), min(batch_id), max(batch_id) FROM dashboards_batch"
    ) == (110, 110, 0, 109)
    assert cluster.query("SELECT count(*) FROM dashboards_syncrun WHERE status = 'running'") == (0,)
