"""Forms: registering and editing checkpoints."""
from django import forms
from django.conf import settings

from workers.checkpoint import PathNotAllowedError, check_allowed

from .models import Checkpoint

MIN_SYNC_INTERVAL_SECONDS = 5


class CheckpointForm(forms.ModelForm):
    class Meta:
        model = Checkpoint
        fields = ["name", "url", "is_enabled", "sync_interval_seconds"]

    def clean_url(self) -> str:
        """Accept only URLs under the configured roots, stored in their normalised form."""
        try:
            return check_allowed(self.cleaned_data["url"], settings.CHECKPOINT_ROOTS)
        except PathNotAllowedError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean_sync_interval_seconds(self) -> int:
        seconds = self.cleaned_data["sync_interval_seconds"]
        if seconds < MIN_SYNC_INTERVAL_SECONDS:
            raise forms.ValidationError(f"Sync at most every {MIN_SYNC_INTERVAL_SECONDS} seconds.")
        return seconds
