"""Forms of the maintenance workflow: the request (an action and its parameters) and the confirmation.

The request is one HTML form: a radio button per action, each followed by a fieldset holding
that action's parameters only (one small Django form per action). The stylesheet hides the
fieldsets of the actions not chosen, so choosing an action shows its parameters alone, with no
script: a destructive workflow stays a plain form (house style), and a browser without the
stylesheet shows every fieldset under its action's name. The server reads only the chosen
action's form. Each fieldset carries a one-line preview, which htmx refreshes as values change.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django import forms

from dashboards.maintenance_page.figures import (
    MaintenanceFigures,
    Preview,
    Suggestion,
    preview_request,
    suggest_parameters,
)
from dashboards.models import Checkpoint, MaintenanceAction, MetadataLog
from dashboards.registry.forms import confirm_typed_name
from workers.checkpoint.maintenance.actions import SINK_LOG

# What each action is for, under its name on the request form.
ACTION_DESCRIPTIONS = {
    MaintenanceAction.PURGE: "Delete offsets/N and commits/N of old batches (HDFSMetadataLog.purge).",
    MaintenanceAction.SNAPSHOT: "Write N.snapshot where a restart replays a long chain of deltas (HDFS-backed state).",
    MaintenanceAction.CLEANUP: "Delete state files that no retained version loads.",
    MaintenanceAction.COMPACT: "Write a missing N.compact of a file source or sink log, and delete its expired files.",
    MaintenanceAction.REWIND: (
        "Make the next run start again at the batch after N: everything the query wrote after batch N "
        "goes (a backup is kept, and the run can be undone). Needs the rewind permission and an approval."
    ),
    MaintenanceAction.SKIP: (
        "Mark an uncommitted batch done without running it, or move one source partition past a range of "
        "offsets or files. Needs the skip permission and an approval."
    ),
    MaintenanceAction.REPAIR: (
        "Fix what Spark refuses at restart: an empty or truncated latest offsets or commit file, a hole in a log, "
        "a missing metadata file, a killed writer's temporary files. Needs the repair permission and an approval."
    ),
}
# The actions one asks for on the request form; an undo is asked for from the run it undoes.
REQUESTABLE_ACTIONS = [(value, label) for value, label in MaintenanceAction.choices if value != MaintenanceAction.UNDO]


class ActionChoiceForm(forms.Form):
    action = forms.ChoiceField(choices=REQUESTABLE_ACTIONS, error_messages={"required": "Choose an action."})


class ActionParametersForm(forms.Form):
    """The parameters of one action, starting from the values the checkpoint suggests."""

    def __init__(
        self, data: Mapping[str, Any] | None = None, *, suggestions: Mapping[str, Suggestion], checkpoint: Checkpoint
    ) -> None:
        super().__init__(data)
        for name, field in self.fields.items():
            field.error_messages["required"] = "Required for this action."
            if name in suggestions:
                field.initial = suggestions[name].value
                field.help_text = f"{field.help_text} Default {suggestions[name].value}: {suggestions[name].source}."

    def preview_parameters(self) -> dict[str, Any] | None:
        """The values to preview: the initial ones of an unbound form, the cleaned ones of a valid one, else None."""
        if not self.is_bound:
            return {name: self.get_initial_for_field(field, name) for name, field in self.fields.items()}
        return dict(self.cleaned_data) if self.is_valid() else None


class PurgeForm(ActionParametersForm):
    keep_batches = forms.IntegerField(
        min_value=1, label="Batches to keep", help_text="Offsets and commits of at least this many latest batches stay."
    )


class SnapshotForm(ActionParametersForm):
    min_chain = forms.IntegerField(
        min_value=1,
        label="Longest delta chain allowed",
        help_text="Stores that replay more deltas than this at their newest committed version get a snapshot.",
    )


class CleanupForm(ActionParametersForm):
    min_versions_to_retain = forms.IntegerField(
        min_value=1, label="State versions to retain", help_text="The latest this many state versions stay loadable."
    )
    keep_offsets_range = forms.BooleanField(
        required=False,
        initial=True,
        label="Also keep the state of every batch still in offsets/",
        help_text="So that Spark's state reader can read any of them.",
    )


class CompactForm(ActionParametersForm):
    log = forms.ChoiceField(
        choices=(), label="Log", help_text="Its missing compaction file is written, its expired files deleted."
    )
    min_batches_to_retain = forms.IntegerField(
        min_value=1,
        label="Batches to retain",
        help_text="Log files the latest this many batches read through stay (Spark's deleteExpiredLog).",
    )

    def __init__(self, *args: Any, checkpoint: Checkpoint, **kwargs: Any) -> None:
        super().__init__(*args, checkpoint=checkpoint, **kwargs)
        choices = compactible_log_choices(checkpoint)
        self.fields["log"].choices = choices
        self.fields["log"].initial = choices[0][0] if choices else None


class RewindForm(ActionParametersForm):
    to_batch = forms.IntegerField(
        min_value=0,
        label="Rewind to batch",
        help_text="A committed batch still in the logs; the next run starts at the batch after it.",
    )


class SkipForm(ActionParametersForm):
    """Skip (a), a batch; or skip (b), one source's partition moved to an offset, or its named files."""

    batch = forms.IntegerField(
        required=False, min_value=0, label="Uncommitted batch to mark done", help_text="Skip (a): leave the rest empty."
    )
    source = forms.IntegerField(
        required=False, min_value=0, label="Source number", help_text="Skip (b): the source's index in offsets/N."
    )
    partition = forms.CharField(
        required=False,
        max_length=300,
        label="Kafka partition",
        help_text="The topic and partition number, e.g. events-3.",
    )
    to_offset = forms.IntegerField(
        required=False, min_value=0, label="Start that partition at offset", help_text="Kafka sources."
    )
    files = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        label="Files to skip",
        help_text="File sources: one path a line, as the source log names them.",
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        return skip_parameters(data, add_error=self.add_error)


