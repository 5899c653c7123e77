"""Glue of the passive-aggressive learners' C kernels (``kernel_pa``, ``kernel_pa_multiclass``
in ``_dense.c``).

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

from array import array
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from stream_perceptron import native
from stream_perceptron.lazy_numpy import np
from stream_perceptron.learners._binary_kernel import checked_block, predictions, refusal
from stream_perceptron.learners._multiclass_kernel import (
    checked_multiclass_block,
    class_codes,
    write_classes,
)

if TYPE_CHECKING:
    from stream_perceptron.learners.passive_aggressive import (
        MulticlassPassiveAggressive,
        PassiveAggressive,
    )

__all__ = ["VARIANT_CODES", "learn_dense", "learn_dense_multiclass"]

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
    preds = bytearray(n)  # int8 predictions, written by the kernel
    wd = model._w
    w = array("d", [wd.get(k, 0.0) for k in features])
    present = bytes([k in wd for k in features])
    if n == 0:
        return predictions(preds, X)
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
    return predictions(preds, X)


def learn_dense_multiclass(
    model: MulticlassPassiveAggressive, features: Sequence[Any], X: Any, labels: Sequence[Any]
) -> list[Any]:
    """:meth:`MulticlassPassiveAggressive.learn_dense`'s work (the C extension built)."""
    c, features, X = checked_multiclass_block(features, X, labels)
    n, d = X.shape
    known = len(model._w)
    classes, codes = class_codes(list(model._w), labels)
    W = np.zeros((len(classes), d))
    bias = np.zeros(len(classes))
    for i, cl in enumerate(model._w):
        wc = model._w[cl]
        W[i] = [wc.get(k, 0.0) for k in features]
        bias[i] = model._b[cl]
    updated = np.zeros(len(classes), dtype=np.uint8)
    preds = np.empty(n, dtype=np.int64)
    n_active, max_norm, n_seen, n_mistakes, refused = c.kernel_pa_multiclass(
        X, codes, W, bias, updated, np.empty(len(classes)), known,
        VARIANT_CODES[model.variant], float(model.C), model._bias_mode == "learned",
        float(model._max_norm), int(model._n_seen), int(model._n_mistakes), preds, n, d,
        len(classes),
    )  # fmt: skip
    if refused >= 0:  # the kernel stopped at that row: nothing is written back
        raise refusal(int(refused))
    write_classes(model, classes[known:n_active], classes, features, W, bias, updated)
    model._max_norm = float(max_norm)
    model._n_seen = int(n_seen)
    model._n_mistakes = int(n_mistakes)
    named = [None, *classes]
    return list(map(named.__getitem__, (preds + 1).tolist()))
