"""Drift detection on the mistake stream: River's ADWIN, fed the mistake rate of short chunks.

ADWIN (Bifet & Gavalda 2007) keeps a window of recent values and drops its older part when
the two parts' means differ by more than a bound at confidence ``delta``; a drop is a drift.
Here its values are the prequential mistake rates of consecutive chunks of :data:`CHUNK`
learned examples (a mean of 0/1 mistakes, in [0, 1], which ADWIN takes as it is), checked at
every update (``clock=1``): one update per chunk, not per example. River's
``drift.ADWIN.update`` costs about 0.8 us, as much as the engine's whole per-example work on its
block path (about 1.1 us); with chunks of 8 the whole monitor costs 0.18 us an example (in
blocks of 10k; 0.32 us one by one). Larger chunks cost less and see drifts later (ADWIN's bound
counts updates, not examples). A drift is placed at the end of the chunk that revealed it.

The chunks follow the count of learned examples, not the blocks the engine reads, so the record
path and the block path, and a run resumed from a checkpoint, see the same drifts at the same
positions. The state (counts, the open chunk and ADWIN's own, as River serialises it) is JSON.
"""

from __future__ import annotations

import base64
import logging
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from stream_perceptron.errors import StateError

__all__ = ["CHUNK", "DETECTORS", "DriftMonitor", "MARKS"]

logger = logging.getLogger(__name__)

#: Learned examples per ADWIN update: 8 detects a switch of the mistake rate from 0.1 to 0.3
#: after 368-464 examples (32: 800-1,568, ADWIN checking every update), at about 0.18 us an
#: example in blocks (ADWIN.update, 0.8 us, once per chunk, and the chunk sums).
CHUNK = 8
DETECTORS = ("adwin", "none")
#: Positions of the most recent drifts kept for the live page's marks.
MARKS = 100
#: Chunks whose mistake rate is "the recent rate" that tells a rise from a fall (128 examples).
RECENT = 16


def _adwin(delta: float) -> Any:
    from river import drift

    return drift.ADWIN(delta=delta, clock=1)


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
        self, delta: float = 0.002, on_drift: Callable[[int], None] | None = None
    ) -> None:
        self.delta = delta
        self.on_drift = on_drift
        self.drifts = 0
        self.first_drift: int | None = None
        self.last_drift: int | None = None
        self.positions: list[int] = []  # the last MARKS drifts
        self.seen = 0  # learned examples observed
        self._sum = 0  # mistakes of the open chunk
        self._recent: deque[int] = deque(maxlen=RECENT)  # mistakes of the last chunks
        self._adwin = _adwin(delta)

    def observe(self, mistakes: Sequence[bool]) -> None:
        """Feed the mistakes of learned examples, in order."""
        n = len(mistakes)
        head = min(n, -self.seen % CHUNK)  # the examples that close the open chunk
        for m in mistakes[:head]:
            self.observe_one(m)
        whole = (n - head) // CHUNK * CHUNK
        if whole:
            body = np.asarray(mistakes[head : head + whole], dtype=np.int64)
            for total in body.reshape(-1, CHUNK).sum(axis=1).tolist():
                self.seen += CHUNK
                self._sum = total
                self._close_chunk()
        for m in mistakes[head + whole :]:
            self.observe_one(m)

    def observe_one(self, mistake: bool) -> None:
        self._sum += mistake
        self.seen += 1
        if self.seen % CHUNK == 0:
            self._close_chunk()

    def _close_chunk(self) -> None:
        adwin = self._adwin
        before = adwin.estimation
        adwin.update(self._sum / CHUNK)
        self._recent.append(self._sum)
        self._sum = 0
        # ADWIN drops its window's older part on any change of the mean; only a rise of the
        # error rate is a drift here (a model still learning makes fewer and fewer mistakes):
        # the rate of the last RECENT chunks above the window's mean before this update.
        # (ADWIN's estimate after the drop is no guide: it may drop one old bucket at a time.)
        recent = sum(self._recent) / (CHUNK * len(self._recent))
        if adwin.drift_detected and recent > before:
            self.drifts += 1
            self.last_drift = self.seen
            self.positions = [*self.positions[-(MARKS - 1) :], self.seen]
            if self.first_drift is None:
                self.first_drift = self.seen
            logger.info("drift detected at example %d (ADWIN, delta %g)", self.seen, self.delta)
            if self.on_drift is not None:
                self.on_drift(self.seen)

    def summary(self) -> dict[str, Any]:
        """The drifts as the run summary shows them."""
        return {"detector": "adwin", "drifts": self.drifts, "last_drift": self.last_drift,
                "first_drift": self.first_drift, "positions": list(self.positions)}  # fmt: skip

    # -- state ---------------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        """JSON: the counts, the open chunk, and ADWIN's window in River's own serialisation
        (base64), so a resumed run detects what an uninterrupted one does."""
        blob = self._adwin._helper.__getstate__()
        return {
            "detector": "adwin",
            "delta": self.delta,
            "chunk": CHUNK,
            "seen": self.seen,
            "open_sum": self._sum,
            "recent": list(self._recent),
            "drifts": self.drifts,
            "first_drift": self.first_drift,
            "last_drift": self.last_drift,
            "positions": list(self.positions),
            "adwin": base64.b64encode(bytes(blob)).decode("ascii"),
        }

    def load_state(self, state: Any) -> None:
        """Continue from :meth:`get_state`. ADWIN's window, if River cannot read it (another
        River release), starts afresh, with a warning; the counts are kept."""
        try:
            if state["chunk"] != CHUNK or float(state["delta"]) != self.delta:
                raise StateError("the drift detector's chunk or delta differ from this run's")
            seen, open_sum = int(state["seen"]), int(state["open_sum"])
            recent = [int(r) for r in state.get("recent", [])][-RECENT:]
            drifts = int(state["drifts"])
            first, last = state["first_drift"], state["last_drift"]
            positions = [int(p) for p in state.get("positions", [])][-MARKS:]
            blob = base64.b64decode(state["adwin"], validate=True)
        except (KeyError, TypeError, ValueError) as e:
            raise StateError(f"corrupt drift detector state: {e!r}") from e
        if not (0 <= open_sum <= seen % CHUNK and 0 <= drifts):
            raise StateError("corrupt drift detector state: counts out of range")
        adwin = _adwin(self.delta)
        try:
            adwin._helper.__setstate__(blob)
        except Exception as e:  # noqa: BLE001 (River's serialisation may change between releases)
            logger.warning("the drift detector's window could not be restored (%s): it starts "
                           "afresh", e)  # fmt: skip
            adwin = _adwin(self.delta)
        self._adwin = adwin
        self.seen, self._sum, self.drifts = seen, open_sum, drifts
        self._recent = deque(recent, maxlen=RECENT)
        self.first_drift = None if first is None else int(first)
        self.last_drift = None if last is None else int(last)
        self.positions = positions
