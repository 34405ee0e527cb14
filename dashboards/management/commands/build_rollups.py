"""`manage.py build_rollups`: build the chart roll-ups of history stored before they existed, here
and now (a deploy step after `migrate`), instead of leaving them to the workers (workers.rollup_builds)."""

from typing import Any

from django.core.management.base import BaseCommand

from workers.rollup_builds import build_all_missing


class Command(BaseCommand):
    help = "Build the chart roll-ups that checkpoints and queries with older history lack."

    def handle(self, *args: Any, **options: Any) -> None:
        built = build_all_missing()
        self.stdout.write(
            f"built the timeline roll-ups of {built['timelines']} checkpoints and the Runtime roll-ups of "
            f"{built['queries']} queries; {built['busy']} were held by a sync or another build"
            " (the workers finish them)"
        )
