"""The pending store of ``--join-key``: events waiting for their outcome, outcomes waiting for
their event, both bounded in number and in age.

It knows keys, features, labels and a clock in records, nothing of sources or models: the
engine's step (``stream_perceptron.engine.delayed``) decides what follows (predict, learn,
count, dead-letter).

Memory: an event's features are kept as one ``bytes`` of float64 values (8 bytes a value)
beside the tuple of its feature names, which events of one shape share (a CSV file's rows, a
JSON stream with fixed fields). With the key, the served prediction, the arrival clock, the
position and the timestamp, 100,000 events of 20 features took 25.8 bytes per value
(``tracemalloc``, each event parsed afresh and its parsed record dropped:
``python -m benchmarks.delayed_labels``); a
million kept by the engine's block path (whose events of a block share one
:class:`Later` for their predictions), 24.4 bytes a value counted object by object and 26.1
bytes of the command's peak RSS (539 MiB, against 41 MiB with none kept: benchmarks row 16c);
a stream whose every event has other feature names adds their tuple, about 8 bytes a value
more, and the names themselves.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from stream_perceptron.errors import StateError
from stream_perceptron.state import count, json_key, number, short

__all__ = ["Expired", "Later", "PendingJoin", "PendingEvent", "PendingOutcome"]

#: An event's origin: ``(source, partition)``, shared by the events of one source.
Origin = tuple[str, int | None]


class Later:
    """The predictions of a block whose events were kept before the model predicted them
    (the join's block path): once made, ``block[i]`` is the prediction served for the block's
    record ``i``, the one that came at clock ``clock + i``; every event of the block shares
    this object."""

    __slots__ = ("block", "clock")

    def __init__(self, clock: int) -> None:
        self.block: Any = None
        self.clock = clock

    def __repr__(self) -> str:
        return f"Later({self.clock})"


class PendingEvent(NamedTuple):
    """An event waiting for its outcome: when it came (the join's clock, in records), where
    from, its features (names shared, values packed), the prediction served for it and its
    record's timestamp in milliseconds (``None``: it had none)."""

    arrival: int
    origin: Origin
    offset: int
    names: tuple[str, ...]
    values: bytes
    prediction: Any
    stamp: int | None = None

    @property
    def served(self) -> Any:
        """The prediction served for the event (a block's :class:`Later` read)."""
        p = self.prediction
        return p.block[self.arrival - p.clock] if type(p) is Later else p

    def features(self) -> dict[str, float]:
        """The event's features, the same floats in the same order as parsed."""
        return dict(zip(self.names, array("d", self.values).tolist()))


class PendingOutcome(NamedTuple):
    """An outcome waiting for its event: when it came, where from, its label and its record's
    bytes (small: a key and a label; kept for a dead letter) and its timestamp (milliseconds,
    or ``None``)."""

    arrival: int
    origin: Origin
    offset: int
    label: Any
    raw: bytes
    stamp: int | None = None


class Expired(NamedTuple):
    """A pending entry dropped by a bound: its key and the entry."""

    key: str
    entry: PendingEvent | PendingOutcome


class PendingJoin:
    """Events and outcomes waiting for each other, under ``max_pending`` and ``label_wait``.

    The clock is the caller's (the engine gives the number of records read, which a checkpoint
    restores): an entry that came at ``a`` is still there for a record at ``now`` when
    ``now - a <= label_wait``; past that, or when more than ``max_pending`` events and outcomes
    wait, the oldest go (:meth:`expire`, :meth:`overflow`). The keys joined within the same
    bounds are remembered, so a later outcome of one is known as a duplicate.

    With ``by_time``, ``label_wait`` is in milliseconds of the records' time instead: the
    stream's time, the largest timestamp read so far (:meth:`tick`; Kafka Streams' stream
    time), which every entry is stamped with when it comes; an entry is dropped once the
    stream's time is more than ``label_wait`` past its stamp. A late record (stamped before
    the stream's time) counts from the stream's time, so the entries stay in the order they
    came and the oldest go first.

    Parameters
    ----------
    max_pending
        At most this many events and outcomes wait (the oldest go first).
    label_wait
        How long an event waits for its outcome, and an outcome for its event: in records, or
        with ``by_time`` in milliseconds.
    by_time
        Count ``label_wait`` in the records' time (their timestamps) rather than in records.

    Examples
    --------
    >>> join = PendingJoin(max_pending=10, label_wait=5)
    >>> join.add_event("a", {"f": 1.5}, prediction=1, origin=("stdin", None), offset=0, now=0)
    >>> event = join.take_event("a", now=1)
    >>> event.features(), event.prediction, join.joined_recently("a")
    ({'f': 1.5}, 1, True)
    >>> join.add_outcome("b", 0, b"b,,0", ("stdin", None), 1, now=1)
    >>> [e.key for e in join.expire(now=7)], len(join)
    (['b'], 0)

    """

    def __init__(self, max_pending: int, label_wait: int, by_time: bool = False) -> None:
        if max_pending < 1 or label_wait < 0:
            raise ValueError("max_pending must be at least 1 and label_wait at least 0")
        self.max_pending = max_pending
        self.label_wait = label_wait
        self.by_time = by_time
        #: the stream's time: the largest record timestamp read (milliseconds), None before one
        self.time: int | None = None
        self._events: OrderedDict[str, PendingEvent] = OrderedDict()
        self._outcomes: OrderedDict[str, PendingOutcome] = OrderedDict()
        self._joined: OrderedDict[str, int] = OrderedDict()  # key -> clock when joined
        # feature names -> [the shared tuple, how many pending events use it]
        self._shapes: dict[tuple[str, ...], list[Any]] = {}
        self._origins: dict[Origin, Origin] = {}
        #: the keys changed since :meth:`changed`, by their last change (None: not tracked)
        self._changed: OrderedDict[str, None] | None = None

    def track_changes(self) -> None:
        """From now on remember the keys that change (:mod:`~stream_perceptron.join.changelog`)."""
        self._changed = OrderedDict() if self._changed is None else self._changed

    def changed(self) -> list[str]:
        """The keys changed since the last call, in the order of their last change."""
        keys = list(self._changed or ())
        self._changed = OrderedDict() if self._changed is not None else None
        return keys

    def _touch(self, key: str) -> None:
        if self._changed is not None:
            self._changed[key] = None
            self._changed.move_to_end(key)

    def __len__(self) -> int:
        """Events and outcomes waiting."""
        return len(self._events) + len(self._outcomes)

    @property
    def events(self) -> int:
        return len(self._events)

    @property
    def outcomes(self) -> int:
        return len(self._outcomes)

    def tick(self, timestamp: int | None) -> int | None:
        """A record's ``timestamp`` (milliseconds, ``None``: it has none) read: the stream's
        time after it, which the record's entry is stamped with."""
        if timestamp is not None and (self.time is None or timestamp > self.time):
            self.time = timestamp
        return self.time

    def _clock(self, now: int) -> int:
        """What the bounds count from: ``now`` (records), or the stream's time."""
        if not self.by_time:
            return now
        return 0 if self.time is None else self.time

    def _when(self, entry: PendingEvent | PendingOutcome) -> int:
        if not self.by_time:
            return entry.arrival
        return 0 if entry.stamp is None else entry.stamp

    # -- events --------------------------------------------------------------------------------
    def has_event(self, key: str) -> bool:
        return key in self._events

    def add_event(self, key: str, x: dict[Any, float], prediction: Any, origin: Origin,
                  offset: int, now: int, stamp: int | None = None) -> None:  # fmt: skip
        """Keep an event (its key not waiting yet) until its outcome comes; ``stamp``: its
        record's timestamp in milliseconds."""
        self.keep_event(key, tuple(x), array("d", x.values()).tobytes(), prediction, origin,
                        offset, now, stamp)  # fmt: skip

    def keep_event(self, key: str, names: tuple[str, ...], values: bytes, prediction: Any,
                   origin: Origin, offset: int, now: int,
                   stamp: int | None = None) -> PendingEvent:  # fmt: skip
        """:meth:`add_event` of features given packed: their names and their float64 values
        as bytes (the block path's form); returns the entry kept."""
        shape = self._shapes.get(names)
        if shape is None:
            shape = self._shapes[names] = [names, 0]
        shape[1] += 1
        origin = self._origins.setdefault(origin, origin)
        event = self._events[key] = PendingEvent(now, origin, offset, shape[0], values,
                                                 prediction, stamp)  # fmt: skip
        self._joined.pop(key, None)  # a key used again: a later outcome is this event's
        self._touch(key)
        return event

    def take_event(self, key: str, now: int) -> PendingEvent:
        """The event of ``key``, which its outcome, come at ``now``, takes."""
        event = self._events.pop(key)
        self._release(event)
        self._remember(key, self._clock(now))
        return event

    # -- outcomes ------------------------------------------------------------------------------
    def outcome_waiting(self, key: str) -> bool:
        return key in self._outcomes

    def joined_recently(self, key: str) -> bool:
        """Whether ``key`` was joined within the bounds (a new outcome of it is a duplicate)."""
        return key in self._joined

    def add_outcome(self, key: str, label: Any, raw: bytes, origin: Origin, offset: int,
                    now: int, stamp: int | None = None) -> None:  # fmt: skip
        """Keep an outcome (its key not waiting yet) until its event comes."""
        origin = self._origins.setdefault(origin, origin)
        self._outcomes[key] = PendingOutcome(now, origin, offset, label, bytes(raw), stamp)
        self._touch(key)

    def take_outcome(self, key: str, now: int) -> PendingOutcome:
        """The outcome waiting for ``key``'s event, which came at ``now``."""
        outcome = self._outcomes.pop(key)
        self._remember(key, self._clock(now))
        return outcome

    def _remember(self, key: str, now: int) -> None:
        self._joined[key] = now
        self._joined.move_to_end(key)
        self._touch(key)

    # -- bounds --------------------------------------------------------------------------------
    def expire(self, now: int) -> list[Expired]:
        """Drop what came before ``now - label_wait`` (with ``by_time``: what was stamped
        before the stream's time less ``label_wait``), oldest first."""
        oldest = self._clock(now) - self.label_wait
        events, outcomes, joined = self._events, self._outcomes, self._joined
        when = self._when
        if ((not events or when(next(iter(events.values()))) >= oldest)
                and (not outcomes or when(next(iter(outcomes.values()))) >= oldest)
                and (not joined or next(iter(joined.values())) >= oldest)):  # fmt: skip
            return []  # the usual case: nothing old enough
        gone = [Expired(k, e) for k, e in _older(self._events, oldest, when)]
        gone += [Expired(k, o) for k, o in _older(self._outcomes, oldest, when)]
        for entry in gone:
            self._drop(entry)
        old = 0
        for joined_at in joined.values():  # the keys joined before oldest, counted once
            if joined_at >= oldest:
                break
            old += 1
        for _ in range(old):
            self._touch(joined.popitem(last=False)[0])
        if len(gone) > 1:
            gone.sort(key=lambda e: e.entry.arrival)
        return gone

    def next_due(self, entries: bool = True, joined: bool = True) -> int | float:
        """The first clock at which :meth:`expire` would drop something (``inf``: never, as
        things stand; an entry added at ``now`` is due at ``now + label_wait + 1``): of the
        events and outcomes waiting (``entries``), of the keys joined (``joined``)."""
        first = [next(iter(self._joined.values()))] if joined and self._joined else []
        if entries and self._events:
            first.append(self._when(next(iter(self._events.values()))))
        if entries and self._outcomes:
            first.append(self._when(next(iter(self._outcomes.values()))))
        return min(first) + self.label_wait + 1 if first else float("inf")

    def overflow(self) -> list[Expired]:
        """Drop the oldest while more than ``max_pending`` wait."""
        gone: list[Expired] = []
        events, outcomes = self._events, self._outcomes
        while len(events) + len(outcomes) > self.max_pending:
            event = next(iter(events.items()), None)
            outcome = next(iter(outcomes.items()), None)
            if outcome is None or (event is not None and event[1].arrival <= outcome[1].arrival):
                assert event is not None
                gone.append(Expired(*event))
            else:
                gone.append(Expired(*outcome))
            self._drop(gone[-1])
        while len(self._joined) > self.max_pending:
            self._touch(self._joined.popitem(last=False)[0])
        return gone

    def _drop(self, gone: Expired) -> None:
        if isinstance(gone.entry, PendingEvent):
            self._release(self._events.pop(gone.key))
        else:
            del self._outcomes[gone.key]
        self._touch(gone.key)

    def _release(self, event: PendingEvent) -> None:
        shape = self._shapes[event.names]
        shape[1] -= 1
        if not shape[1]:
            del self._shapes[event.names]

    # -- state ---------------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        """The pending entries as JSON-ready lists (the checkpoint's ``join``)."""
        shapes = {names: i for i, names in enumerate(self._shapes)}
        return {
            "max_pending": self.max_pending,
            "label_wait": self.label_wait,
            "clock": "time" if self.by_time else "records",
            "time": self.time,
            "shapes": [list(names) for names in shapes],
            "events": [
                [k, e.arrival, *e.origin, e.offset, shapes[e.names],
                 array("d", e.values).tolist(), e.served, e.stamp]
                for k, e in self._events.items()
            ],  # fmt: skip
            "outcomes": [
                [k, o.arrival, *o.origin, o.offset, o.label, o.raw.decode("utf-8", "replace"),
                 o.stamp]
                for k, o in self._outcomes.items()
            ],
            "joined": [[k, t] for k, t in self._joined.items()],
        }

    def load_state(self, state: Any) -> None:
        """Continue from :meth:`get_state` (the bounds stay this join's own: entries past them
        go at the next record); :class:`StateError` naming what is wrong."""
        if not isinstance(state, dict):
            raise StateError(f"join is {short(state)}, not an object")
        clock = state.get("clock", "records")  # a checkpoint before durations: records
        if clock not in ("records", "time"):
            raise StateError(f"join.clock is {short(clock)}, not records or time")
        if (clock == "time") != self.by_time:
            saved, now = ("a duration", "records") if clock == "time" else ("records", "a duration")
            raise StateError(f"the checkpoint's join counts --label-wait in {saved}, this run in "
                             f"{now}: give --label-wait as it was, or --fresh")  # fmt: skip
        time = state.get("time")
        if time is not None and type(time) is not int:
            raise StateError(f"join.time is {short(time)}, not milliseconds")
        shapes = [_names(s, i) for i, s in enumerate(_list(state, "shapes"))]
        for pending in (self._events, self._outcomes, self._joined, self._shapes):
            pending.clear()
        for item in _list(state, "events"):
            if not isinstance(item, list) or len(item) not in (8, 9):  # 8: without its stamp
                raise StateError(f"join.events holds {short(item)}")
            key, arrival, source, partition, offset, shape, values, prediction = item[:8]
            if _key(key) in self._events:
                raise StateError(f"join.events has the key {short(key)} twice")
            shape = count(shape, "join.events shape", len(shapes) - 1)
            if len(values if isinstance(values, list) else ()) != len(shapes[shape]):
                raise StateError(f"join.events: {short(key)} has not its shape's values")
            x = {n: number(v, "join.events value") for n, v in zip(shapes[shape], values)}
            self.add_event(_key(key), x, json_key(prediction, "join.events"),
                           _origin(source, partition), count(offset, "join.events offset"),
                           count(arrival, "join.events arrival"),
                           _stamp(item[8:], "join.events"))  # fmt: skip
        for item in _list(state, "outcomes"):
            if not isinstance(item, list) or len(item) not in (7, 8):  # 7: without its stamp
                raise StateError(f"join.outcomes holds {short(item)}")
            key, arrival, source, partition, offset, label, raw = item[:7]
            if _key(key) in self._outcomes:
                raise StateError(f"join.outcomes has the key {short(key)} twice")
            if not isinstance(raw, str):
                raise StateError(f"join.outcomes: {short(key)} has the record {short(raw)}")
            self.add_outcome(_key(key), json_key(label, "join.outcomes"), raw.encode(),
                             _origin(source, partition), count(offset, "join.outcomes offset"),
                             count(arrival, "join.outcomes arrival"),
                             _stamp(item[7:], "join.outcomes"))  # fmt: skip
        for item in _list(state, "joined"):
            if not isinstance(item, list) or len(item) != 2:
                raise StateError(f"join.joined holds {short(item)}")
            self._joined[_key(item[0])] = count(item[1], "join.joined")
        self.time = time
        waiting: list[OrderedDict[str, Any]] = [self._events, self._outcomes, self._joined]
        if not all(_ordered(entries, self._when) for entries in waiting):
            raise StateError("join: the pending entries are not in the order they came")


def _older(
    entries: OrderedDict[str, Any], oldest: int, when: Callable[[Any], int]
) -> Iterator[tuple[str, Any]]:
    for key, entry in entries.items():
        if when(entry) >= oldest:
            return
        yield key, entry


def _ordered(entries: OrderedDict[str, Any], when: Callable[[Any], int]) -> bool:
    arrivals = [e if type(e) is int else when(e) for e in entries.values()]
    return arrivals == sorted(arrivals)


def _list(state: dict[str, Any], name: str) -> list[Any]:
    value = state.get(name)
    if not isinstance(value, list):
        raise StateError(f"join.{name} is {short(value)}, not a list")
    return value


def _names(value: Any, i: int) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise StateError(f"join.shapes[{i}] is {short(value)}, not a list of feature names")
    if len(set(value)) != len(value):
        raise StateError(f"join.shapes[{i}] names a feature twice")
    return tuple(value)


def _key(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise StateError(f"join holds the key {short(value)}, not a non-empty string")
    return value


def _stamp(rest: list[Any], where: str) -> int | None:
    """A saved entry's timestamp (milliseconds, or ``None``: none, or saved before stamps)."""
    stamp = rest[0] if rest else None
    if stamp is not None and type(stamp) is not int:
        raise StateError(f"{where} holds the timestamp {short(stamp)}, not milliseconds")
    return stamp


def _origin(source: Any, partition: Any) -> Origin:
    if not isinstance(source, str) or not (partition is None or type(partition) is int):
        raise StateError(f"join holds the origin {short([source, partition])}")
    return source, partition

