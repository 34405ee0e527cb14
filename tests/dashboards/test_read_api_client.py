"""CheckpointViewClient against a real HTTP server: pytest-django's live server, a closed port, a failing server.

Unlike the other tests of this folder these need Django and a database: the server side is the
real read API answering from what a real sync stored.
"""

from __future__ import annotations

import http.server
import json
import socket
import threading
from io import StringIO

import pytest
from django.core.management import call_command
from rest_framework.authtoken.models import Token

from dashboards.models import Checkpoint, SyncRun
from fixture_paths import KILLED_MID_BATCH
from workers.checkpoint import client as client_module
from workers.checkpoint.client import BatchView, CheckpointViewClient, ServerRefusedError, read_storage_view
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

pytestmark = pytest.mark.django_db(transaction=True)


def spark_batches(fixture) -> tuple[BatchView, ...]:
    """The batches Spark itself read back from the fixture's offset and commit logs."""
    report = json.loads((fixture / "spark-report.json").read_text())
    committed = {entry["batch_id"] for entry in report["commit_log"]}
    return tuple(
        BatchView(
            entry["batch_id"], entry["batch_timestamp_ms"], entry["batch_watermark_ms"], entry["batch_id"] in committed
        )
        for entry in report["offset_log"]
    )


@pytest.fixture
def token(django_user_model) -> str:
    return Token.objects.create(user=django_user_model.objects.create_user("reader")).key


@pytest.fixture
def closed_port_url() -> str:
    """A local address nothing listens on: the port was free a moment ago and is closed now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def failing_server():
    """A real HTTP server answering every GET with the status and body a test sets."""
    answer = {"status": 500, "body": b"{}"}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(answer["status"])
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(answer["body"])

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", answer
    server.shutdown()
    server.server_close()


def test_the_server_view_equals_the_storage_view_and_what_spark_wrote(live_server, killed_synced, token):
    view = CheckpointViewClient(live_server.url, token).read_view(killed_synced.url)
    from_storage = read_storage_view(killed_synced.url, CheckpointStorage(killed_synced.url), reason="compared")

    assert (view.source, view.name, view.reason) == ("server", "killed", "")
    assert view == from_storage
    assert view.batches == spark_batches(KILLED_MID_BATCH)
    assert (view.latest_batch_id, view.latest_committed_batch_id) == (6, 5)


def test_the_client_follows_every_page_of_batches(live_server, killed_synced, token, monkeypatch):
    monkeypatch.setattr(client_module, "PAGE_ROWS", 3)
    view = CheckpointViewClient(live_server.url, token).read_view(killed_synced.url)
    assert view.source == "server"
    assert view.batches == spark_batches(KILLED_MID_BATCH)


def test_an_unreachable_server_gives_the_storage_view_and_says_why(closed_port_url, copy_checkpoint):
    url = str(copy_checkpoint(KILLED_MID_BATCH / "checkpoint", name="killed"))

    view = CheckpointViewClient(closed_port_url, "any-token", timeout=2).read_view(url)

    assert view.source == "storage"
    assert view.reason.startswith("the server is unavailable") and "refused" in view.reason
    assert view.batches == spark_batches(KILLED_MID_BATCH)


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        (500, b"{}", "the server failed: 500"),
        (200, b"<html>proxy login</html>", "the answer is not JSON"),
        (200, b"[]", "not a JSON object"),
    ],
    ids=["5xx", "html", "json-array"],
)
def test_a_failing_server_gives_the_storage_view(failing_server, copy_checkpoint, status, body, reason):
    base_url, answer = failing_server
    answer.update(status=status, body=body)
    url = str(copy_checkpoint(KILLED_MID_BATCH / "checkpoint", name="killed"))

    view = CheckpointViewClient(base_url, "any-token").read_view(url)

    assert (view.source, reason in view.reason) == ("storage", True)
    assert view.batches == spark_batches(KILLED_MID_BATCH)


def test_a_server_behind_storage_gives_the_storage_view_and_catches_up(live_server, killed_synced, token, eager_celery):
    # The server as it was before it killed_synced batches 5 and 6.
    killed_synced.batches.filter(batch_id__gte=5).delete()
    Checkpoint.objects.filter(pk=killed_synced.pk).update(latest_batch_id=4, latest_committed_batch_id=4)
    runs_before = SyncRun.objects.filter(checkpoint=killed_synced).count()

    view = CheckpointViewClient(live_server.url, token).read_view(killed_synced.url)

    assert view.source == "storage"
    assert view.reason == "the server is behind: offsets/5 is on storage but not on the server"
    assert view.batches == spark_batches(KILLED_MID_BATCH)
    # The client told the server, which killed_synced once (eagerly, inside that request).
    assert SyncRun.objects.filter(checkpoint=killed_synced).count() == runs_before + 1
    assert sorted(killed_synced.batches.values_list("batch_id", flat=True)) == [3, 4, 5, 6]


def test_a_checkpoint_the_server_does_not_know_is_read_from_storage(live_server, token, copy_checkpoint):
    url = str(copy_checkpoint(KILLED_MID_BATCH / "checkpoint", name="unregistered"))
    view = CheckpointViewClient(live_server.url, token).read_view(url)
    assert (view.source, view.reason) == ("storage", "the server has no checkpoint registered at this URL")


def test_a_wrong_token_is_an_error_not_a_fallback(live_server, killed_synced):
    with pytest.raises(ServerRefusedError, match="401"):
        CheckpointViewClient(live_server.url, "not-a-token").read_view(killed_synced.url)


def test_inspect_checkpoint_via_a_server_says_where_the_view_came_from(
    live_server, killed_synced, token, closed_port_url
):
    through_server, without_server = StringIO(), StringIO()
    call_command(
        "inspect_checkpoint", killed_synced.url, "--via", live_server.url, "--token", token, stdout=through_server
    )
    call_command(
        "inspect_checkpoint", killed_synced.url, "--via", closed_port_url, "--token", token, stdout=without_server
    )

    assert through_server.getvalue().splitlines()[0].startswith("source:      server (killed, signature ")
    assert without_server.getvalue().splitlines()[0].startswith("source:      storage: the server is unavailable")
    assert "uncommitted: 6" in through_server.getvalue() and "uncommitted: 6" in without_server.getvalue()
