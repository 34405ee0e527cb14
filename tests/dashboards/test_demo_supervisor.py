"""`manage.py demo` keeps its processes running: real child processes killed under the supervisor."""

from __future__ import annotations

import os
import signal
import sys

from dashboards.management.supervisor import RESTART_LIMIT, Supervisor
from worker_process import wait_for

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]
FAILS_AT_ONCE = [sys.executable, "-c", "raise SystemExit(3)"]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_child_killed_under_the_supervisor_is_started_again_and_the_others_keep_running():
    said: list[str] = []
    supervisor = Supervisor(said.append)
    worker = supervisor.start("the Celery worker", SLEEPER)
    web = supervisor.start("the web server", SLEEPER)
    try:
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(timeout=30)
        supervisor.check()

        restarted = supervisor.children[0].process
        assert restarted.pid != worker.pid and restarted.poll() is None
        assert web.poll() is None and supervisor.children[1].process is web
        assert said == [f"demo: the Celery worker was killed by SIGKILL; restarted it (pid {restarted.pid})"]
    finally:
        supervisor.stop()
    assert all(child.process.poll() is not None for child in supervisor.children)


def test_a_child_that_keeps_exiting_is_given_up_after_the_limit_and_said_so():
    said: list[str] = []
    clock = FakeClock()
    supervisor = Supervisor(said.append, clock=clock)
    supervisor.start("celery beat", FAILS_AT_ONCE)
    web = supervisor.start("the web server", SLEEPER)
    try:
        for _ in range(RESTART_LIMIT + 3):
            wait_for(lambda: supervisor.children[0].process.poll() is not None, "celery beat to exit", timeout=30)
            supervisor.check()
            clock.now += 1

        assert said[:RESTART_LIMIT] == [
            f"demo: celery beat exited with status 3; restarted it (pid {pid})" for pid in _pids(said)
        ]
        assert said[RESTART_LIMIT] == (
            f"demo: celery beat exited with status 3, its {RESTART_LIMIT + 1}th exit in 300 s: not restarted again; "
            "the other processes go on"
        )
        assert len(said) == RESTART_LIMIT + 1
        assert web.poll() is None
    finally:
        supervisor.stop()


def test_exits_further_apart_than_the_window_are_restarted_every_time():
    said: list[str] = []
    clock = FakeClock()
    supervisor = Supervisor(said.append, clock=clock)
    supervisor.start("the Celery worker", FAILS_AT_ONCE)
    try:
        for _ in range(RESTART_LIMIT * 2):
            wait_for(lambda: supervisor.children[0].process.poll() is not None, "the worker to exit", timeout=30)
            supervisor.check()
            clock.now += 301

        assert len(said) == RESTART_LIMIT * 2
        assert all("restarted it" in line for line in said)
    finally:
        supervisor.stop()


def _pids(lines: list[str]) -> list[str]:
    return [line.rsplit("pid ", 1)[1].rstrip(")") for line in lines if "restarted it" in line]
