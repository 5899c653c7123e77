"""Drift detection on the mistake stream: ADWIN, fed the mistake rate of short chunks.

ADWIN (Bifet & Gavalda 2007) keeps a window of recent values and drops its older part when
the two parts' means differ by more than a bound at confidence ``delta``; a drop is a drift.
Here its values are the prequential mistake rates of consecutive chunks of :data:`CHUNK`
learned examples (a mean of 0/1 mistakes, in [0, 1], which ADWIN takes as it is), and it checks
its window every :data:`CLOCK` values. A drift is placed at the end of the chunk that revealed
it, and counts only where the error rate rose (a model that learns makes fewer and fewer
mistakes).

ADWIN is computed as River's ``drift.ADWIN`` computes it (the readable reference,
:mod:`stream_perceptron.adwin`, is held to River's on the same values), by the C tier
(``_drift.c``) a whole block of mistakes per call. A check of the window tries every bucket
boundary as a cut (about 0.3 us in C over a window of 1M examples); River's ``ADWIN.update``
checking at every call costs 0.8 us from Python. Chunks of 8 with the window checked every 32
of them (River's default ``clock``: every 256 examples) cost about 0.008 us an example, 1.5 % of
the engine's fastest run (benchmarks row 13c, 0.47 us an example), so the detector is on by
default.

The chunks follow the count of learned examples, not the blocks the engine reads, so the record
path and the block path, and a run resumed from a checkpoint, see the same drifts at the same
positions. The state (counts, the open chunk and ADWIN's window) is JSON.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from stream_perceptron import native
from stream_perceptron.adwin import EMPTY_WINDOW, ChunkedAdwin, window_fields
from stream_perceptron.errors import StateError
from stream_perceptron.learners import StreamClassifier
from stream_perceptron.state import MAX_COUNT, count, number, short

__all__ = ["CHUNK", "CLOCK", "DETECTORS", "DriftMonitor", "MARKS", "REFERENCE_AFTER",
           "SavedMonitor", "checked_state", "learner_kind", "reference_state"]

logger = logging.getLogger(__name__)

#: Learned examples per ADWIN value, and ADWIN's window checked every CLOCK values (every 256
#: examples): a switch of the mistake rate from 0.1 to 0.3 is seen after about 480 examples,
#: from 0.1 to 0.2 after about 1,000. Checked every chunk the monitor cost 0.044 us an example,
#: every 4 chunks 0.013 us, every 32 (River's default clock) 0.008 us (1M mistakes in blocks).
CHUNK = 8
CLOCK = 32
DETECTORS = ("adwin", "reference", "none")
#: ``--drift-detector reference``: examples learned (from the start, after each drift) before
#: the model's copy is taken (:mod:`stream_perceptron.engine.drift_reference`).
REFERENCE_AFTER = 2_000
#: Positions of the most recent drifts kept for the live page's marks.
MARKS = 100
#: Chunks whose mistake rate is "the recent rate" that tells a rise from a fall (128 examples).
RECENT = 16
#: the version of :meth:`DriftMonitor.get_state` (1: River's serialised window, base64)
STATE_VERSION = 2
#: the version of ``ReferenceWatch.get_state`` (:func:`reference_state`)
REFERENCE_STATE_VERSION = 1


def _core(delta: float, chunk: int, recent: int, clock: int) -> Any:
    """The chunked ADWIN: the C tier's when built, else the reference."""
    if native.drift is not None:
        return native.drift.ChunkedAdwin(delta, chunk, recent, clock)
    return ChunkedAdwin(delta, chunk, recent, clock)


