"""Forms: registering, editing, archiving and removing checkpoints."""

from collections.abc import Callable
from typing import TypeVar

from django import forms
from django.conf import settings

from dashboards.models import Checkpoint
from workers.checkpoint.errors import CheckpointError, PathNotAllowedError
from workers.checkpoint.metadatalog import DEFAULT_COMPACT_INTERVAL
from workers.checkpoint.rootkinds import classify_checkpoint_root, classify_sink_output
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage
from workers.checkpoint.storage.locations import check_allowed
from workers.storage_options import open_storage_for_check

MIN_SYNC_INTERVAL_SECONDS = 5

_Found = TypeVar("_Found")


class CheckpointForm(forms.ModelForm):
    class Meta:
        model = Checkpoint
        fields = [
            "name",
            "url",
            "sink_log_url",
            "file_log_compact_interval",
            "is_enabled",
            "sync_interval_seconds",
            "expected_trigger_seconds",
        ]
        labels = {"url": "Checkpoint URL"}
        help_texts = {
            "url": "Local path or fsspec URL of the checkpoint folder "
            "(the one holding metadata, offsets/ and commits/).",
            "sink_log_url": "Output folder of the query's file sink (the folder it writes to), "
            "or its _spark_metadata folder.",
        }

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Most queries keep Spark's default; a form without the field keeps it too.
        self.fields["file_log_compact_interval"].required = False
        self.warnings: list[str] = []  # accepted, but worth telling (a query that ran no batch yet)

    def clean_file_log_compact_interval(self) -> int:
        value = self.cleaned_data["file_log_compact_interval"]
        return DEFAULT_COMPACT_INTERVAL if value is None else value

    def clean_url(self) -> str:
        url = _allowed(self.cleaned_data["url"])
        self._refuse_archived_duplicate(url)
        if not _same_location(url, self.instance.url):
            root = _look_up(classify_checkpoint_root, url)
            _refuse(root.refusal)
            self.warnings += [root.warning] if root.warning else []
        return url

    def _refuse_archived_duplicate(self, url: str) -> None:
        """An archived checkpoint keeps its URL: say so, rather than Django's bare "already exists"."""
        archived = Checkpoint.objects.archived().filter(url=url).exclude(pk=self.instance.pk).first()
        if archived is not None:
            raise forms.ValidationError(
                f"{url} is registered already as {archived.name}, "
                "archived: restore it from the archived checkpoints page."
            )

    def clean_sink_log_url(self) -> str:
        """The sink's output folder or its _spark_metadata folder: the readers take either."""
        url = self.cleaned_data["sink_log_url"]
        if not url:
            return ""
        url = _allowed(url)
        if not _same_location(url, self.instance.sink_log_url):
            _refuse(_look_up(classify_sink_output, url).refusal)
        return url

    def clean_sync_interval_seconds(self) -> int:
        seconds = self.cleaned_data["sync_interval_seconds"]
        if seconds < MIN_SYNC_INTERVAL_SECONDS:
            raise forms.ValidationError(f"Sync at most every {MIN_SYNC_INTERVAL_SECONDS} seconds.")
        return seconds


def _allowed(url: str) -> str:
    """Accept only URLs under the configured roots, stored in their normalised form."""
    try:
        return check_allowed(url, settings.CHECKPOINT_ROOTS)
    except PathNotAllowedError as exc:
        raise forms.ValidationError(str(exc)) from None


def _same_location(url: str, stored: str) -> bool:
    """Tell whether ``url`` is where ``stored`` (an unchanged field of an edited checkpoint) points:
    a path checked when it was registered is not looked up again on every edit."""
    try:
        return bool(stored) and check_allowed(stored, None) == url
    except PathNotAllowedError:
        return False


def _look_up(classify: Callable[[CheckpointStorage], _Found], url: str) -> _Found:
    """Tell what ``url`` holds, so that a typo is refused while the person registering is there.

    The web process reads no storage while answering (house style B2.1), except here: a
    registration is rare, this is one listing or look-up (two at most), and object stores get
    one attempt with short timeouts (open_storage_for_check). A store that cannot be asked
    refuses the form with the reason; registering again retries.
    """
    try:
        return classify(open_storage_for_check(url))
    except CheckpointError as exc:
        raise forms.ValidationError(f"{url}: cannot be checked: {exc}") from None


def _refuse(refusal: CheckpointError | None) -> None:
    if refusal is not None:
        raise forms.ValidationError(str(refusal))


class ArchiveForm(forms.Form):
    """Archive or restore a checkpoint: why, for the audit trail."""

    reason = forms.CharField(required=False, max_length=1000, help_text="Why, for the audit trail (optional).")


class RemoveForm(forms.Form):
    """Remove a checkpoint and its history: why, and its name typed out."""

    reason = forms.CharField(max_length=1000, help_text="Why, for the audit trail.")
    checkpoint_name = forms.CharField(help_text="Type the checkpoint's name to confirm.")

    def __init__(self, *args, checkpoint: Checkpoint, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.checkpoint = checkpoint

    def clean_checkpoint_name(self) -> str:
        return confirm_typed_name(self.cleaned_data["checkpoint_name"], self.checkpoint)


def confirm_typed_name(typed: str, checkpoint: Checkpoint) -> str:
    """Return the checkpoint's name typed out to confirm a destructive action; ValidationError if it differs."""
    name = typed.strip()
    if name != checkpoint.name:
        raise forms.ValidationError(f"Type {checkpoint.name!r} exactly to confirm.")
    return name
