"""What a test run writes to the machine's Redis lives under names of its own, deleted at the end.

The Redis of the README's test command is shared by every run on the machine (a developer's and CI's).
Cache keys (sessions, login limits, cached fragments and trends) get the run's own prefix, so one run
never reads what another cached; worker queues get the run's own names, so kombu's bindings of them
can be found and deleted. tests/conftest.py applies both for the whole session.
"""

from __future__ import annotations

import os
import uuid

RUN = f"ckptweb-test-{os.getpid()}"
CACHE_KEY_PREFIX = RUN  # Django's RedisCache writes "<prefix>:<version>:<key>"
# kombu keeps a deadline per bound exchange here (kombu.transport.redis.Channel.keyprefix_binding_deadlines).
BINDING_DEADLINES = "_kombu.binding_deadlines"
UNACKED, UNACKED_INDEX = "unacked", "unacked_index"  # Channel.unacked_key, unacked_index_key


def queue_of_this_run(kind: str = "") -> str:
    """A queue name no other run uses (kombu names its binding keys after it)."""
    return f"{RUN}-{kind}{uuid.uuid4().hex[:8]}"


def delete_keys_of_this_run(redis_url: str) -> list[str]:
    """Delete the cache keys and the queues' lists and bindings of this run; return their names."""
    import redis

    client = redis.Redis.from_url(redis_url, decode_responses=True)
    keys = [*client.scan_iter(match=f"{CACHE_KEY_PREFIX}:*"), *client.scan_iter(match=f"*{RUN}-*")]
    if keys:
        client.delete(*keys)
    # A deadline whose binding is gone (ours, or a stopped worker's remote-control exchange) is stale.
    for exchange in client.zrange(BINDING_DEADLINES, 0, -1):
        if RUN in exchange or not client.exists(f"_kombu.binding.{exchange}"):
            client.zrem(BINDING_DEADLINES, exchange)
            keys.append(f"{BINDING_DEADLINES}[{exchange}]")
    # Messages a killed worker took and never acknowledged, kept by kombu to deliver again.
    for tag, message in client.hscan_iter(UNACKED):
        if f'"{RUN}-' in message:
            client.hdel(UNACKED, tag)
            client.zrem(UNACKED_INDEX, tag)
            keys.append(f"{UNACKED}[{tag}]")
    return keys
