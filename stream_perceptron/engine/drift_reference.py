"""The drift detector ``reference`` (``--drift-detector reference``): ADWIN on the mistakes of
a frozen copy of the model, the engine's join of the learner and the drift monitor.

A model that adapts (PA-I, a forgetting average) recovers from a small switch within a few
hundred examples, about as fast as ADWIN can tell a rise in its mistakes: on SEA (thresholds
8 -> 9 -> 7 -> 9.5 on x0 + x1, 10 % noise) its own error rate never moves enough to be seen. A
copy of the model does not adapt: while the stream stays the same, its error rate stays the
same; after a switch it stays higher, for good, and ADWIN fed each of its mistakes (a chunk of
one example, the window checked at every example, delta 0.01) sees SEA's smallest switch
(8.5 % of the examples change their label) within 1,000 examples (benchmarks row 13d).

The copy is taken once ``after`` examples have been learned from the start, and again ``after``
examples after each drift (the model has then learned the new concept); the monitor's window
starts afresh with each copy, so its positions stay the run's example numbers. The copy
predicts every labelled example once more, record by record (the block path is off), and it
is in the checkpoint (its state JSON), so a resumed run sees the drifts an uninterrupted one
sees.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from stream_perceptron.drift import REFERENCE_AFTER, DriftMonitor
from stream_perceptron.errors import StateError
from stream_perceptron.learners import StreamClassifier

__all__ = ["REFERENCE_AFTER", "ReferenceWatch", "reference_monitor"]

logger = logging.getLogger(__name__)

#: The reference monitor's ADWIN: every example a value, checked at every one; "the recent
#: rate" that tells a rise from a fall is over the last 128 examples. Its delta, 0.01, is
#: looser than River's default 0.002: the copy's mistakes are the same stream for as long as
#: the concept holds (no learning curve in them), and at 0.01 ADWIN raised no false alarm in
#: 800k stationary SEA examples (0.02: one) while it sees SEA's smallest switch sooner.
REFERENCE_CHUNK, REFERENCE_CLOCK, REFERENCE_RECENT = 1, 1, 128
REFERENCE_DELTA = 0.01
STATE_VERSION = 1


def reference_monitor(delta: float = REFERENCE_DELTA) -> DriftMonitor:
    """The drift monitor of ``--drift-detector reference`` (ADWIN on every example)."""
    return DriftMonitor(
        delta, chunk=REFERENCE_CHUNK, clock=REFERENCE_CLOCK, recent=REFERENCE_RECENT,
        name="reference",
    )  # fmt: skip


class ReferenceWatch:
    """Feeds ``monitor`` the mistakes of a frozen copy of ``learner``.

    Parameters
    ----------
    learner
        The engine's learner (the very object: a reset on drift changes it in place).
    monitor
        The drift monitor (:func:`reference_monitor`); its ``on_drift`` is called as before,
        after the copy was dropped.
    after
        Examples learned from the start and after each drift before the copy is taken.

    Examples
    --------
    >>> from stream_perceptron import Perceptron
    >>> model = Perceptron()
    >>> watch = ReferenceWatch(model, reference_monitor(), after=100)
    >>> learned = 0
    >>> for i in range(3_000):  # the label is x's sign, then (from example 1,500) its opposite
    ...     x = {"a": (i * 7919) % 200 / 100 - 1.0}
    ...     y = (x["a"] > 0) == (i < 1_500)
    ...     model.learn_one(x, y)
    ...     learned += 1
    ...     watch.observe(x, y, learned)
    >>> 1_500 < watch.monitor.first_drift < 1_700, watch.taken_at > 1_500
    (True, True)
    """

    def __init__(self, learner: StreamClassifier, monitor: DriftMonitor, after: int) -> None:
        if after < 1:
            raise ValueError(f"after must be at least 1, got {after}")
        self.learner = learner
        self.monitor = monitor
        self.after = after
        #: the learned count at which the next copy is taken (None: a copy is held)
        self.due: int | None = after
        #: the learned count at which the copy held was taken
        self.taken_at: int | None = None
        self._copy: StreamClassifier | None = None
        #: what a drift does after the copy is dropped (``--on-drift``'s action)
        self.then: Callable[[int], None] | None = monitor.on_drift
        monitor.on_drift = self._drifted

    def observe(self, x: Any, y: Any, learned: int) -> None:
        """The learner has just learned ``(x, y)``, its ``learned``-th example."""
        copy = self._copy
        if copy is not None:
            self.monitor.observe_one(copy.predict_one(x) != y)
        elif self.due is not None and learned >= self.due:
            self._take(learned)

    def _take(self, learned: int) -> None:
        self._copy = StreamClassifier.from_state(self.learner.get_state())
        self.taken_at, self.due = learned, None
        self.monitor.start_at(learned)
        logger.info("drift reference: the model's copy taken at example %d", learned)

    def _drifted(self, position: int) -> None:
        self._copy, self.taken_at, self.due = None, None, position + self.after
        if self.then is not None:
            self.then(position)

    # -- state ---------------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        """JSON: when the next copy is due, or the copy held (its model state)."""
        copy = self._copy
        return {
            "version": STATE_VERSION,
            "after": self.after,
            "due": self.due,
            "taken_at": self.taken_at,
            "model": None if copy is None else copy.get_state(),
        }

    def load_state(self, state: Any) -> None:
        """Continue from :meth:`get_state` (a different ``after`` counts on from the saved
        due position)."""
        try:
            due, taken_at, model = state["due"], state["taken_at"], state["model"]
            if state["version"] != STATE_VERSION:
                raise StateError(f"drift reference state version {state['version']!r}")
            copy = None if model is None else StreamClassifier.from_state(model)
            due = None if due is None else int(due)
            taken_at = None if taken_at is None else int(taken_at)
        except (KeyError, TypeError, ValueError) as e:
            raise StateError(f"corrupt drift reference state: {e!r}") from e
        if (copy is None) == (due is None):
            raise StateError("corrupt drift reference state: neither a copy nor a due position")
        self._copy, self.due, self.taken_at = copy, due, taken_at

    def start_at(self, learned: int) -> None:
        """A run resumed from a checkpoint saved without this detector: the copy is due
        ``after`` examples from here."""
        self._copy, self.taken_at, self.due = None, None, learned + self.after
