"""A block of keyed records joined at once: what the record-by-record step does to the pending
store, done for a whole block before the model sees any of it, with the model's work left as
a list of rows for one kernel call (the engine's :mod:`~stream_perceptron.engine.delayed_blocks`).

What happens to the store does not depend on the model: an event is kept, an outcome takes its
event, an entry expires, whatever the model predicts or refuses. So the store is brought to
where the record path leaves it first (the same calls, in the same order, at the same clock),
and the rows the model is to predict or learn come out in order: an event's row (predicted; a
kept event's served prediction is the row's, filled in once the model has made it), an
outcome's row carrying its event's features (learned), a record with both (learned).

The loop runs in C (``_dense.join_plan``, over the store's own dicts, making the model's rows
as it goes); the same loop in Python here is its reference, which the differential test
(``tests/engine/test_join_block_path.py``) holds to the record path as it does the C loop.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from stream_perceptron import native
from stream_perceptron.formats.sparse_rows import SparseRows
from stream_perceptron.join.counts import JoinCounts
from stream_perceptron.join.pending import Expired, Later, Origin, PendingEvent, PendingJoin

__all__ = ["OWN", "BlockPlan", "plan_block"]

_INF = float("inf")

#: A joined pair's served prediction that is its own row's (the event came after its outcome).
OWN = Later(-1)

#: Whether :func:`plan_block` runs its loop in C (``_dense.join_plan``) when the C tier is there
#: (tests turn it off to run the Python loop, the reference, through the same comparisons).
NATIVE = True
#: Bounds and clocks the C loop takes (its sums stay within int64); larger ones go the Python way.
_C_MAX = 1 << 62


@dataclass
class BlockPlan:
    """The rows for the model and what follows from them, in the order of the records.

    Kernel row ``k`` was made by the block's record ``rows[k]``, with that record's features
    and label, except: ``pending[k]``, the pending event whose features an outcome's row
    carries (an outcome learned: no prediction line, its event's was written when it came),
    and ``labels[k]``, the label of the outcome an event's row takes (it waited for the
    event). A row without a label is predicted only: an event kept or a duplicate (counted by
    the join) or a record without a key (counted unlabelled). ``predictions``: the
    :class:`~stream_perceptron.join.pending.Later` the kept events hold; the caller sets its
    ``block`` to the predictions by record once the model has made them. ``served``: the
    joined pairs as ``(kernel row, event, delay)``, the event whose ``served`` prediction
    counts, or :data:`OWN` (the row's own: an event its outcome waited for);
    ``drops``: ``(k, gone)``, what a bound dropped before kernel row ``k``; ``waiting``:
    outcomes kept or refused as duplicates (no row), ``waiting_rows``: events kept or
    duplicate (a row each), all counted by the join. ``kernel``: the rows for the model as
    sparse rows and their feature names, when the plan made them (the C loop, given the
    block's names), else ``None``.
    """

    predictions: Later
    rows: list[int] = field(default_factory=list)
    pending: dict[int, PendingEvent] = field(default_factory=dict)
    labels: dict[int, Any] = field(default_factory=dict)
    served: list[tuple[int, Any, int]] = field(default_factory=list)
    drops: list[tuple[int, list[Expired]]] = field(default_factory=list)
    waiting: int = 0
    waiting_rows: int = 0
    kernel: tuple[SparseRows, list[str]] | None = None


def plan_block(
    join: PendingJoin, counts: JoinCounts, clock: int, keys: list[str | None],
    labels: list[Any], indptr: Any, values: Any, shape: tuple[str, ...] | None,
    features: Callable[[int], tuple[Any, bytes]], raw: Callable[[int], bytes], origin: Origin,
    offsets: Sequence[int], rows: tuple[Any, list[str]] | None = None,
) -> BlockPlan:  # fmt: skip
    """Join a block's parsed records (record ``i``: ``keys[i]``, ``labels[i]`` and the
    features of row ``i`` of ``indptr`` (int64) and ``values`` (float64), none when the row
    is empty) as :meth:`DelayedLabels.handle` would one by one, the ``i``-th at clock
    ``clock + i``; ``shape`` the names of every row that has features (``None``: rows of more
    than one shape), ``features(i)`` the record's ``(names, packed values)``, ``raw(i)`` its
    bytes. No record may be a label without a key or features (the caller checks). ``rows``:
    the block's slots (int32) and feature names, for the C loop to make the model's rows as
    it goes (:attr:`BlockPlan.kernel`)."""
    c = native.dense
    if NATIVE and c is not None and max(join.label_wait, join.max_pending, clock) <= _C_MAX:
        return _plan_native(c, join, counts, clock, keys, labels, indptr, values, shape,
                            features, raw, origin, offsets, rows)  # fmt: skip
    at = memoryview(indptr).cast("B").cast("q").tolist()
    has_x = [hi > lo for lo, hi in zip(at, at[1:])]
    return _plan(join, counts, clock, keys, has_x, labels, features, raw, origin, offsets)


def _plan_native(
    c: Any, join: PendingJoin, counts: JoinCounts, clock: int, keys: list[str | None],
    labels: list[Any], indptr: Any, values: Any, shape: tuple[str, ...] | None,
    features: Callable[[int], tuple[Any, bytes]], raw: Callable[[int], bytes], origin: Origin,
    offsets: Sequence[int], rows: tuple[Any, list[str]] | None,
) -> BlockPlan:  # fmt: skip
    """:func:`_plan`'s loop in C, over the store's own dicts; the rare steps (expiries, the
    bound by count, an outcome kept waiting) by the store's methods, as :func:`_plan`'s."""
    plan = BlockPlan(Later(clock))
    origin = join._origins.setdefault(origin, origin)
    joined = join._joined

    def keep_outcome(i: int, key: str, label: Any, now: int) -> None:
        join.add_outcome(key, label, raw(i), origin, offsets[i], now)

    calls = (join.expire, partial(join.next_due, joined=False), join.overflow, keep_outcome,
             partial(_forget, joined))  # fmt: skip
    store = (join._events, join._outcomes, joined, join._shapes)
    out = (plan.rows, plan.pending, plan.labels, plan.served, plan.drops)
    kernel: Any = None
    if rows is not None:
        block_slots, names = rows
        names = list(names)
        index: dict[str, int] = {}

        def slots_of(shape: tuple[str, ...]) -> bytes:
            """The kernel slots of a waiting event's feature names (new ones added)."""
            if not index:
                index.update(zip(names, range(len(names))))
            for name in shape:
                if name not in index:
                    index[name] = len(names)
                    names.append(name)
            return array("i", map(index.__getitem__, shape)).tobytes()

        kernel = (block_slots, slots_of, bytearray(), bytearray(), bytearray())
    got = c.join_plan(store, keys, labels, indptr, values, shape, features, clock, origin,
                      offsets, plan.predictions, PendingEvent, OWN, join.label_wait,
                      join.max_pending, calls, out, kernel)  # fmt: skip
    if kernel is not None:
        made = kernel[2:]
        plan.kernel = SparseRows(memoryview(made[0]).cast("q"), memoryview(made[1]).cast("i"),
                                 memoryview(made[2]).cast("d")), names  # fmt: skip
    n_events, n_outcomes, duplicate_events, duplicate_outcomes, waiting, waiting_rows = got
    _forget(joined, clock + len(keys) - 1 - join.label_wait)
    plan.waiting = waiting
    plan.waiting_rows = waiting_rows
    counts.events += n_events
    counts.outcomes += n_outcomes
    counts.duplicate_event += duplicate_events
    counts.duplicate_outcome += duplicate_outcomes
    return plan


def _plan(
    join: PendingJoin, counts: JoinCounts, clock: int, keys: Sequence[str | None],
    has_x: Sequence[bool], labels: Sequence[Any], features: Callable[[int], tuple[Any, bytes]],
    raw: Callable[[int], bytes], origin: Origin, offsets: Sequence[int],
) -> BlockPlan:  # fmt: skip
    """The loop of :func:`plan_block` in Python (the reference of ``_dense.join_plan``)."""
    later = Later(clock)
    plan = BlockPlan(later)
    rows, pending_of, labels_of = plan.rows, plan.pending, plan.labels
    served, drops = plan.served, plan.drops
    events, outcomes, joined = join._events, join._outcomes, join._joined
    shapes = join._shapes
    origin = join._origins.setdefault(origin, origin)
    wait, most = join.label_wait, join.max_pending
    # The first clock an event or outcome expires. The keys joined long ago are forgotten
    # only where it shows: before a look-up of an outcome's key among them, and at the end (a
    # bound by count drops the oldest first, so it drops the same either way).
    due = join.next_due(joined=False)
    new = tuple.__new__
    n_events = n_outcomes = duplicate_events = duplicate_outcomes = waiting = waiting_rows = 0
    for i, (key, x, y) in enumerate(zip(keys, has_x, labels)):
        now = clock + i
        if now >= due:
            gone = join.expire(now)
            if gone:
                drops.append((len(rows), gone))
            due = join.next_due(joined=False)
        if key is None or (y is not None and x):
            rows.append(i)
            continue
        if y is None:  # an event
            n_events += 1
            if key in outcomes:
                outcome = outcomes.pop(key)
                if key in joined:
                    del joined[key]
                joined[key] = now
                served.append((len(rows), OWN, 0))
                labels_of[len(rows)] = outcome.label
                rows.append(i)
                continue
            waiting_rows += 1
            rows.append(i)
            if key in events:
                duplicate_events += 1
                continue
            names, values = features(i)
            shape = shapes.get(names)
            if shape is None:
                shape = shapes[names] = [names, 0]
            shape[1] += 1
            fields = (now, origin, offsets[i], shape[0], values, later, None)  # lines: no stamp
            events[key] = new(PendingEvent, fields)
            if key in joined:
                del joined[key]
            if due > now + wait:
                due = now + wait + 1
        else:  # an outcome
            n_outcomes += 1
            event = events.pop(key, None)
            if event is not None:
                shape = shapes[event.names]
                shape[1] -= 1
                if not shape[1]:
                    del shapes[event.names]
                if key in joined:
                    del joined[key]
                joined[key] = now
                served.append((len(rows), event, now - event.arrival))
                pending_of[len(rows)] = event
                rows.append(i)
                continue
            waiting += 1
            _forget(joined, now - wait)
            if key in outcomes or key in joined:
                duplicate_outcomes += 1
                continue
            join.add_outcome(key, y, raw(i), origin, offsets[i], now)
            if due > now + wait:
                due = now + wait + 1
        if len(events) + len(outcomes) > most or len(joined) > most:
            gone = join.overflow()
            if gone:
                drops.append((len(rows), gone))
    _forget(joined, clock + len(keys) - 1 - wait)
    plan.waiting = waiting
    plan.waiting_rows = waiting_rows
    counts.events += n_events
    counts.outcomes += n_outcomes
    counts.duplicate_event += duplicate_events
    counts.duplicate_outcome += duplicate_outcomes
    return plan


def _forget(joined: OrderedDict[str, int], oldest: int) -> None:
    """Forget the keys joined before ``oldest`` (oldest first)."""
    old = 0
    for joined_at in joined.values():
        if joined_at >= oldest:
            break
        old += 1
    for _ in range(old):
        joined.popitem(last=False)

