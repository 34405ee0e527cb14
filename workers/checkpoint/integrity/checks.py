"""Every integrity check run over the facts, and the order findings are reported in.

One list of the rules, so that a new rule module is run by adding it here and nowhere else.
"""

from __future__ import annotations

from .batchlogs import check_commits_without_offsets, check_offsets_gaps, check_uncommitted
from .compactiblelogs import check_compactible_logs, check_sink_log_behind, check_sink_log_present
from .facts import CheckpointFacts
from .files import check_empty_files, check_listing_failures, check_metadata, check_read_files
from .findings import SEVERITIES, Finding
from .leftovers import check_leftovers
from .state import check_state


def run_checks(facts: CheckpointFacts) -> list[Finding]:
    """Run every check over the facts; errors first, then warnings, then infos, by path."""
    findings = [
        *check_listing_failures(facts),
        *check_metadata(facts),
        *check_read_files(facts),
        *check_empty_files(facts),
        *check_offsets_gaps(facts.offset_ids),
        *check_uncommitted(facts.offset_ids, facts.commit_ids, predates_commit_log=facts.predates_commit_log),
        *check_commits_without_offsets(facts.offset_ids, facts.commit_ids),
        *check_compactible_logs(facts),
        *check_sink_log_behind(facts),
        *check_sink_log_present(facts),
        *check_leftovers(facts),
        *check_state(facts),
    ]
    return sorted(findings, key=lambda f: (SEVERITIES.index(f.severity), f.path, f.code))
