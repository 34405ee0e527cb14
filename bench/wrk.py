"""Concurrent clients from wrk (Debian's package), a load tool in C.

Python threads as clients share one interpreter lock and cost a few milliseconds of CPU per
request on the same 2 cores as the server: at 50 clients they queued behind each other and
added to the latencies they measured. wrk's event loop costs tens of microseconds a request.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

REPORT_SCRIPT = Path(__file__).with_name("wrk_percentiles.lua")


def require_wrk() -> str:
    path = shutil.which("wrk")
    if path is None:
        raise SystemExit("wrk is not installed: apt-get install wrk (Debian's package)")
    return path


def wrk_command(
    url: str, *, connections: int, seconds: int, headers: dict[str, str], paths_file: Path | None = None
) -> list[str]:
    """The wrk command that keeps ``connections`` requests in flight for ``seconds``.

    With ``paths_file`` each request asks for a path drawn from it (one per line) on ``url``'s host.
    """
    command = [
        require_wrk(),
        f"--connections={connections}",
        f"--threads={min(2, connections)}",
        f"--duration={seconds}s",
        "--timeout=30s",
        f"--script={REPORT_SCRIPT}",
    ]
    for name, value in headers.items():
        command += ["--header", f"{name}: {value}"]
    command.append(url)
    return [*command, "--", str(paths_file)] if paths_file else command


def wrk_figures(output: str) -> dict:
    """wrk's figures (requests, errors, p50_ms, p95_ms, p99_ms, max_ms, seconds) from its output."""
    return json.loads(output.strip().splitlines()[-1])


def run_wrk(url: str, *, connections: int, seconds: int, headers: dict[str, str]) -> dict:
    """Keep ``connections`` requests of ``url`` in flight for ``seconds``; wrk's figures as a dict."""
    command = wrk_command(url, connections=connections, seconds=seconds, headers=headers)
    return wrk_figures(subprocess.run(command, check=True, capture_output=True, text=True).stdout)


def run_one_client(url: str, *, seconds: int, headers: dict[str, str]) -> dict:
    """One Python client asking for ``url`` back to back for ``seconds``: wrk's figures without wrk.

    For one connection only (the threads' contention above does not arise); the client's own
    CPU, about a millisecond a request, runs on the server's cores as wrk's does.
    """
    import time
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    milliseconds, errors = [], 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        sent = time.perf_counter()
        status = _get_on_new_connection(parts.hostname, parts.port, path, headers)
        milliseconds.append((time.perf_counter() - sent) * 1000)
        errors += status >= 400
    return _figures_as_wrk_gives_them(milliseconds, errors, seconds=time.perf_counter() - started)


def _figures_as_wrk_gives_them(milliseconds: list[float], errors: int, *, seconds: float) -> dict:
    """The figures of ``wrk_figures`` from the requests' milliseconds."""
    ordered = sorted(milliseconds)
    return {
        "requests": len(ordered),
        "errors": errors,
        "p50_ms": _nearest_rank(ordered, 0.5),
        "p95_ms": _nearest_rank(ordered, 0.95),
        "p99_ms": _nearest_rank(ordered, 0.99),
        "max_ms": ordered[-1],
        "seconds": seconds,
    }


def _get_on_new_connection(host: str, port: int | None, path: str, headers: dict[str, str]) -> int:
    """GET ``path`` on a connection of its own, read the whole answer and return its status."""
    import http.client

    connection = http.client.HTTPConnection(host, port, timeout=30)
    connection.request("GET", path, headers=headers)
    response = connection.getresponse()
    response.read()
    connection.close()
    return response.status


def _nearest_rank(ordered: list[float], fraction: float) -> float:
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]
