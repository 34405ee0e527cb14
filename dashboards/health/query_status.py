"""The one health model: which state a registered query is in, why, and since when.

The checkpoint list, the query page's header, ``/metrics`` (``ckptweb_checkpoint_status`` and
``ckptweb_checkpoint_condition``) and the shipped alert rules all take a query's state from
``assess`` here, so a page, a graph and an alert never disagree.

``assess`` is pure: it takes what the sync stored (``StatusFacts``), the thresholds (settings,
``Thresholds.from_settings``) and the time, and returns a ``QueryStatus``. Every condition that
holds is reported with its reason; the status is the first of them in ``State`` order, so a
query that is both failing to sync and damaged shows "failing to sync" and lists "damaged" too.

Thresholds come from the query's own history, never below a floor from settings:
* the *trigger interval* is the per-checkpoint setting when given, else the one learned by the
  sync from periods when batches came regularly and finished before the next was due
  (``learn_trigger_interval``); a query that always runs back to back has none;
* a query is *stopped* when neither a batch nor progress came for the longer of
  ``HEALTH_STOPPED_AFTER_SECONDS`` and 3 usual gaps between batches;
* a batch is *stalled* when it was planned (offsets/N) and not committed for the longer of
  ``HEALTH_STALLED_AFTER_SECONDS`` and 10 usual batch durations;
* a query is *falling behind* when the offsets its sources report behind their head (Kafka's
  metrics, latestOffset minus endOffset) grew by more than ``HEALTH_BEHIND_RATIO`` over the
  recent batches; where no source reports them, when the input rate outran the process rate or
  batches outlasted the trigger interval by that ratio, and the reason says which figures it used.
"""

from __future__ import annotations

import enum
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from dashboards.query_page.timespans import format_span

# How many gaps of the usual (typical) interval make a query stopped, and how many usual batch
# durations make an uncommitted batch stalled.
STOPPED_AFTER_GAPS = 3
STALLED_AFTER_DURATIONS = 10
# Gaps that count as regular: the middle half within this share of the median.
REGULAR_GAP_SPREAD = 0.1
# A batch that ends this share of its gap or earlier left the query idle until the next trigger.
KEPT_UP_SHARE = 0.8
NO_LAG_REPORTED = "no source reports how far it is behind its head"


class Severity(enum.StrEnum):
    ERROR = "error"
    WARNING = "warning"
    NEUTRAL = "neutral"
    OK = "ok"


class State(enum.Enum):
    """The states, in precedence order: the first condition that holds is the query's status."""

    NOT_A_CHECKPOINT = ("not-a-checkpoint", "not a checkpoint", Severity.ERROR)
    SYNC_DISABLED = ("sync-disabled", "sync disabled", Severity.NEUTRAL)
    FAILING_TO_SYNC = ("failing-to-sync", "failing to sync", Severity.ERROR)
    DAMAGED = ("damaged", "damaged", Severity.ERROR)
    STALLED = ("stalled", "stalled", Severity.ERROR)
    FALLING_BEHIND = ("falling-behind", "falling behind", Severity.WARNING)
    STOPPED = ("stopped", "stopped", Severity.WARNING)
    NOT_STARTED = ("not-started", "not started", Severity.NEUTRAL)
    IDLE = ("idle", "idle", Severity.OK)
    RUNNING = ("running", "running", Severity.OK)

    def __init__(self, slug: str, label: str, severity: Severity) -> None:
        self.slug, self.label, self.severity = slug, label, severity

    @classmethod
    def from_slug(cls, slug: str) -> State | None:
        return next((state for state in cls if state.slug == slug), None)


# State -> its place in the precedence order (0 first): a sort key for statuses and conditions.
PRECEDENCE = {state: place for place, state in enumerate(State)}


@dataclass(frozen=True, slots=True)
class Thresholds:
    stopped_after_seconds: float = 300.0
    stalled_after_seconds: float = 120.0
    behind_ratio: float = 1.2
    sync_overdue_intervals: int = 3
    sync_grace_seconds: float = 60.0

    @classmethod
    def from_settings(cls, settings) -> Thresholds:
        return cls(
            stopped_after_seconds=settings.HEALTH_STOPPED_AFTER_SECONDS,
            stalled_after_seconds=settings.HEALTH_STALLED_AFTER_SECONDS,
            behind_ratio=settings.HEALTH_BEHIND_RATIO,
        )


DEFAULT_THRESHOLDS = Thresholds()


