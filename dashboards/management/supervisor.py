"""The processes `manage.py demo` starts, kept running: one that exits is started again and said so.

A demo on one machine must not lose its web server, beat and queries because one child died (a
worker killed by the OOM killer, a crash in a dependency): the supervisor restarts the child that
exited and prints which one and why. A child that keeps dying (RESTART_LIMIT exits within
RESTART_WINDOW_SECONDS) is given up, loudly, and the others go on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

RESTART_LIMIT = 5
RESTART_WINDOW_SECONDS = 300
STOP_TIMEOUT_SECONDS = 30


@dataclass
class Child:
    """One supervised command; ``restart_kwargs`` are Popen's arguments when it is started again."""

    name: str
    command: list[str]
    process: subprocess.Popen
    restart_kwargs: dict
    exits: deque[float] = field(default_factory=deque)
    given_up: bool = False


class Supervisor:
    """Start commands, restart the ones that exit, stop them all in reverse order."""

    def __init__(self, say: Callable[[str], None], *, clock: Callable[[], float] = time.monotonic) -> None:
        self.say, self.clock = say, clock
        self.children: list[Child] = []

    def start(self, name: str, command: list[str], *, restart_kwargs: dict | None = None, **kwargs) -> subprocess.Popen:
        """Start ``command``; when it exits it is started again with ``restart_kwargs`` (default: ``kwargs``)."""
        process = _popen(command, kwargs)
        self.children.append(Child(name, command, process, kwargs if restart_kwargs is None else restart_kwargs))
        return process

    def check(self) -> None:
        """Restart every child that has exited since the last check (or give it up)."""
        for child in self.children:
            if not child.given_up and child.process.poll() is not None:
                self._handle_exit(child)

    def _handle_exit(self, child: Child) -> None:
        now = self.clock()
        child.exits.append(now)
        while child.exits and child.exits[0] < now - RESTART_WINDOW_SECONDS:
            child.exits.popleft()
        status = _describe_status(child.process.returncode)
        if len(child.exits) > RESTART_LIMIT:
            child.given_up = True
            self.say(
                f"demo: {child.name} {status}, its {len(child.exits)}th exit in {RESTART_WINDOW_SECONDS} s: "
                "not restarted again; the other processes go on"
            )
            return
        child.process = _popen(child.command, child.restart_kwargs)
        self.say(f"demo: {child.name} {status}; restarted it (pid {child.process.pid})")

    def stop(self) -> None:
        """SIGTERM to each child, newest first; a child that has not stopped in time is killed with its group."""
        for child in reversed(self.children):
            if child.process.poll() is None:
                child.process.terminate()
        for child in self.children:
            try:
                child.process.wait(timeout=STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                os.killpg(child.process.pid, signal.SIGKILL)


def _popen(command: list[str], kwargs: dict) -> subprocess.Popen:
    # Each child leads its own process group so that stopping it also stops what it started (the JVM).
    return subprocess.Popen(command, start_new_session=True, **kwargs)


def _describe_status(returncode: int) -> str:
    if returncode < 0:
        return f"was killed by {signal.Signals(-returncode).name}"
    return f"exited with status {returncode}"