def skip_parameters(data: Mapping[str, Any], *, add_error) -> dict[str, Any]:
    """The planner's parameters of one skip shape; ``add_error(None, why)`` when the values name none or several.

    Shared with the skip_batch command, so the form and the command accept the same shapes."""
    files = [line.strip() for line in (data.get("files") or "").splitlines() if line.strip()]
    if data.get("batch") is not None:
        return _batch_skip_parameters(data, files, add_error=add_error)
    return _source_skip_parameters(data, files, add_error=add_error)


def _batch_skip_parameters(data: Mapping[str, Any], files: list[str], *, add_error) -> dict[str, Any]:
    """A whole batch to skip; naming a source's part as well is an error."""
    if data.get("source") is not None or data.get("partition") or files or data.get("to_offset") is not None:
        add_error(None, "Give either a batch, or a source with a partition and offset or with files; not both.")
    return {"batch": data["batch"]}


def _source_skip_parameters(data: Mapping[str, Any], files: list[str], *, add_error) -> dict[str, Any]:
    """A skip in one source: its files (a file source), or a partition up to an offset (Kafka)."""
    partition, to_offset, source = data.get("partition") or "", data.get("to_offset"), data.get("source")
    if source is None:
        add_error(None, "Give a batch to skip, or a source with a partition and offset or with files.")
        return {}
    if files and not partition and to_offset is None:
        return {"source": source, "files": files}
    if partition and to_offset is not None and not files:
        return {"source": source, "partition": partition, "to_offset": to_offset}
    add_error(None, "A source needs either a partition and an offset (Kafka) or files (file source).")
    return {}