@dataclass(frozen=True, slots=True)
class StatusFacts:
    """What the sync stored about one checkpoint; durations in seconds, rates in rows per second."""

    is_enabled: bool = True
    root_problem: str = ""
    sync_interval_seconds: float = 30.0
    last_synced_at: datetime | None = None
    last_sync_failed: bool = False
    last_sync_message: str = ""
    unreadable_files: int = 0
    error_findings: int = 0
    latest_batch_id: int | None = None
    latest_batch_at: datetime | None = None
    latest_committed_batch_id: int | None = None
    trigger_interval_seconds: float | None = None
    typical_gap_seconds: float | None = None
    recent_batch_duration_seconds: float | None = None
    recent_input_rate: float | None = None
    recent_process_rate: float | None = None
    recent_offsets_behind: int | None = None  # summed over the sources; None: no source reports its lag
    earlier_offsets_behind: int | None = None
    last_heard_at: datetime | None = None
    last_heard_input_rows: int | None = None
    copy_of: str = ""  # the checkpoint of the same query id ahead of this one (with_progress_owner)
    copy_of_batch_id: int | None = None
    registered_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Condition:
    state: State
    reason: str
    since: datetime | None = None


@dataclass(frozen=True, slots=True)
class QueryStatus:
    state: State
    reason: str
    since: datetime | None
    conditions: tuple[Condition, ...] = field(default=())

    @property
    def slug(self) -> str:
        return self.state.slug

    @property
    def label(self) -> str:
        return self.state.label

    @property
    def severity(self) -> str:
        return self.state.severity.value

    @property
    def also(self) -> tuple[Condition, ...]:
        """The conditions that hold besides the status itself."""
        return self.conditions[1:]


