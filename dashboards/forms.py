"""Forms: registering and editing checkpoints."""
from django import forms
from django.conf import settings

from workers.checkpoint import DEFAULT_COMPACT_INTERVAL, PathNotAllowedError, check_allowed

from .models import Checkpoint

MIN_SYNC_INTERVAL_SECONDS = 5


class CheckpointForm(forms.ModelForm):
    class Meta:
        model = Checkpoint
        fields = ["name", "url", "sink_log_url", "file_log_compact_interval", "is_enabled", "sync_interval_seconds", "expected_trigger_seconds"]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Most queries keep Spark's default; a form without the field keeps it too.
        self.fields["file_log_compact_interval"].required = False

    def clean_file_log_compact_interval(self) -> int:
        value = self.cleaned_data["file_log_compact_interval"]
        return DEFAULT_COMPACT_INTERVAL if value is None else value

    def clean_url(self) -> str:
        return _allowed(self.cleaned_data["url"])

    def clean_sink_log_url(self) -> str:
        url = self.cleaned_data["sink_log_url"]
        return _allowed(url) if url else ""

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