class RepairForm(ActionParametersForm):
    damage = forms.CharField(
        required=False,
        max_length=50,
        label="Damage to repair",
        help_text="An integrity finding's code; leave empty to repair every repairable damage found.",
    )
    query_id = forms.CharField(
        required=False,
        max_length=36,
        label="Query id",
        help_text="Only for a lost metadata file: by default the query id the syncs stored for this checkpoint.",
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        return {name: value for name, value in data.items() if value}


ACTION_FORMS: dict[str, type[ActionParametersForm]] = {
    MaintenanceAction.PURGE: PurgeForm,
    MaintenanceAction.SNAPSHOT: SnapshotForm,
    MaintenanceAction.CLEANUP: CleanupForm,
    MaintenanceAction.COMPACT: CompactForm,
    MaintenanceAction.REWIND: RewindForm,
    MaintenanceAction.SKIP: SkipForm,
    MaintenanceAction.REPAIR: RepairForm,
}


def compactible_log_choices(checkpoint: Checkpoint) -> list[tuple[str, str]]:
    """The file source logs the last inspection found, and the sink log when one is registered,
    each labelled with the compact interval read from its files."""
    logs = list(checkpoint.metadata_logs.order_by("path"))
    choices = [(log.path, _log_label(log.path, log)) for log in logs if log.kind != "sink"]
    if checkpoint.sink_log_url:
        sink = next((log for log in logs if log.kind == "sink"), None)
        choices.append((SINK_LOG, _log_label(f"file sink log ({checkpoint.sink_log_url})", sink)))
    return choices


def _log_label(name: str, log: MetadataLog | None) -> str:
    if log is None:
        return f"{name}: not read yet"
    latest = "no batch yet" if log.latest_batch_id is None else f"latest batch {log.latest_batch_id}"
    return f"{name}: compact interval {log.compact_interval}, {latest}"


@dataclass(frozen=True, slots=True)
class ActionChoice:
    """One action on the request form: its radio button, its parameters and what they would do."""

    action: str
    label: str
    description: str
    form: ActionParametersForm
    preview: Preview | None
    is_chosen: bool


class MaintenanceRequest:
    """The request form: which action, and that action's parameters (the other actions' are not read).

    Only the chosen action's form is bound, so a form sent back with an error keeps what was
    typed there and shows the others at their defaults, without errors of their own.
    """

    def __init__(
        self, data: Mapping[str, Any] | None = None, *, checkpoint: Checkpoint, figures: MaintenanceFigures
    ) -> None:
        self.figures = figures
        self.action_form = ActionChoiceForm(data)
        self.chosen = data.get("action") if data is not None else None
        suggestions = suggest_parameters(figures)
        self.parameter_forms = {
            action: form_class(data if action == self.chosen else None, suggestions=suggestions, checkpoint=checkpoint)
            for action, form_class in ACTION_FORMS.items()
        }

    def is_valid(self) -> bool:
        return self.action_form.is_valid() and self.parameter_forms[self.action].is_valid()

    @property
    def action(self) -> str:
        return self.action_form.cleaned_data["action"]

    def parameters(self) -> dict[str, Any]:
        """The chosen action's parameters, as the planner takes them."""
        return dict(self.parameter_forms[self.action].cleaned_data)

    def choices(self) -> list[ActionChoice]:
        return [self.choice(action) for action in ACTION_FORMS]

    def choice(self, action: str) -> ActionChoice:
        """One action's entry; KeyError for an action that does not exist."""
        form = self.parameter_forms[action]
        values = form.preview_parameters()
        return ActionChoice(
            action=action,
            label=MaintenanceAction(action).label,
            description=ACTION_DESCRIPTIONS[action],
            form=form,
            preview=None if values is None else preview_request(action, values, self.figures),
            is_chosen=action == self.chosen,
        )


class MaintenanceConfirmForm(forms.Form):
    """The second step: a reason for the audit trail, and the checkpoint's name typed out."""

    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}), min_length=5, help_text="Kept in the audit trail."
    )
    checkpoint_name = forms.CharField(help_text="Type the checkpoint's name to confirm.")
    override_query_running = forms.BooleanField(
        required=False,
        label="Run although the query looks running (audited)",
    )

    def __init__(self, *args: Any, checkpoint: Checkpoint, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.checkpoint = checkpoint

    def clean_checkpoint_name(self) -> str:
        return confirm_typed_name(self.cleaned_data["checkpoint_name"], self.checkpoint)

    def refusal(self) -> str:
        """Why an invalid confirmation was refused, field by field, for the audit trail."""
        return "; ".join(
            f"{self[name].label}: {' '.join(errors)}" if name in self.fields else " ".join(errors)
            for name, errors in self.errors.items()
        )

    def typed(self) -> dict[str, str]:
        """What was typed, as sent: the audit keeps it with a refusal."""
        return {name: str(self.data.get(name, "")) for name in ("reason", "checkpoint_name", "override_query_running")}