def assess(facts: StatusFacts, *, now: datetime, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> QueryStatus:
    """Return the status of one query: every condition that holds, the first of them in front."""
    # A disabled checkpoint's figures stopped moving with its sync: judging them against the
    # clock (stopped, stalled, behind) would only describe ckptweb, not the query.
    checks = _CHECKS if facts.is_enabled else _CHECKS_OF_STORED_FIGURES
    conditions = [condition for check in checks if (condition := check(facts, now, thresholds)) is not None]
    if not conditions:
        conditions = [_running(facts)]
    conditions.sort(key=lambda condition: PRECEDENCE[condition.state])
    first = conditions[0]
    return QueryStatus(first.state, first.reason, first.since, tuple(conditions))


def quiet_seconds(facts: StatusFacts, thresholds: Thresholds) -> float:
    """How long without a batch or progress makes the query stopped."""
    gap = facts.trigger_interval_seconds or facts.typical_gap_seconds or 0.0
    return max(thresholds.stopped_after_seconds, STOPPED_AFTER_GAPS * gap)


def stall_seconds(facts: StatusFacts, thresholds: Thresholds) -> float:
    """How long an uncommitted batch may run before it is stalled."""
    usual = facts.recent_batch_duration_seconds or facts.typical_gap_seconds or 0.0
    return max(thresholds.stalled_after_seconds, STALLED_AFTER_DURATIONS * usual)


def _not_a_checkpoint(facts: StatusFacts, now: datetime, thresholds: Thresholds) -> Condition | None:
    if not facts.root_problem:
        return None
    return Condition(State.NOT_A_CHECKPOINT, facts.root_problem)


def _failing_to_sync(facts: StatusFacts, now: datetime, thresholds: Thresholds) -> Condition | None:
    if not facts.is_enabled:
        return None
    if facts.last_sync_failed:
        return Condition(State.FAILING_TO_SYNC, f"the last sync failed: {facts.last_sync_message}")
    if facts.unreadable_files:
        files = _count(facts.unreadable_files, "file")
        return Condition(State.FAILING_TO_SYNC, f"{files} cannot be read (see the sync panel)")
    return _sync_overdue(facts, now, thresholds)


def _sync_overdue(facts: StatusFacts, now: datetime, thresholds: Thresholds) -> Condition | None:
    """No sync for longer than the allowed number of intervals (and grace) since the last one."""
    if facts.last_synced_at is None:
        return None
    allowed = facts.sync_interval_seconds * thresholds.sync_overdue_intervals + thresholds.sync_grace_seconds
    if (now - facts.last_synced_at).total_seconds() > allowed:
        return Condition(
            State.FAILING_TO_SYNC,
            f"no sync for {format_span((now - facts.last_synced_at).total_seconds())} "
            f"(every {format_span(facts.sync_interval_seconds)} expected): workers, beat or the broker may be down",
            facts.last_synced_at,
        )
    return None


def _damaged(facts: StatusFacts, now: datetime, thresholds: Thresholds) -> Condition | None:
    if not facts.error_findings:
        return None
    findings = _count(facts.error_findings, "integrity error")
    return Condition(State.DAMAGED, f"{findings}: a restart would fail (see the integrity panel)")


def _is_resting_copy(facts: StatusFacts) -> bool:
    """A copy behind another checkpoint of its query that has planned no batch since it was
    registered: its newest batches are the other's history, so their times say nothing of it."""
    if not facts.copy_of or facts.latest_batch_at is None:
        return False
    return facts.registered_at is None or facts.latest_batch_at <= facts.registered_at


def _is_stalled(facts: StatusFacts, now: datetime, thresholds: Thresholds) -> bool:
    # A copy taken mid-batch holds that batch uncommitted; the copy is stopped, not hanging in it.
    if facts.latest_batch_id is None or facts.latest_batch_at is None or _is_resting_copy(facts):
        return False
    if facts.latest_committed_batch_id is not None and facts.latest_committed_batch_id >= facts.latest_batch_id:
        return False
    return (now - facts.latest_batch_at).total_seconds() > stall_seconds(facts, thresholds)


def _stalled(facts: StatusFacts, now: datetime, thresholds: Thresholds) -> Condition | None:
    if not _is_stalled(facts, now, thresholds):
        return None
    waited = (now - facts.latest_batch_at).total_seconds()
    usual = facts.recent_batch_duration_seconds
    usually = f"; batches usually take {format_span(usual)}" if usual else ""
    return Condition(
        State.STALLED,
        f"batch {facts.latest_batch_id} was planned {format_span(waited)} ago and is not committed{usually}: "
        "the query died or hangs in it (a restart runs it again)",
        facts.latest_batch_at,
    )


def _falling_behind(facts: StatusFacts, now: datetime, thresholds: Thresholds) -> Condition | None:
    if _is_stopped(facts, now, thresholds):
        return None
    if facts.recent_offsets_behind is not None:
        return _lag_growing(facts, thresholds)
    rate_in, rate_out = facts.recent_input_rate, facts.recent_process_rate
    if rate_in and rate_out and rate_in > thresholds.behind_ratio * rate_out:
        return Condition(
            State.FALLING_BEHIND,
            f"input {_rate(rate_in)} but processed {_rate(rate_out)} over the recent batches "
            f"({NO_LAG_REPORTED}: judged by input rate against process rate)",
        )
    trigger, duration = facts.trigger_interval_seconds, facts.recent_batch_duration_seconds
    if trigger and duration and duration > thresholds.behind_ratio * trigger:
        return Condition(
            State.FALLING_BEHIND,
            f"batches take {format_span(duration)} but the trigger interval is {format_span(trigger)} "
            f"({NO_LAG_REPORTED}: judged by batch duration against the trigger interval)",
        )
    return None


def _lag_growing(facts: StatusFacts, thresholds: Thresholds) -> Condition | None:
    """Where the sources report how far they are behind their head, that alone says whether the
    query keeps up: rates and durations only estimate it."""
    recent, earlier = facts.recent_offsets_behind, facts.earlier_offsets_behind or 0
    if recent <= 0 or recent <= thresholds.behind_ratio * earlier:
        return None
    return Condition(
        State.FALLING_BEHIND,
        f"the sources are {recent:,} offsets behind their head, up from {earlier:,} over the recent batches "
        "(judged by the lag the sources report)",
    )


def _last_sign_of_life(facts: StatusFacts) -> datetime:
    """The newest batch or progress; the facts must have a batch."""
    if facts.last_heard_at is None or facts.last_heard_at < facts.latest_batch_at:
        return facts.latest_batch_at
    return facts.last_heard_at


def _is_stopped(facts: StatusFacts, now: datetime, thresholds: Thresholds) -> bool:
    # A stalled batch is the more precise account of the same silence.
    if facts.latest_batch_at is None or _is_stalled(facts, now, thresholds):
        return False
    if _is_resting_copy(facts):
        return True
    return (now - _last_sign_of_life(facts)).total_seconds() > quiet_seconds(facts, thresholds)


def _stopped(facts: StatusFacts, now: datetime, thresholds: Thresholds) -> Condition | None:
    if not _is_stopped(facts, now, thresholds):
        return None
    if _is_resting_copy(facts):
        return _stopped_copy(facts)
    last = _last_sign_of_life(facts)
    heard = (
        f" and no progress since {last:%Y-%m-%d %H:%M:%S} UTC"
        if facts.last_heard_at is not None
        else " (no progress received: add the listener or register the event log to tell idle from stopped)"
    )
    return Condition(
        State.STOPPED,
        f"no new batch for {format_span((now - facts.latest_batch_at).total_seconds())} "
        f"(batch {facts.latest_batch_id}){heard}",
        last,
    )


def _stopped_copy(facts: StatusFacts) -> Condition:
    return Condition(
        State.STOPPED,
        f"a copy of {facts.copy_of} (same query id, at batch {facts.copy_of_batch_id}): its own batches end at "
        f"batch {facts.latest_batch_id}, planned {facts.latest_batch_at:%Y-%m-%d %H:%M:%S} UTC; "
        f"later progress belongs to {facts.copy_of}",
        facts.latest_batch_at,
    )


def _sync_disabled(facts: StatusFacts, now: datetime, thresholds: Thresholds) -> Condition | None:
    if facts.is_enabled:
        return None
    as_of = f"; figures as of {facts.last_synced_at:%Y-%m-%d %H:%M:%S} UTC" if facts.last_synced_at else ""
    return Condition(State.SYNC_DISABLED, f"ckptweb does not sync this checkpoint{as_of}", facts.last_synced_at)


def _not_started(facts: StatusFacts, now: datetime, thresholds: Thresholds) -> Condition | None:
    if facts.latest_batch_id is not None or facts.root_problem:
        return None
    if facts.last_synced_at is None:
        return Condition(State.NOT_STARTED, "not synced yet: the first sync is queued")
    return Condition(State.NOT_STARTED, "no batch in offsets/ yet: the query has not run a batch")


def _idle(facts: StatusFacts, now: datetime, thresholds: Thresholds) -> Condition | None:
    if facts.last_heard_at is None or facts.latest_batch_at is None or facts.last_heard_input_rows != 0:
        return None
    # Progress after the newest batch with no input rows: Spark's idle event (3.5+) or an empty
    # trigger (older versions). A no-data batch of a stateful query reports before its batch time.
    if facts.last_heard_at <= facts.latest_batch_at or _is_stopped(facts, now, thresholds):
        return None
    return Condition(
        State.IDLE,
        f"running, no new data since batch {facts.latest_batch_id} "
        f"({format_span((now - facts.latest_batch_at).total_seconds())} ago)",
        facts.latest_batch_at,
    )


def _running(facts: StatusFacts) -> Condition:
    every = facts.trigger_interval_seconds or facts.typical_gap_seconds
    cadence = f", a batch every {format_span(every)}" if every else ""
    return Condition(State.RUNNING, f"{_latest_batch_in_words(facts)}{cadence}", facts.latest_batch_at)


def _latest_batch_in_words(facts: StatusFacts) -> str:
    """The newest batch and where it is: "batch 178 committed, started 11:59:56 UTC" or "batch 179 running
    since 12:00:06 UTC" (the time is the batch's offset-log timestamp, when Spark planned it)."""
    batch = f"batch {facts.latest_batch_id}"
    is_committed = facts.latest_committed_batch_id == facts.latest_batch_id
    if facts.latest_batch_at is None:
        return f"{batch} committed" if is_committed else f"{batch} running"
    started = f"{facts.latest_batch_at:%H:%M:%S} UTC"
    return f"{batch} committed, started {started}" if is_committed else f"{batch} running since {started}"


_CHECKS_OF_STORED_FIGURES = (_not_a_checkpoint, _damaged, _sync_disabled, _not_started)
_CHECKS = (
    _not_a_checkpoint,
    _failing_to_sync,
    _damaged,
    _stalled,
    _falling_behind,
    _stopped,
    _sync_disabled,
    _not_started,
    _idle,
)


def learn_trigger_interval(gaps_seconds: Sequence[float], durations_seconds: Sequence[float]) -> float | None:
    """Return the trigger interval the batches show, or None when they do not show one.

    A ProcessingTime trigger shows as regular gaps between batch starts (the middle half of the
    gaps within REGULAR_GAP_SPREAD of their median) while the batches end well before the next
    trigger. A query that runs back to back (the default trigger, or one already behind) shows
    none: its gaps are its durations.
    """
    if len(gaps_seconds) < 4 or not durations_seconds:
        return None
    quartiles = statistics.quantiles(gaps_seconds, n=4)
    median = statistics.median(gaps_seconds)
    if median <= 0 or (quartiles[2] - quartiles[0]) > 2 * REGULAR_GAP_SPREAD * median:
        return None
    if statistics.median(durations_seconds) > KEPT_UP_SHARE * median:
        return None
    return median


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")


def _rate(rows_per_second: float) -> str:
    return f"{rows_per_second:,.1f} rows/s"
