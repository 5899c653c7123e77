"""Glue of the binary passive-aggressive learner's C kernel (``kernel_pa`` in ``_dense.c``).

:func:`learn_dense` predicts-then-learns every row of a dense float64 matrix and leaves the
model exactly as the ``predict_learn_one`` loop over ``dict(zip(features, row))`` would, to the
last bit: the same predictions, updates, weights (same keys, same insertion order), bias,
counters and ``max_norm``. The model's dict stays authoritative: each call copies the weights
of ``features`` into an array, runs the kernel over the whole matrix and writes the array back.
Call it through :meth:`PassiveAggressive.learn_dense
<stream_perceptron.learners.PassiveAggressive.learn_dense>`.

The kernel does the floating-point operations of ``PassiveAggressive._learn`` (the reference)
in the same order: ``sq`` and ``dot`` left folds from ``+0.0`` in feature order, ``dot`` over
the features ``_w`` has; the step of :func:`~stream_perceptron.learners.passive_aggressive.
step_size`; ``w.get(k, 0.0) + step * v`` for every feature of an updated row. A labelled row
``_learn`` would refuse (``sq``, the bias or a weight not finite) stops the kernel:
:func:`learn_dense` raises :class:`~stream_perceptron.errors.ValueTooLargeError` (``row``: its
index) and writes nothing back. A sign of ``0`` marks an unlabelled row, only predicted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from stream_perceptron import native
from stream_perceptron.native.binary import checked_block, refusal

if TYPE_CHECKING:
    from stream_perceptron.learners.passive_aggressive import PassiveAggressive

__all__ = ["VARIANT_CODES", "learn_dense"]

VARIANT_CODES = {"pa": 0, "pa1": 1, "pa2": 2}


def learn_dense(
    model: PassiveAggressive, features: Sequence[Any], X: Any, signs: Any
) -> np.ndarray:
    """:meth:`PassiveAggressive.learn_dense`'s work (the C extension built)."""
    c = native.dense
    if c is None:
        raise RuntimeError(f"the C kernel is unavailable: {native.dense_error}")
    features, X, signs = checked_block(features, X, signs)
    n = X.shape[0]
    preds = np.empty(n, dtype=np.int8)
    if n == 0:
        return preds
    wd = model._w
    w = np.array([wd.get(k, 0.0) for k in features], dtype=np.float64)
    present = np.array([k in wd for k in features], dtype=np.bool_)
    b, n_seen, n_mistakes, max_norm, w_updated, finite, refused = c.kernel_pa(
        X, signs, w, present, VARIANT_CODES[model.variant], float(model.C),
        model._bias_mode == "learned", float(model._b), int(model._n_seen),
        int(model._n_mistakes), float(model._max_norm), preds, n, X.shape[1],
    )  # fmt: skip
    if not finite:  # checked by the kernel, on the way: the model is left as it was
        raise ValueError("X has non-finite values")
    if refused >= 0:
        raise refusal(int(refused))
    if w_updated:  # every feature of a dense row is in _w after its first update
        for k, v in zip(features, w.tolist()):
            wd[k] = v
    model._b = float(b)
    model._n_seen = int(n_seen)
    model._n_mistakes = int(n_mistakes)
    model._max_norm = float(max_norm)
    return preds
