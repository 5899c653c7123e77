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
from typing import Any

from stream_perceptron import native
from stream_perceptron.adwin import EMPTY_WINDOW, ChunkedAdwin, window_fields
from stream_perceptron.errors import StateError

__all__ = ["CHUNK", "CLOCK", "DETECTORS", "DriftMonitor", "MARKS", "REFERENCE_AFTER"]

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

    def load_state(self, state: Any) -> None:
        """Continue from :meth:`get_state`. A state of an earlier release (River's serialised
        window) or of other settings keeps its counts and drifts; its window starts afresh, with
        a warning."""
        try:
            if float(state["delta"]) != self.delta:
                raise StateError("the drift detector's delta differs from this run's")
            seen, open_sum = int(state["seen"]), int(state["open_sum"])
            recent = [int(r) for r in state.get("recent", [])][-self.recent :]
            drifts = int(state["drifts"])
            first, last = state["first_drift"], state["last_drift"]
            positions = [int(p) for p in state.get("positions", [])][-MARKS:]
            same = (state.get("version") == STATE_VERSION and state.get("clock") == self.clock
                    and state.get("chunk") == self.chunk
                    and state.get("detector", "adwin") == self.name)  # fmt: skip
            window = window_fields(state["window"]) if same else None
        except (KeyError, TypeError, ValueError) as e:
            raise StateError(f"corrupt drift detector state: {e!r}") from e
        chunk = int(state["chunk"]) if isinstance(state.get("chunk"), int) else 0
        if not (0 <= seen and chunk > 0 and 0 <= open_sum <= seen % chunk and 0 <= drifts
                and all(0 <= r <= chunk for r in recent)):  # fmt: skip
            raise StateError("corrupt drift detector state: counts out of range")
        if window is None:
            logger.warning("the drift detector's window was saved by an earlier release or "
                           "by another detector or chunking: it starts afresh (the counts and "
                           "drifts are kept)")  # fmt: skip
        if chunk != self.chunk:  # the open chunk and the recent rates are another chunking's
            open_sum, recent = 0, []
        self._set(seen, open_sum, recent, window)
        self.drifts = drifts
        self.first_drift = None if first is None else int(first)
        self.last_drift = None if last is None else int(last)
        self.positions = positions

    def _set(self, seen: int, open_sum: int, recent: list[int], window: Any) -> None:
        """A new core at these counts, with ``window`` (:func:`window_fields`; None: empty)."""
        self._core = self._new_core()
        self._core._set(seen, open_sum, recent, *(window or EMPTY_WINDOW))
        self._pending = []
        self._left = self.chunk - seen % self.chunk
