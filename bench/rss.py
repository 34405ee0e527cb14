"""Resident memory of a process and its children, read from /proc (Linux), for the memory benches."""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")


def rss_mb(pid: int) -> float:
    """The resident set size of ``pid`` in MB (VmRSS of /proc/PID/status); 0 once it has exited."""
    try:
        status = (PROC / str(pid) / "status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def child_pids(pid: int) -> list[int]:
    """The live children of ``pid``, in pid order (the parent field of every /proc/N/stat)."""
    children = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue
        # The command name in brackets may hold spaces; the parent pid is the 2nd field after it.
        if int(stat.rpartition(")")[2].split()[1]) == pid:
            children.append(int(entry.name))
    return sorted(children)


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, as uptime shows them."""
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())
