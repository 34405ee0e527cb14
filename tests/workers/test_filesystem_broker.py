"""The embedded default's broker (ckptweb/filesystem_broker.py): messages that are never read half
written, a damaged message that costs one message and not the consumer, exchange tables that are
never seen empty.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os

from kombu import Connection

from ckptweb.filesystem_broker import Channel
from embedded_broker import MESSAGES_PER_PUBLISHER, OLDEST_NAME, PAYLOAD_BYTES, broker_options, connect, publish

HALF_WRITTEN = f"{OLDEST_NAME}_half.work.msg"


def test_a_consumer_reading_while_two_processes_publish_gets_every_message_whole(tmp_path):
    context = multiprocessing.get_context("spawn")
    publishers = [context.Process(target=publish, args=(str(tmp_path), number)) for number in range(2)]
    received = []
    with connect(tmp_path) as connection:
        queue = connection.SimpleQueue("work")
        for publisher in publishers:
            publisher.start()
        while len(received) < 2 * MESSAGES_PER_PUBLISHER:
            message = queue.get(timeout=120)  # raises Empty, naming the wait, if the publishers stop short
            received.append((message.payload["publisher"], message.payload["number"], len(message.payload["filler"])))
            message.ack()
        queue.close()
    for publisher in publishers:
        publisher.join(timeout=60)
        assert publisher.exitcode == 0

    expected = {
        (publisher, number, PAYLOAD_BYTES) for publisher in range(2) for number in range(MESSAGES_PER_PUBLISHER)
    }
    assert sorted(received) == sorted(expected)
    assert not os.listdir(tmp_path / "queue") and not os.listdir(tmp_path / "processed")


def test_a_message_that_is_not_json_is_set_aside_with_its_name_and_the_next_one_is_delivered(tmp_path, caplog):
    with connect(tmp_path) as connection:
        queue = connection.SimpleQueue("work")
        # What the stock transport leaves for a reader between creating a message file and writing it.
        (tmp_path / "queue" / HALF_WRITTEN).write_bytes(b'{"body": "eyJ0YXNr')
        queue.put({"n": 1})

        with caplog.at_level(logging.ERROR, logger="ckptweb.filesystem_broker"):
            message = queue.get(timeout=10)
        queue.close()

    assert message.payload == {"n": 1}
    assert (tmp_path / "rejected" / HALF_WRITTEN).read_bytes() == b'{"body": "eyJ0YXNr'
    assert HALF_WRITTEN in caplog.text and "not a JSON message (18 bytes)" in caplog.text


def test_a_message_is_invisible_to_the_queue_until_it_is_complete(tmp_path):
    with connect(tmp_path) as connection:
        channel = connection.default_channel
        channel._put("work", {"n": 1})
        names = os.listdir(tmp_path / "queue")

    assert len(names) == 1 and names[0].endswith(".work.msg")
    assert json.loads((tmp_path / "queue" / names[0]).read_bytes()) == {"n": 1}
    # The name it is written under first matches no queue (kombu matches "<anything>.<queue>.msg").
    assert Channel.__module__ == "ckptweb.filesystem_broker"
    assert ".x.work.msg.tmp".partition(".")[2] != "work.msg"


def test_messages_are_delivered_in_the_order_they_were_sent(tmp_path):
    with connect(tmp_path) as connection:
        queue = connection.SimpleQueue("work")
        for number in range(30):
            queue.put({"n": number})
        received = []
        for _ in range(30):
            message = queue.get(timeout=10)
            received.append(message.payload["n"])
            message.ack()
        queue.close()

    assert received == list(range(30))


def test_an_exchange_table_left_empty_by_the_stock_transport_is_rebuilt_by_the_next_binding(tmp_path, caplog):
    options = broker_options(tmp_path)
    (tmp_path / "control" / "work.exchange").write_bytes(b"")
    with Connection("ckptwebfs://", transport_options=options) as connection:
        with caplog.at_level(logging.ERROR, logger="ckptweb.filesystem_broker"):
            queue = connection.SimpleQueue("work")
            queue.put({"n": 2})
            message = queue.get(timeout=10)
        queue.close()

    assert message.payload == {"n": 2}
    assert json.loads((tmp_path / "control" / "work.exchange").read_bytes()) == [["work", "", "work"]]
    assert "work.exchange is not a JSON list of bindings" in caplog.text


def test_bindings_from_several_connections_all_end_up_in_the_exchange_table(tmp_path):
    for queue_name in ("first", "second", "third"):
        with connect(tmp_path) as connection:
            channel = connection.default_channel
            channel.exchange_declare("shared", type="direct")
            channel.queue_declare(queue_name)
            channel.queue_bind(queue_name, "shared", routing_key=queue_name)

    table = json.loads((tmp_path / "control" / "shared.exchange").read_bytes())
    assert sorted(row[2] for row in table) == ["first", "second", "third"]
    assert not [name for name in os.listdir(tmp_path / "control") if name.endswith(".tmp")]
