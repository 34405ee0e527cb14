"""The storage edge: the only part of the library that imports fsspec.

A ``CheckpointStorage`` is one checkpoint root (a local path or any fsspec URL such as
``file:///data/ckpt``, ``memory://ckpt`` or ``s3://bucket/ckpt``). Everything below it is named
by a relative path that always uses ``/`` (``offsets/3``, ``state/0/1/4.delta``). The package
checks that the root lies under an allowed root (locations), lists and reads, counts every call
(checkpointstorage), reads local files with plain system calls (localfiles), and translates
``FileNotFoundError``, ``PermissionError`` and other OS/fsspec errors into the library's own errors
with the relative path attached (entries).
"""
