"""Integrity checks: what would stop Spark from restarting a query, and what is wrong or wasteful.

Facts are gathered once at the edge (``gather_facts``): one recursive listing of the checkpoint
(and of a file sink's ``_spark_metadata``), and reads of only the files Spark itself reads when
the query restarts:

* ``metadata`` (StreamMetadata, read by StreamExecution);
* ``offsets/<L>`` and ``offsets/<L-1>``, L the latest batch (MicroBatchExecution's
  populateStartOffsets and validateOffsetLogAndGetPrevOffset);
* the latest ``commits/<C>`` (CommitLog.getLatest);
* for each compactible log (a file source's ``sources/<i>``, the sink's ``_spark_metadata``), the
  latest compaction and the batches after it (CompactibleFileStreamLog.allFiles).

Older log files are not read: with Spark's default of 100 retained batches that would cost
hundreds of GETs per check; an empty one is still found by its listed size. Everything after
the gathering is a pure function of the facts, and no damage makes the check raise: a file that
cannot be listed, read or parsed is itself a finding.

Severities: ``error`` = Spark will fail to restart the query (or, where ``restart_impact`` says
so, fails soon after); ``warning`` = the restart works but something is wrong or wasteful;
``info`` = worth knowing. Codes (stable, for filters and tests):

    directory-unreadable     a directory could not be listed
    metadata-missing         no ``metadata`` file (Spark 4.2+ refuses to start)
    log-file-empty           an empty log file ("Incomplete log file")
    log-file-incomplete      a log file that ends before its metadata line
    log-version-unsupported  a ``vN`` header newer than this reader supports
    file-corrupt             any other content Spark cannot parse
    file-unreadable          a read failed (permission, network), or the file vanished
    offsets-gap              batch ids missing from ``offsets/``
    batch-uncommitted        the latest batch has offsets but no commit (normal after a stop mid-batch;
                             while the batch may still be running, ``hold_back_running_batch`` drops it)
    uncommitted-batches      more than one batch after the latest commit
    no-commit-log            written by Spark 2.1 or earlier: no ``commits/`` directory and no SQL
                             conf in the offsets (the batches before the latest count as done)
    commit-missing           a batch below the latest commit has offsets but no commit
    commit-without-offsets   ``commits/<N>`` beyond the latest offsets
    compact-missing          a ``N.compact`` the latest batch of a compactible log is read through
    log-file-missing         a batch file after that compaction
    sink-log-behind-commits  the sink log ends before the latest committed batch
    sink-log-missing         a sink log with no batch file at all
    temporary-file           a temporary file left by an atomic write (or its checksum)
    orphan-checksum          a Hadoop ``.<name>.crc`` whose file is gone
    state-partition-missing  a state partition directory is missing (an operator Spark runs on one
                             partition, a global limit or aggregation, has partition 0 only; never
                             while the restart loads version 0, which is empty)
    state-version-missing    a state store cannot rebuild the version the restart loads

The package holds the gathering (``gather``), the facts (``facts``), the findings (``findings``),
one module per group of rules (``files``, ``batchlogs``, ``compactiblelogs``, ``leftovers``,
``state``) and the list of rules run (``checks``). Import each name from the module that holds it
(``from workers.checkpoint.integrity.gather import check_checkpoint``): docs/architecture.md.
The hold-back of findings about a batch that may still be running is ``running``.
"""
