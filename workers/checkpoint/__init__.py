"""ckptweb's Django-free reader of Spark Structured Streaming checkpoints.

Storage is reached only through ``CheckpointStorage`` (the storage package, the filesystem edge);
parsers take bytes and a ``source`` name and return frozen dataclasses named after Spark's
classes; every problem is a ``CheckpointError`` whose message starts with the file's path.
"""
