"""The counts of ``--join-key`` (labels that come later): events, outcomes, what the join did
with them, the served predictions' mistakes and the label delay histogram."""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from itertools import repeat
from typing import Any

from stream_perceptron.errors import StateError
from stream_perceptron.state import MAX_COUNT, short

__all__ = ["DELAY_BUCKETS", "DELAY_SECONDS_BUCKETS", "JoinCounts"]

#: Upper bounds (inclusive, in records) of the label delay histogram's buckets; +Inf follows.
DELAY_BUCKETS: tuple[int, ...] = (
    0, 1, 10, 50, 100, 500, 1_000, 5_000, 10_000, 50_000, 100_000, 1_000_000
)

#: Upper bounds (inclusive, in seconds) of the label delay's histogram in time (from the
#: records' timestamps: Kafka's); +Inf follows. A minute to a week: clicks to chargebacks.
DELAY_SECONDS_BUCKETS: tuple[float, ...] = (
    0, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3_600, 21_600, 86_400, 604_800
)
#: The same in milliseconds (the timestamps' unit: counted exactly, in integers).
_DELAY_MS_BUCKETS = tuple(round(b * 1000) for b in DELAY_SECONDS_BUCKETS)

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
    delay_ms_buckets, delay_ms_sum
        The label delay in time of each pair whose event and outcome both have a timestamp
        (Kafka's messages; stdin lines have none), in milliseconds from the event's timestamp
        to the outcome's (0 when the outcome came first, or is stamped earlier): counts per
        bucket of :data:`DELAY_SECONDS_BUCKETS`.

    Examples
    --------
    >>> counts = JoinCounts()
    >>> counts.joined = 3
    >>> counts.observe_delay(0); counts.observe_delay(7); counts.observe_delay(10**7)
    >>> counts.delay_buckets[:3], counts.delay_buckets[-1], counts.delay_sum
    ([1, 0, 1], 1, 10000007)
    >>> counts.observe_delay_ms(250); counts.observe_delay_ms(7_200_000)
    >>> counts.delay_ms_buckets[:4], counts.delay_ms_buckets[11], counts.delay_ms_sum
    ([0, 0, 1, 0], 1, 7200250)
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
        self.delay_ms_sum = 0
        self.delay_ms_buckets = [0] * (len(DELAY_SECONDS_BUCKETS) + 1)

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

    def observe_delay_ms(self, ms: int) -> None:
        """One pair's label delay in time, in milliseconds (``>= 0``)."""
        self.delay_ms_buckets[bisect_left(_DELAY_MS_BUCKETS, ms)] += 1
        self.delay_ms_sum += ms

    def add(self, other: JoinCounts, sign: int = 1) -> None:
        """Add ``other``'s counts to these (``sign=-1``: take them away).

        >>> a, b = JoinCounts(), JoinCounts()
        >>> b.joined = 2; b.observe_delay(3); b.observe_delay(3)
        >>> a.add(b); a.add(b); a.add(b, -1)
        >>> a.joined, a.delay_buckets[2], a.delay_sum
        (2, 2, 6)
        """
        for name in _FIELDS:
            setattr(self, name, getattr(self, name) + sign * getattr(other, name))
        self.delay_ms_sum += sign * other.delay_ms_sum
        for mine, theirs in ((self.delay_buckets, other.delay_buckets),
                             (self.delay_ms_buckets, other.delay_ms_buckets)):  # fmt: skip
            for i, n in enumerate(theirs):
                mine[i] += sign * n

    def copy(self) -> JoinCounts:
        """A copy that the counting of these leaves alone."""
        out = JoinCounts()
        out.add(self)
        return out

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
        out["delay_seconds_buckets"] = {
            **{f"{b:g}": n for b, n in zip(DELAY_SECONDS_BUCKETS, self.delay_ms_buckets)},
            "+Inf": self.delay_ms_buckets[-1],
        }
        out["delay_seconds_sum"] = self.delay_ms_sum / 1000
        return out

    def get_state(self) -> dict[str, Any]:
        return {**{name: getattr(self, name) for name in _FIELDS},
                "delay_buckets": list(self.delay_buckets), "delay_ms_sum": self.delay_ms_sum,
                "delay_ms_buckets": list(self.delay_ms_buckets)}  # fmt: skip

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
        if "delay_ms_buckets" in state or "delay_ms_sum" in state:  # a checkpoint before: none
            counts.delay_ms_sum = _count(state.get("delay_ms_sum"), "delay_ms_sum")
            ms = state.get("delay_ms_buckets")
            if not isinstance(ms, list) or len(ms) != len(counts.delay_ms_buckets):
                raise StateError(f"corrupt join counters: delay_ms_buckets is {short(ms)}")
            counts.delay_ms_buckets = [_count(n, "delay_ms_buckets") for n in ms]
            if sum(counts.delay_ms_buckets) > counts.joined:
                raise StateError("corrupt join counters: more delays in time than pairs joined")
        return counts


def _count(value: Any, what: str) -> int:
    if type(value) is not int or not 0 <= value <= MAX_COUNT:
        raise StateError(f"corrupt join counters: {what} is {value!r}, not a count")
    return value
