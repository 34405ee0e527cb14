"""The read API (``/api/v1/``): what ckptweb has read from each checkpoint, for machines.

Every answer about a checkpoint says how current it is (``latest_batch_id``,
``latest_committed_batch_id``, ``signature``, also as ``X-Ckptweb-*`` headers), so a client can
tell whether to trust it or read storage itself; a client that knows a newer batch says so with
``known_latest_batch`` and the server queues a catch-up sync (Hudi RFC-03's timeline server).
"""
