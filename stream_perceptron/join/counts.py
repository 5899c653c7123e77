"""The counts of ``--join-key`` (labels that come later): events, outcomes, what the join did
with them, the served predictions' mistakes and the label delay histogram."""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from itertools import repeat
from typing import Any

from stream_perceptron.errors import StateError
from stream_perceptron.state import MAX_COUNT

__all__ = ["DELAY_BUCKETS", "JoinCounts"]

#: Upper bounds (inclusive, in records) of the label delay histogram's buckets; +Inf follows.
DELAY_BUCKETS: tuple[int, ...] = (
    0, 1, 10, 50, 100, 500, 1_000, 5_000, 10_000, 50_000, 100_000, 1_000_000
)

#: The counters :meth:`JoinCounts.get_state` saves, in this order.
_FIELDS = ("records", "events", "outcomes", "joined", "served_mistakes", "expired",
           "unmatched_outcome", "duplicate_outcome", "duplicate_event", "delay_sum")  # fmt: skip


class JoinCounts:
    """What ``--join-key`` counted, cumulative across resumed runs (saved with the counters).

    Attributes
    ----------
    records
        Records the join took that the run's other counters (learned, unlabelled, invalid) do
        not count: an event left waiting for its outcome, an outcome left waiting for its event
        or refused as a duplicate. An event or outcome that completes a pair counts as the
        example learned.
    events, outcomes
        Keyed records without a label (events) and with a label and no features (outcomes).
    joined
        Pairs learned; each is scored against the prediction served when its event came
        (``served_mistakes``).
    expired, unmatched_outcome
        Events that met no outcome, and outcomes that met no event, within the bounds.
    duplicate_outcome, duplicate_event
        A second outcome of a key (the first wins), a second event of a key already waiting.
    delay_buckets, delay_sum
        The label delay of each pair, in records from its event to its outcome (0 when the
        outcome came first): counts per bucket of :data:`DELAY_BUCKETS` (the last: past them).

    Examples
    --------
    >>> counts = JoinCounts()
    >>> counts.joined = 3
    >>> counts.observe_delay(0); counts.observe_delay(7); counts.observe_delay(10**7)
    >>> counts.delay_buckets[:3], counts.delay_buckets[-1], counts.delay_sum
    ([1, 0, 1], 1, 10000007)
    >>> JoinCounts.from_state(counts.get_state()).get_state() == counts.get_state()
    True

    """

    def __init__(self) -> None:
        self.records = 0
        self.events = 0
        self.outcomes = 0
        self.joined = 0
        self.served_mistakes = 0
        self.expired = 0
        self.unmatched_outcome = 0
        self.duplicate_outcome = 0
        self.duplicate_event = 0
        self.delay_sum = 0
        self.delay_buckets = [0] * (len(DELAY_BUCKETS) + 1)

    def observe_delay(self, records: int) -> None:
        """One pair's label delay, in records."""
        self.delay_buckets[bisect_left(DELAY_BUCKETS, records)] += 1
        self.delay_sum += records

    def observe_delays(self, delays: list[int]) -> None:
        """:meth:`observe_delay` of each."""
        buckets = self.delay_buckets
        for i, n in Counter(map(bisect_left, repeat(DELAY_BUCKETS), delays)).items():
            buckets[i] += n  # counted by Counter in C, then a few additions
        self.delay_sum += sum(delays)

    @property
    def served_accuracy(self) -> float | None:
        """Share of the joined pairs whose served prediction was right."""
        return 1.0 - self.served_mistakes / self.joined if self.joined else None

    def summary(self) -> dict[str, Any]:
        """The counts for the run's summary."""
        out: dict[str, Any] = {name: getattr(self, name) for name in _FIELDS if name != "records"}
        out["served_accuracy"] = self.served_accuracy
        out["delay_buckets"] = {
            **{str(b): n for b, n in zip(DELAY_BUCKETS, self.delay_buckets)},
            "+Inf": self.delay_buckets[-1],
        }
        return out

    def get_state(self) -> dict[str, Any]:
        return {**{name: getattr(self, name) for name in _FIELDS},
                "delay_buckets": list(self.delay_buckets)}  # fmt: skip

    @classmethod
    def from_state(cls, state: Any) -> JoinCounts:
        """Counts from :meth:`get_state`; :class:`StateError` naming the field otherwise."""
        if not isinstance(state, dict):
            raise StateError(f"corrupt join counters: {state!r}")
        counts = cls()
        for name in _FIELDS:
            setattr(counts, name, _count(state.get(name), name))
        buckets = state.get("delay_buckets")
        if not isinstance(buckets, list) or len(buckets) != len(counts.delay_buckets):
            raise StateError(f"corrupt join counters: delay_buckets is {buckets!r}")
        counts.delay_buckets = [_count(n, "delay_buckets") for n in buckets]
        if sum(counts.delay_buckets) != counts.joined or counts.served_mistakes > counts.joined:
            raise StateError("corrupt join counters: the delays or mistakes do not add up")
        return counts


def _count(value: Any, what: str) -> int:
    if type(value) is not int or not 0 <= value <= MAX_COUNT:
        raise StateError(f"corrupt join counters: {what} is {value!r}, not a count")
    return value
