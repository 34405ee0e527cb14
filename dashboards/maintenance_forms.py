"""Forms of the maintenance workflow: the request and the confirmation."""
from __future__ import annotations

from typing import Any

from django import forms

from .forms import confirm_typed_name
from .models import Checkpoint, MaintenanceAction

SINK_LOG = "sink"
# Spark's defaults, the starting values of the request form (spark-checkpoint-formats.md §8).
SPARK_MIN_BATCHES_TO_RETAIN = 100
SPARK_MIN_DELTAS_FOR_SNAPSHOT = 10
# Which parameters each action takes; the names are those of the library's plan_* functions.
ACTION_PARAMETERS = {
    MaintenanceAction.PURGE: ("keep_batches",),
    MaintenanceAction.SNAPSHOT: ("min_chain",),
    MaintenanceAction.CLEANUP: ("min_versions_to_retain", "keep_offsets_range"),
    MaintenanceAction.COMPACT: ("log", "min_batches_to_retain"),
}


class MaintenanceRequestForm(forms.Form):
    """Ask for a plan: the action and its thresholds. Nothing happens to storage until confirmed."""

    action = forms.ChoiceField(choices=MaintenanceAction.choices)
    keep_batches = forms.IntegerField(
        min_value=1, initial=SPARK_MIN_BATCHES_TO_RETAIN, required=False,
        help_text="Purge: offsets and commits of at least this many latest batches stay.",
    )
    min_chain = forms.IntegerField(
        min_value=1, initial=SPARK_MIN_DELTAS_FOR_SNAPSHOT, required=False,
        help_text="Snapshot: stores with more deltas than this since their last snapshot get one.",
    )
    min_versions_to_retain = forms.IntegerField(
        min_value=1, initial=SPARK_MIN_BATCHES_TO_RETAIN, required=False,
        help_text="Cleanup: the latest this many state versions stay loadable.",
    )
    keep_offsets_range = forms.BooleanField(
        required=False, initial=True,
        help_text="Cleanup: also keep the state of every batch still in the offset log, so Spark's state reader can read any of them.",
    )
    min_batches_to_retain = forms.IntegerField(
        min_value=1, initial=SPARK_MIN_BATCHES_TO_RETAIN, required=False,
        help_text="Compact: log files the latest this many batches read through stay (Spark's deleteExpiredLog).",
    )
    log = forms.ChoiceField(choices=(), required=False, help_text="Compact: which compactible log (its missing compaction file is written, expired files deleted).")

    def __init__(self, *args: Any, checkpoint: Checkpoint, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["log"].choices = compactible_log_choices(checkpoint)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        action = cleaned.get("action")
        for name in ACTION_PARAMETERS.get(action, ()):
            if cleaned.get(name) in (None, "") and not isinstance(self.fields[name], forms.BooleanField):
                self.add_error(name, "Required for this action.")
        return cleaned

    def parameters(self) -> dict[str, Any]:
        """The parameters of the chosen action only, as the planner takes them."""
        return {name: self.cleaned_data[name] for name in ACTION_PARAMETERS[self.cleaned_data["action"]]}


def compactible_log_choices(checkpoint: Checkpoint) -> list[tuple[str, str]]:
    """The file source logs the last inspection found, and the sink log when one is registered."""
    choices = [(log.path, log.path) for log in checkpoint.metadata_logs.exclude(kind="sink").order_by("path")]
    if checkpoint.sink_log_url:
        choices.append((SINK_LOG, f"file sink log ({checkpoint.sink_log_url})"))
    return choices


class MaintenanceConfirmForm(forms.Form):
    """The second step: a reason for the audit trail, and the checkpoint's name typed out."""

    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), min_length=5, help_text="Kept in the audit trail.")
    checkpoint_name = forms.CharField(help_text="Type the checkpoint's name to confirm.")
    override_query_running = forms.BooleanField(
        required=False, label="Run although the query looks running (audited)",
    )

    def __init__(self, *args: Any, checkpoint: Checkpoint, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.checkpoint = checkpoint

    def clean_checkpoint_name(self) -> str:
        return confirm_typed_name(self.cleaned_data["checkpoint_name"], self.checkpoint)
