"""Families from the last full inspection pass: state stores, compactible logs, inventory, findings.

One aggregate query each. State stores are summed over partitions and stores (and over operators
unless ``per_operator``, which adds ``operator_id``: the directory state/<id>). Compactible logs
are few per checkpoint (one per file source plus the file sink), so each gets its own ``log``
label. The inventory has a fixed set of directory kinds.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Count, F, Max, Q, QuerySet, Sum

from dashboards.metrics.families import CheckpointLabels, add, gauge
from dashboards.models import DirectoryInventory, Finding, MetadataLog, StatePartition


def state_store_families(labels: CheckpointLabels, *, per_operator: bool) -> Iterator:
    families = _state_store_gauges(per_operator)
    rows = _state_store_sums(per_operator)
    for row in rows:
        extra_values = (str(row["operator"]),) if per_operator else ()
        for name, family in families.items():
            add(family, labels, row["checkpoint_id"], row[f"sum_{name}"], *extra_values)
    yield from families.values()


def _state_store_gauges(per_operator: bool) -> dict:
    """The state store gauges by the name of the sum that fills each."""
    extra = ("operator_id",) if per_operator else ()
    scope = ", per operator (state/<operator_id>)" if per_operator else ""
    return {
        "partitions": gauge("state_store_partitions", f"State store directories (partition x store){scope}.", extra),
        "rows": gauge(
            "state_store_rows",
            f"Rows at the restart version, summed over the partitions whose rows were counted{scope}.",
            extra,
        ),
        "uncounted": gauge(
            "state_store_uncounted_partitions",
            f"Partitions whose rows were not counted (load chain over CKPTWEB_STATE_ROWS_MAX_BYTES){scope}.",
            extra,
        ),
        "disk_bytes": gauge("state_store_disk_bytes", f"Bytes of every state file on storage{scope}.", extra),
        "load_bytes": gauge(
            "state_store_restart_load_bytes",
            f"Bytes a restart reads to load every partition (snapshot + deltas){scope}.",
            extra,
        ),
        "max_delta_chain": gauge(
            "state_store_max_delta_chain",
            f"Longest chain of deltas/changelogs replayed after the last snapshot, over partitions{scope}.",
            extra,
        ),
    }


def _state_store_sums(per_operator: bool) -> QuerySet:
    """Each checkpoint's (or operator's) partition count and sums of its state partitions' figures."""
    group = ("checkpoint_id", "operator") if per_operator else ("checkpoint_id",)
    # Annotation names must not repeat field names (rows, load_bytes): prefix them.
    return (
        StatePartition.objects.order_by()
        .values(*group)
        .annotate(
            sum_partitions=Count("pk"),
            sum_rows=Sum("rows"),
            sum_uncounted=Count("pk", filter=Q(rows__isnull=True)),
            sum_disk_bytes=Sum("bytes_on_disk"),
            sum_load_bytes=Sum("load_bytes"),
            sum_max_delta_chain=Max("delta_chain"),
        )
    )


def state_variable_families(labels: CheckpointLabels) -> Iterator:
    """Per state variable of transformWithState stores, summed over partitions and stores."""
    extra = ("operator_id", "variable", "kind")
    rows = gauge(
        "state_variable_rows",
        "Rows of a transformWithState state variable at the restart version, as Spark's statestore reader "
        "returns them (list elements for a ListState), over the partitions whose variables were counted.",
        extra,
    )
    size = gauge("state_variable_bytes", "Bytes of a state variable's keys and values, over partitions.", extra)
    for (checkpoint_id, *extra_values), (values, size_bytes) in sorted(_state_variable_totals().items()):
        add(rows, labels, checkpoint_id, values, *extra_values)
        add(size, labels, checkpoint_id, size_bytes, *extra_values)
    yield from (rows, size)


def _state_variable_totals() -> dict[tuple[int, str, str, str], list[int]]:
    """(checkpoint pk, operator, variable, kind) -> [values, bytes] summed over its partitions."""
    totals: dict[tuple[int, str, str, str], list[int]] = {}
    partitions = (
        StatePartition.objects.order_by().exclude(variables=[]).values_list("checkpoint_id", "operator", "variables")
    )
    for checkpoint_id, operator, variables in partitions:
        for figures in variables:
            total = totals.setdefault((checkpoint_id, str(operator), figures["name"], figures["kind"]), [0, 0])
            total[0] += figures["values"]
            total[1] += figures["bytes"]
    return totals


# MetadataLog column -> (family name, documentation); all gauges labelled by log and kind.
METADATA_LOG_GAUGES = {
    "compact_interval": (
        "metadata_log_compact_interval_batches",
        "Compact interval of the log: every Nth batch file is a .compact file.",
    ),
    "latest_compact_bytes": ("metadata_log_compact_file_bytes", "Size of the newest .compact file of the log."),
    "live_entries": ("metadata_log_live_entries", "Entries (files) the newest compaction carries forward."),
    "latest_batch_id": ("metadata_log_latest_batch_id", "Newest batch id of the log."),
}


def metadata_log_families(labels: CheckpointLabels) -> Iterator:
    families = {
        column: gauge(name, documentation, ("log", "kind"))
        for column, (name, documentation) in METADATA_LOG_GAUGES.items()
    }
    for log in MetadataLog.objects.order_by().values("checkpoint_id", "path", "kind", *METADATA_LOG_GAUGES):
        for column, family in families.items():
            add(family, labels, log["checkpoint_id"], log[column], log["path"], log["kind"])
    yield from families.values()


def inventory_families(labels: CheckpointLabels) -> Iterator:
    """Files and bytes of the newest inventory pass, by directory kind.

    The newest pass is the one taken at the checkpoint's last_inspected_at: workers.inspection
    stamps both with the same time.
    """
    files = gauge(
        "checkpoint_files",
        "Files on storage at the last inventory, by directory kind (the sink log lives beside the output).",
        ("kind",),
    )
    size = gauge("checkpoint_bytes", "Bytes on storage at the last inventory, by directory kind.", ("kind",))
    rows = (
        DirectoryInventory.objects.filter(taken_at=F("checkpoint__last_inspected_at"))
        .order_by()
        .values("checkpoint_id", "kind")
        .annotate(sum_files=Sum("files"), sum_bytes=Sum("size_bytes"))
    )
    for row in rows:
        add(files, labels, row["checkpoint_id"], row["sum_files"], row["kind"])
        add(size, labels, row["checkpoint_id"], row["sum_bytes"], row["kind"])
    yield from (files, size)


def finding_families(labels: CheckpointLabels) -> Iterator:
    """Open integrity findings by severity; every severity of every checkpoint has a sample (0 when none)."""
    findings = gauge("integrity_findings", "Open integrity findings by severity (info, warning, error).", ("severity",))
    by_key = _open_finding_counts()
    for pk in labels:
        for severity in Finding.Severity:
            add(findings, labels, pk, by_key.get((pk, severity.value), 0), severity.label)
    yield findings


def _open_finding_counts() -> dict[tuple[int, str], int]:
    """(checkpoint pk, severity) -> how many open findings; pairs with none are absent."""
    counts = (
        Finding.objects.filter(resolved_at__isnull=True)
        .order_by()
        .values("checkpoint_id", "severity")
        .annotate(n=Count("pk"))
    )
    return {(row["checkpoint_id"], row["severity"]): row["n"] for row in counts}