class DriftMonitor:
    """Watches the mistake stream for drifts (ADWIN over chunk mistake rates): a drift is a
    change ADWIN detects where the error rate rose (one where it fell, a model that learns, is
    not counted).

    Parameters
    ----------
    delta
        ADWIN's confidence (River's default 0.002; smaller: fewer false alarms, later alarms).
    on_drift
        Called with the drift's position (the number of examples learned when it was seen)
        each time one is detected.
    chunk, clock, recent
        Learned examples per ADWIN value, ADWIN's window checked every ``clock`` values, and
        the values that make "the recent rate" (defaults :data:`CHUNK`, :data:`CLOCK`,
        :data:`RECENT`).
    name
        The detector's name in the summary.

    Examples
    --------
    >>> import random
    >>> rng = random.Random(1)
    >>> monitor = DriftMonitor()
    >>> for i in range(20_000):
    ...     monitor.observe([rng.random() < (0.05 if i < 10_000 else 0.4)])
    >>> monitor.drifts >= 1, 10_000 < monitor.first_drift <= 11_000
    (True, True)

    """

    def __init__(
        self, delta: float = 0.002, on_drift: Callable[[int], None] | None = None, *,
        chunk: int = CHUNK, clock: int = CLOCK, recent: int = RECENT, name: str = "adwin",
    ) -> None:  # fmt: skip
        self.delta = delta
        self.on_drift = on_drift
        self.chunk, self.clock, self.recent, self.name = chunk, clock, recent, name
        self.drifts = 0
        self.first_drift: int | None = None
        self.last_drift: int | None = None
        self.positions: list[int] = []  # the last MARKS drifts
        self._core = self._new_core()
        self._pending: list[bool] = []  # record by record: up to the end of the open chunk
        self._left = chunk  # examples until the open chunk closes

    def _new_core(self) -> Any:
        return _core(self.delta, self.chunk, self.recent, self.clock)

    @property
    def seen(self) -> int:
        """Learned examples observed."""
        return int(self._core.seen) + len(self._pending)

    def observe(self, mistakes: Sequence[bool]) -> None:
        """Feed the mistakes of learned examples, in order."""
        if self._pending:
            self._flush()
        self._found(self._core.observe(mistakes))
        self._left = self.chunk - self._core.seen % self.chunk

    def observe_one(self, mistake: bool) -> None:
        """Feed one learned example's mistake: a drift it reveals is reported before this
        returns (``on_drift`` acts before the next example)."""
        self._pending.append(mistake)
        self._left -= 1
        if not self._left:
            self._flush()

    def trial(self, mistakes: Sequence[bool]) -> Any:
        """A copy of the window fed ``mistakes``, or ``None`` when they reveal a drift; nothing
        here changes either way (:meth:`adopt` takes the copy). The engine's block path feeds a
        block this way, and one that reveals a drift record by record, so that the drift and
        what it does land on the example where they land record by record."""
        if self._pending:
            self._flush()
        state = self._core.get_state()
        core = self._new_core()
        core._set(int(state["seen"]), int(state["open_sum"]), [int(r) for r in state["recent"]],
                  *window_fields(state["window"]))  # fmt: skip
        return None if core.observe(mistakes) else core

    def adopt(self, core: Any) -> None:
        """Continue from :meth:`trial`'s window."""
        self._core = core
        self._left = self.chunk - core.seen % self.chunk

    def start_at(self, seen: int) -> None:
        """Count from ``seen`` learned examples (a run resumed from a checkpoint saved without
        a detector): positions stay the run's example numbers."""
        self._set(seen, 0, [], None)

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        self._left = self.chunk - (self._core.seen + len(pending)) % self.chunk
        self._found(self._core.observe(pending))

    def _found(self, drifts: list[int]) -> None:
        for seen in drifts:
            self.drifts += 1
            self.last_drift = seen
            self.positions = [*self.positions[-(MARKS - 1) :], seen]
            if self.first_drift is None:
                self.first_drift = seen
            logger.info("drift detected at example %d (%s, delta %g)", seen, self.name, self.delta)
            if self.on_drift is not None:
                self.on_drift(seen)

    def summary(self) -> dict[str, Any]:
        """The drifts as the run summary shows them."""
        return {"detector": self.name, "drifts": self.drifts, "last_drift": self.last_drift,
                "first_drift": self.first_drift, "positions": list(self.positions)}  # fmt: skip

    # -- state ---------------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        """JSON: the counts, the open chunk and ADWIN's window, so a resumed run detects what an
        uninterrupted one does."""
        if self._pending:
            self._flush()
        core = self._core.get_state()
        return {
            "detector": self.name,
            "version": STATE_VERSION,
            "delta": self.delta,
            "chunk": self.chunk,
            "clock": self.clock,
            "drifts": self.drifts,
            "first_drift": self.first_drift,
            "last_drift": self.last_drift,
            "positions": list(self.positions),
            **core,
        }

    def load_state(self, state: Any, learned: int | None = None) -> None:
        """Continue from :meth:`get_state` (``learned``: the run's learned examples, which the
        counts cannot pass). A state of an earlier release (River's serialised window) or of
        other settings (another detector, delta or chunking: a changed flag, not corruption)
        keeps its counts and drifts; its window starts afresh, with a one-line warning.
        :class:`StateError` naming the field for a state no monitor writes."""
        saved = checked_state(state, learned)
        settings = (saved.detector, saved.delta, saved.chunk, saved.clock)
        window = saved.window
        if settings != (self.name, self.delta, self.chunk, self.clock) and window is not None:
            logger.warning(
                "the checkpoint's drift detector (%s, delta %g, chunk %d, clock %s) is not this "
                "run's (%s, delta %g, chunk %d, clock %d): its window starts afresh (the counts "
                "and drifts are kept)", *settings, self.name, self.delta, self.chunk, self.clock,
            )  # fmt: skip
            window = None
        elif window is None:
            logger.warning("the drift detector's window was saved by an earlier release: it "
                           "starts afresh (the counts and drifts are kept)")  # fmt: skip
        open_sum, recent = saved.open_sum, saved.recent[-self.recent :]
        if saved.chunk != self.chunk:  # the open chunk and the recent rates are another chunking's
            open_sum, recent = 0, []
        self._set(saved.seen, open_sum, recent, window)
        self.drifts = saved.drifts
        self.first_drift, self.last_drift = saved.first_drift, saved.last_drift
        self.positions = saved.positions[-MARKS:]

    def _set(self, seen: int, open_sum: int, recent: list[int], window: Any) -> None:
        """A new core at these counts, with ``window`` (:func:`window_fields`; None: empty)."""
        self._core = self._new_core()
        self._core._set(seen, open_sum, recent, *(window or EMPTY_WINDOW))
        self._pending = []
        self._left = self.chunk - seen % self.chunk


class SavedMonitor(NamedTuple):
    """A drift monitor's state as :func:`checked_state` read it."""

    detector: str
    delta: float
    chunk: int
    clock: int | None
    seen: int
    open_sum: int
    recent: list[int]
    drifts: int
    first_drift: int | None
    last_drift: int | None
    positions: list[int]
    window: Any  # window_fields' tuple, or None: an earlier release's (not read)


def checked_state(state: Any, learned: int | None = None) -> SavedMonitor:
    """:meth:`DriftMonitor.get_state` read back and checked without a monitor (``inspect`` checks
    a checkpoint's this way): every field of its type and in its range, the counts within the
    run's ``learned`` examples, drifts within the examples seen. :class:`StateError` naming the
    field otherwise."""
    if not isinstance(state, dict):
        raise StateError(f"corrupt drift detector state: {short(state)}")
    try:
        return _checked(state, learned)
    except KeyError as e:
        raise StateError(f"corrupt drift detector state: the field {e} is missing") from None
    except StateError as e:
        raise StateError(f"corrupt drift detector state: {e}") from None


def _checked(state: dict[str, Any], learned: int | None) -> SavedMonitor:
    detector = state.get("detector", "adwin")  # absent from the first release's
    if detector not in DETECTORS[:2]:
        raise StateError(f"detector is {short(detector)}, not one of {DETECTORS[:2]}")
    version = state.get("version")  # absent from the first release's
    if version is not None:
        count(version, "version")
    delta = number(state["delta"], "delta", 0.0, 1.0)
    chunk = count(state["chunk"], "chunk", low=1)
    clock = None if state.get("clock") is None else count(state["clock"], "clock", low=1)
    seen = count(state["seen"], "seen", MAX_COUNT if learned is None else learned,
                 "" if learned is None else "the examples learned")  # fmt: skip
    open_sum = count(state["open_sum"], "open_sum", seen % chunk, "the open chunk's length")
    recent = state.get("recent", [])
    if not isinstance(recent, list):
        raise StateError(f"recent is {short(recent)}, not a list of counts")
    recent = [count(r, "recent", chunk, "chunk") for r in recent]
    drifts = count(state["drifts"], "drifts", seen, "seen")
    first, last = (None if state[k] is None else count(state[k], k, seen, "seen")
                   for k in ("first_drift", "last_drift"))  # fmt: skip
    if drifts:
        wrong = first is None or last is None or first > last
    else:
        wrong = first is not None or last is not None
    if wrong:
        raise StateError(f"first_drift {first} and last_drift {last} for {drifts} drifts")
    positions = state.get("positions", [])
    if not isinstance(positions, list) or len(positions) > drifts:
        raise StateError(f"positions is {short(positions)}, not up to {drifts} positions")
    positions = [count(p, "positions", seen, "seen") for p in positions]
    window = None
    if version == STATE_VERSION:
        window = window_fields(state["window"])
        if window[2] * chunk > seen:  # the window holds a value per chunk seen, at most
            raise StateError(f"the window holds {window[2]:g} chunks of {seen} examples")
    return SavedMonitor(detector, delta, chunk, clock, seen, open_sum, recent, drifts, first,
                        last, positions, window)  # fmt: skip


def reference_state(
    state: Any, learner: StreamClassifier, learned: int | None = None
) -> tuple[StreamClassifier | None, int | None, int | None, int]:
    """``--drift-detector reference``'s state (``ReferenceWatch.get_state``) read back and
    checked against ``learner``, the model it watches: ``(copy, due, taken_at, after)``. The copy
    must be a model of the learner's kind (its class, binary or multi-class, hyperparameters and
    preprocessing: a copy of another kind makes false drifts, and ``--on-drift reset`` acts on
    them), taken within the ``learned`` examples; the next copy due at most ``after`` examples
    after them. :class:`StateError` naming the field otherwise."""
    if not isinstance(state, dict):
        raise StateError(f"corrupt drift reference state: {short(state)}")
    try:
        if state["version"] != REFERENCE_STATE_VERSION or type(state["version"]) is not int:
            raise StateError(f"version is {short(state['version'])}, not "
                             f"{REFERENCE_STATE_VERSION}")  # fmt: skip
        after = count(state["after"], "after", low=1)
        taken_at, due = state["taken_at"], state["due"]
        if learned is None:
            taken_at = None if taken_at is None else count(taken_at, "taken_at")
            due = None if due is None else count(due, "due")
        else:  # a copy is taken at an example learned; the next is due within after of them
            if taken_at is not None:
                taken_at = count(taken_at, "taken_at", learned, "the examples learned")
            if due is not None:
                due = count(due, "due", learned + after, f"{learned} learned + after {after}")
        model = state["model"]
        copy = None if model is None else StreamClassifier.from_state(model)
    except KeyError as e:
        raise StateError(f"corrupt drift reference state: the field {e} is missing") from None
    except StateError as e:
        raise StateError(f"corrupt drift reference state: {e}") from None
    if (copy is None) == (due is None) or (copy is None) != (taken_at is None):
        held = "a copy" if copy is not None else "no copy"
        raise StateError(f"corrupt drift reference state: {held} with due {due} and taken_at "
                         f"{taken_at} (a copy and when it was taken, or when one is due)")
    if copy is not None and learner_kind(copy) != learner_kind(learner):
        raise StateError(f"corrupt drift reference state: model is a copy of {copy!r}, not of "
                         f"the model {learner!r}")  # fmt: skip
    return copy, due, taken_at, after


def learner_kind(learner: StreamClassifier) -> tuple[Any, ...]:
    """What a copy of ``learner`` has the same of: its class and hyperparameters, and those of
    the learner a :class:`~stream_perceptron.learners.Preprocessed` wraps."""
    params = learner._get_params()
    inner = params.pop("model", None)
    return (type(learner), params, None if inner is None else learner_kind(inner))
