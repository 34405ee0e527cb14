"""moto's S3 server on loopback, with a delay per request and a count of requests in flight.

moto answers in about 4 ms of its own CPU; a real object store is tens of milliseconds away and
serves many requests at once. The delay (a sleep, which leaves the CPU to other requests) makes
the round trip the cost, as it is on a real store; ``max_in_flight`` tells how many requests a
client really had open together. Used by bench/s3_first_sync.py and tests/s3.

``S3ServerProcess`` runs the same server in a process of its own (``serve``),
so that moto's CPU does not compete with the measured code for one interpreter lock; its counts
are read over HTTP (``COUNTS_PATH``, not counted itself).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import make_server


class DelayedS3Server:
    """A threaded moto server that waits ``delay_seconds`` before each request."""

    def __init__(self, port: int = 0, *, delay_seconds: float = 0.0) -> None:
        """``port`` 0: one the system picks (see ``endpoint``)."""
        self.delay_seconds = delay_seconds
        self.requests = 0
        # Requests by S3 operation: "LIST" (ListObjects/ListObjectsV2), "GET", "HEAD", "PUT", ...
        self.requests_by_kind: Counter[str] = Counter()
        self.max_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._app = DomainDispatcherApplication(create_backend_app)
        self._server = make_server("127.0.0.1", port, self._handle, threaded=True, request_handler=MotoRequestHandler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    def start(self) -> DelayedS3Server:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join()

    def serve_forever(self) -> None:
        """Serve in this thread (the process of an S3ServerProcess), instead of ``start``'s thread."""
        self._server.serve_forever()

    def reset_counts(self) -> None:
        with self._lock:
            self.requests = self.max_in_flight = 0
            self.requests_by_kind.clear()

    def _handle(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        if environ.get("PATH_INFO") in (COUNTS_PATH, RESET_PATH):
            if environ["PATH_INFO"] == RESET_PATH:
                self.reset_counts()
            return self._counts(start_response)
        with self._lock:
            self.requests += 1
            self.requests_by_kind[request_kind(environ)] += 1
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            if self.delay_seconds:
                time.sleep(self.delay_seconds)
            # Drain the body here, so that the request counts as in flight until it is answered.
            response = self._app(environ, start_response)
            try:
                return list(response)
            finally:
                if hasattr(response, "close"):  # as a WSGI server must
                    response.close()
        finally:
            with self._lock:
                self._in_flight -= 1

    def _counts(self, start_response: Callable) -> list[bytes]:
        with self._lock:
            body = json.dumps({"requests_by_kind": self.requests_by_kind, "max_in_flight": self.max_in_flight})
        start_response("200 OK", [("Content-Type", "application/json")])
        return [body.encode()]


# Not an S3 path (a bucket name cannot start with "_").
COUNTS_PATH = "/_ckptweb/counts"
RESET_PATH = "/_ckptweb/reset"


class S3ServerProcess:
    """A DelayedS3Server in a child process, started on creation: the same ``endpoint``,
    ``requests_by_kind``, ``reset_counts`` and ``stop``."""

    def __init__(self, *, delay_seconds: float = 0.0) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-c", f"from {__name__} import {serve.__name__} as run; run({delay_seconds!r})"],
            cwd=Path(__file__).resolve().parent.parent,
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self._process.stdout.readline().strip()  # the child prints its endpoint once it listens
        if not line.startswith("http://"):
            self._process.kill()
            raise SystemExit(f"moto's server process did not start: {line!r}")
        self.endpoint = line

    @property
    def requests_by_kind(self) -> Counter[str]:
        with urllib.request.urlopen(self.endpoint + COUNTS_PATH, timeout=30) as answer:
            return Counter(json.load(answer)["requests_by_kind"])

    def reset_counts(self) -> None:
        urllib.request.urlopen(self.endpoint + RESET_PATH, timeout=30).close()

    def stop(self) -> None:
        self._process.terminate()
        self._process.wait(timeout=30)


def request_kind(environ: dict[str, Any]) -> str:
    """The S3 operation of a request: a GET of a bucket (no key) is a listing, else the HTTP method."""
    method = environ["REQUEST_METHOD"]
    key = environ.get("PATH_INFO", "").lstrip("/").partition("/")[2]
    return "LIST" if method == "GET" and not key else method


def serve_s3_for_django(workdir: Path, bucket: str, *, own_process: bool = False) -> DelayedS3Server | S3ServerProcess:
    """Start a server (in a process of its own with ``own_process``), point boto3's credentials and
    ckptweb's storage at it, set Django up in ``workdir``.

    ``s3://<bucket>`` is an allowed checkpoint root (the bucket itself is the caller's to create).
    """
    from bench.django_env import setup_django

    for logger in ("werkzeug", "botocore"):  # a line per request otherwise
        logging.getLogger(logger).setLevel(logging.WARNING)
    server = S3ServerProcess() if own_process else DelayedS3Server().start()
    for name, value in (
        ("AWS_ACCESS_KEY_ID", "bench"),
        ("AWS_SECRET_ACCESS_KEY", "bench"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
    ):
        os.environ[name] = value
    os.environ["CKPTWEB_S3_ENDPOINT_URL"] = server.endpoint
    setup_django(workdir, extra_roots=[f"s3://{bucket}"])
    return server


def serve(delay_seconds: float) -> None:
    """Serve until terminated, in the child of an S3ServerProcess: print the endpoint once listening."""
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = DelayedS3Server(delay_seconds=delay_seconds)
    print(server.endpoint, flush=True)
    server.serve_forever()
