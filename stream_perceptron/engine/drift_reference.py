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
predicts every labelled example once more: record by record on the record path, and on the
block path a whole block in one call of its dense kernels (every row passed as unlabelled, so
it learns nothing: :func:`predicted_mistakes`) before the learner learns the block. A block in
which the copy is due or a drift falls goes record by record (the engine's slices), so both
land on the example they land on record by record: the two paths, and a run resumed from a
checkpoint (which holds the copy's state JSON), see the same drifts.
"""

from __future__ import annotations

import logging
import operator
from array import array
from collections.abc import Mapping
from typing import Any

from stream_perceptron import native
from stream_perceptron.drift import (
    REFERENCE_AFTER,
    REFERENCE_STATE_VERSION,
    DriftMonitor,
    reference_state,
)
from stream_perceptron.errors import LabelError, ValueTooLargeError
from stream_perceptron.formats.base import DenseBatch
from stream_perceptron.formats.label_cells import LabelCells
from stream_perceptron.lazy_numpy import np
from stream_perceptron.learners import StreamClassifier
from stream_perceptron.learners.binary_blocks import BinaryBlocks
from stream_perceptron.learners.preprocessed import base_learner

__all__ = ["REFERENCE_AFTER", "ReferenceWatch", "reference_monitor"]

logger = logging.getLogger(__name__)

#: The reference monitor's ADWIN: every example a value, checked at every one; "the recent
#: rate" that tells a rise from a fall is over the last 128 examples. Its delta, 0.01, is
#: looser than River's default 0.002: the copy's mistakes are the same stream for as long as
#: the concept holds (no learning curve in them), and at 0.01 ADWIN raised no false alarm in
#: 800k stationary SEA examples (0.02: one) while it sees SEA's smallest switch sooner.
REFERENCE_CHUNK, REFERENCE_CLOCK, REFERENCE_RECENT = 1, 1, 128
REFERENCE_DELTA = 0.01
STATE_VERSION = REFERENCE_STATE_VERSION


#: :meth:`ReferenceWatch.trial_block` of a block learned while no copy is held
_NOTHING = object()


def predicted_mistakes(
    learner: StreamClassifier, dense: DenseBatch, label_of: Mapping[Any, Any]
) -> list[bool] | None:
    """The mistakes ``learner`` makes on a block's rows, as ``predict_one(x) != y`` gives them
    row by row, predicted in one call of its dense kernels without learning (every row passed
    as unlabelled: the learner's state is left as it was); ``None`` when a row is unlabelled or
    refused, or a binary learner's label encoding would change (then row by row)."""
    if not learner.dense_capable:
        return None
    features, X, cells = dense
    try:
        if isinstance(base_learner(learner), BinaryBlocks):
            return _binary_mistakes(learner, features, X, cells, label_of)
        if isinstance(cells, LabelCells):
            values = list(map(label_of.__getitem__, cells.distinct))
            labels = list(map(values.__getitem__, cells.ids.tolist()))
        else:
            labels = list(map(label_of.__getitem__, cells))
        if None in labels:
            return None
        predictions = learner.learn_dense(features, np.asarray(X), [None] * len(labels))
        return list(map(operator.ne, predictions, labels))
    except (ValueTooLargeError, LabelError):
        return None


def _binary_mistakes(
    learner: Any, features: Any, X: Any, cells: Any, label_of: Mapping[Any, Any]
) -> list[bool] | None:
    saved = learner.label_encoding
    if isinstance(cells, LabelCells):
        encoded = learner.encode_block(cells.distinct, label_of, atomic=True, ids=cells.ids)
    else:
        encoded = learner.encode_block(cells, label_of, atomic=True)
    if learner.label_encoding != saved:  # the copy's encoding had not settled
        learner.label_encoding = saved
        return None
    if encoded is None or encoded[2]:
        return None
    signs = encoded[0]
    assert native.dense is not None  # dense_capable
    predicted = learner.learn_dense(features, X, array("b", bytes(len(signs))))
    mistakes, unlabelled = native.dense.mistakes(predicted, signs)
    return None if unlabelled else list(mistakes)


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
        The drift monitor (:func:`reference_monitor`); its ``on_drift`` (``--on-drift``'s
        action) acts on the example that reveals a drift; the copy is dropped after it.
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
    def observe(self, x: Any, y: Any, learned: int) -> None:
        """The learner has just learned ``(x, y)``, its ``learned``-th example."""
        copy, monitor = self._copy, self.monitor
        if copy is not None:
            drifts = monitor.drifts
            monitor.observe_one(copy.predict_one(x) != y)  # its on_drift acts in there
            if monitor.drifts != drifts:  # the copy is of the concept before the drift
                self._copy, self.taken_at, self.due = None, None, learned + self.after
        elif self.due is not None and learned >= self.due:
            self._take(learned)

    def trial_block(self, dense: DenseBatch, label_of: Mapping[Any, Any], learned: int) -> Any:
        """Before the engine's block path learns ``dense`` whole (``learned`` examples so far):
        what the block does here, for :meth:`commit_block`; ``None`` when the block is to go
        record by record because the copy is due within it, a drift falls in it, or the copy
        cannot predict it whole (a row unlabelled or refused). The record path then takes the
        copy, or drops it at the drift, on the very example it does in every run."""
        copy = self._copy
        if copy is None:
            if self.due is not None and learned + len(dense[2]) >= self.due:
                return None
            return _NOTHING
        mistakes = predicted_mistakes(copy, dense, label_of)
        if mistakes is None:
            return None
        return self.monitor.trial(mistakes)

    def commit_block(self, trial: Any) -> None:
        """The block of :meth:`trial_block` was learned: the monitor takes its window."""
        if trial is not _NOTHING:
            self.monitor.adopt(trial)

    def _take(self, learned: int) -> None:
        self._copy = StreamClassifier.from_state(self.learner.get_state())
        self.taken_at, self.due = learned, None
        self.monitor.start_at(learned)
        logger.info("drift reference: the model's copy taken at example %d", learned)

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

    def load_state(self, state: Any, learned: int | None = None) -> None:
        """Continue from :meth:`get_state` (``learned``: the run's learned examples). The state
        is checked against the learner (:func:`~stream_perceptron.drift.reference_state`:
        :class:`StateError` naming the field). A different ``after`` counts on from the saved
        due position, but no further than this run's ``after`` from ``learned``."""
        copy, due, taken_at, after = reference_state(state, self.learner, learned)
        if due is not None and learned is not None and after != self.after:
            due = min(due, learned + self.after)
        self._copy, self.due, self.taken_at = copy, due, taken_at

    def start_at(self, learned: int) -> None:
        """A run resumed from a checkpoint saved without this detector: the copy is due
        ``after`` examples from here."""
        self._copy, self.taken_at, self.due = None, None, learned + self.after
