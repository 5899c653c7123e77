"""Glue of the binary perceptron's C kernel: the model's dicts to arrays, the kernel, back.

:func:`learn_dense` predicts-then-learns every row of a dense float64 matrix and leaves the
model exactly as the ``predict_learn_one`` loop over ``dict(zip(features, row))`` would, to the
last bit: the same predictions, mistakes, weights (same keys, same insertion order), bias,
averaging accumulators, counters and ``max_norm``. The model's dicts stay authoritative: each
call copies the weights of ``features`` into arrays, runs the C kernel (``_dense.c``) over the
whole matrix, and writes the arrays back. Call it through
:meth:`Perceptron.learn_dense <stream_perceptron.learners.Perceptron.learn_dense>`.

The kernel does the floating-point operations of ``Perceptron._learn`` / ``Perceptron._score``
(the reference) in the same order:

* ``dot`` starts at ``+0.0`` and adds ``w*v`` for features present in ``_w`` only, left to
  right in feature order; absent ones are skipped, not added as ``0.0*v``;
* a weight absent from ``_w`` is ``+0.0`` in the arrays, which is what ``w.get(k, 0.0)`` gives
  the update; likewise ``u.get(k, 0.0)``.

A labelled row whose update would make R, the bias, a weight or an averaging accumulator
non-finite (what ``Perceptron._learn`` refuses with :class:`~stream_perceptron.errors.
ValueTooLargeError`) stops the kernel: :func:`learn_dense` then raises that error, with the
row's index as ``row``, and writes nothing back: the model is as it was before the call (the
caller learns the block row by row, which refuses that row alone). Such rows are rare
(hostile input), so the common case pays one comparison per row and one addition per
updated weight.

A sign of ``0`` marks an unlabelled row: it is predicted as ``predict_one`` would (the averaged
score when ``averaged``) and not learned from (``n_seen`` and ``max_norm`` unchanged), so a
batch mixing labelled and unlabelled rows needs one call.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from stream_perceptron import native
from stream_perceptron.errors import ValueTooLargeError
from stream_perceptron.formats.sparse_rows import SparseRows
from stream_perceptron.lazy_numpy import np
from stream_perceptron.learners._linear import BIAS_MODES

if TYPE_CHECKING:
    from stream_perceptron.learners._perceptron_model import PerceptronModel

__all__ = [
    "BIAS_CODES",
    "supported",
    "learn_dense",
    "checked_block",
    "plain_block",
    "predictions",
    "refusal",
    "learn_sparse",
]

BIAS_CODES = {mode: i for i, mode in enumerate(BIAS_MODES)}  # learned 0, r2 1, none 2

#: The shortest ``average_half_life`` the kernels take: below about 1/768, ``math.pow`` in
#: the learners' coefficients overflows (OverflowError), which the kernels would not raise.
MIN_HALF_LIFE = 0.01


def supported(model: Any) -> bool:
    """Whether the kernels handle this configuration (the C extension aside): ``init="zeros"``
    (``"random"`` draws a weight per new feature from the model's generator), any bias mode,
    a plain number as ``lr``, averaged or not (the forgetting average with
    ``average_half_life >= MIN_HALF_LIFE`` too). Used by the learners' ``dense_capable``."""
    lr = model.lr
    half_life = model.average_half_life
    return (
        not model._init.random
        and (half_life is None or half_life >= MIN_HALF_LIFE)
        and model._bias_mode in BIAS_CODES
        and isinstance(lr, (int, float))
        and not isinstance(lr, bool)
        and float(lr) == lr
    )


def learn_dense(
    model: PerceptronModel, features: Sequence[Any], X: np.ndarray, signs: np.ndarray
) -> np.ndarray:
    """:meth:`Perceptron.learn_dense`'s work, for a model whose ``dense_capable`` is true."""
    c = native.dense
    if c is None:
        raise RuntimeError(f"the C kernel is unavailable: {native.dense_error}")
    features, X, signs = checked_block(features, X, signs, keep_f32=True)
    f32 = not isinstance(X, memoryview) and X.dtype == np.float32
    n = X.shape[0]
    preds = bytearray(n)  # int8 predictions, written by the kernel
    if n == 0:
        return predictions(preds, X)

    wd, ud = model._w, model._u
    w = array("d", [wd.get(k, 0.0) for k in features])
    present = bytes([k in wd for k in features])
    u = array("d", [ud.get(k, 0.0) for k in features])
    half_life = model.average_half_life
    factors = array("d", bytes(8 * n) if half_life is not None else b"")
    (b, ub, n_seen, n_mistakes, max_norm, w_updated, u_updated, finite, refused, avg_ref,
     n_factors) = c.kernel(
        X, signs, w, present, u, float(model.lr), BIAS_CODES[model._bias_mode],
        bool(model.averaged), float(model._b), float(model._ub), int(model._n_seen),
        int(model._n_mistakes), float(model._max_norm), preds, n, X.shape[1],
        0.0 if half_life is None else float(half_life), float(model._beta),
        int(model._avg_ref), factors, f32,
    )  # fmt: skip
    if not finite:  # checked by the kernel, on the way: the model is left as it was
        raise ValueError("X has non-finite values")
    if refused >= 0:  # the kernel stopped at that row: nothing is written back
        raise refusal(int(refused))
    if w_updated:  # every feature of a dense row is in _w after its first mistake
        for k, v in zip(features, w.tolist()):
            wd[k] = v  # existing keys keep their place, new ones follow in features order
    if u_updated:
        for k, v in zip(features, u.tolist()):
            ud[k] = v
    if n_factors:
        rescale_outside(ud, features, u, bool(u_updated), factors[:n_factors].tolist())
    _store_counts(model, b, ub, n_seen, n_mistakes, max_norm, avg_ref if n_factors else None)
    return predictions(preds, X)


def _store_counts(
    model: PerceptronModel, b: float, ub: float, n_seen: int, n_mistakes: int,
    max_norm: float, avg_ref: int | None,
) -> None:  # fmt: skip
    """A kernel's biases and counters into the model (``avg_ref`` None: unchanged)."""
    if avg_ref is not None:
        model._avg_ref = int(avg_ref)
    model._b = float(b)
    model._ub = float(ub)
    model._n_seen = int(n_seen)
    model._n_mistakes = int(n_mistakes)
    model._max_norm = float(max_norm)


def checked_block(
    features: Sequence[Any], X: Any, signs: Any, keep_f32: bool = False
) -> tuple[list[Any], Any, Any]:
    """A binary block as the kernels take it: the feature names as a list (distinct), X as a
    C-contiguous float64 matrix of one column a name (float32 kept as it is with
    ``keep_f32``: the binary perceptron's kernel reads it, each value the double it is
    exactly; the float64 copy cost more than the learning, 1M x 20: 22 ms against 19 ms),
    the signs as int8 -1/0/+1; ValueError otherwise.

    The C scanner's block (X a 2-D float64 ``memoryview``, the signs an int8 buffer) stays as
    it is, checked without NumPy (:func:`plain_block`); anything else becomes NumPy arrays."""
    features = list(features)
    plain = plain_block(features, X, signs)
    if plain is not None:
        return features, X, plain
    f32 = keep_f32 and isinstance(X, np.ndarray) and X.dtype == np.float32
    X = np.ascontiguousarray(X, dtype=np.float32 if f32 else np.float64)
    if X.ndim != 2 or X.shape[1] != len(features):
        raise ValueError(f"X has shape {X.shape}, expected (n, {len(features)})")
    if len(set(features)) != len(features):
        raise ValueError("duplicate feature names")
    n = X.shape[0]
    signs = np.asarray(signs)
    if signs.shape != (n,):
        raise ValueError(f"signs has shape {signs.shape}, expected ({n},)")
    if signs.dtype.kind in "iu":  # integers: a range check (np.isin cost a quarter of a call)
        valid = n == 0 or (int(signs.min()) >= -1 and int(signs.max()) <= 1)
    else:
        valid = bool(np.isin(signs, (-1, 0, 1)).all())
    if not valid:
        raise ValueError("signs must be -1, +1 (or 0 for an unlabelled row)")
    return features, X, signs.astype(np.int8, copy=False)


def predictions(preds: bytearray, X: Any) -> Any:
    """A kernel's int8 predictions as the caller gets them: an int8 ``memoryview`` for the C
    scanner's block (its path needs no NumPy), else an int8 NumPy array."""
    if isinstance(X, memoryview):
        return memoryview(preds).cast("b")
    return np.frombuffer(preds, dtype=np.int8)


_SIGN_BYTES = b"\x00\x01\xff"  # 0, +1, -1 as int8


def plain_block(features: list[Any], X: Any, signs: Any) -> memoryview | None:
    """The int8 signs of a block the kernels read as it is, with no NumPy: ``X`` a C-contiguous
    2-D ``memoryview`` of float64 (format ``"d"``, the C scanner's), one column a feature
    name, and ``signs`` an int8 buffer of one -1/0/+1 a row (an ``array("b")``, a
    ``memoryview`` of format ``"b"``). ``None`` for anything else; ValueError for such a block
    whose shapes, names or signs are wrong."""
    if not (isinstance(X, memoryview) and X.format == "d" and X.ndim == 2 and X.c_contiguous):
        return None
    view = memoryview(signs)
    if view.format != "b" or view.ndim != 1:
        return None
    rows, columns = X.shape or (0, 0)
    if columns != len(features):
        raise ValueError(f"X has shape {X.shape}, expected (n, {len(features)})")
    if len(set(features)) != len(features):
        raise ValueError("duplicate feature names")
    if len(view) != rows:
        raise ValueError(f"signs has shape ({len(view)},), expected ({rows},)")
    if view.cast("B").tobytes().translate(None, _SIGN_BYTES):
        raise ValueError("signs must be -1, +1 (or 0 for an unlabelled row)")
    return view


def rescale_outside(
    ud: dict[Any, float], features: list[Any], u: array, written: bool, factors: list[float]
) -> None:
    """After a kernel renormalised the forgetting average (``factors``, in order): when the
    accumulators ``ud`` were not written back (``written`` false), those of the block's
    features that ``ud`` has take the kernel's values ``u``; those of other features are
    multiplied by each factor in turn, as ``_renormalise`` does to every entry."""
    if not written:
        for k, v in zip(features, u.tolist()):
            if k in ud:
                ud[k] = v
    inside = set(features)
    for k in [k for k in ud if k not in inside]:
        v = ud[k]
        for f in factors:
            v = v * f
        ud[k] = v


def refusal(row: int) -> ValueTooLargeError:
    """The error of a block the kernel refused at ``row`` (its ``row`` attribute)."""
    error = ValueTooLargeError(
        f"row {row}: learning it would make the model non-finite; the block is not learned"
    )
    error.row = row  # type: ignore[attr-defined]
    return error


def learn_sparse(
    model: PerceptronModel, features: Sequence[Any], rows: SparseRows, signs: Any
) -> Any:
    """:func:`learn_dense` of a sparse block (``rows``' slots index ``features``): the model
    left exactly as the ``predict_learn_one`` loop over each row's dict would leave it, new
    keys entering the model's dicts in the order that loop adds them."""
    c = native.dense
    if c is None:
        raise RuntimeError(f"the C kernel is unavailable: {native.dense_error}")
    names = list(features)
    n, m = len(rows), len(names)
    preds = bytearray(n)
    if n == 0:
        return memoryview(preds).cast("b")
    if len(memoryview(signs)) != n:
        raise ValueError(f"signs has shape ({len(memoryview(signs))},), expected ({n},)")
    wd, ud = model._w, model._u
    w = array("d", [wd.get(k, 0.0) for k in names])
    had_w = bytes([k in wd for k in names])
    u = array("d", [ud.get(k, 0.0) for k in names])
    had_u = bytes([k in ud for k in names])
    present, u_present = bytearray(had_w), bytearray(had_u)
    w_new, u_new = array("i", bytes(4 * m)), array("i", bytes(4 * m))
    half_life = model.average_half_life
    factors = array("d", bytes(8 * n) if half_life is not None else b"")
    (b, ub, n_seen, n_mistakes, max_norm, n_w_new, n_u_new, finite, refused, avg_ref,
     n_factors) = c.kernel_sparse(
        rows.indptr, rows.slots, rows.values, signs, w, present, u, u_present, w_new, u_new,
        float(model.lr), BIAS_CODES[model._bias_mode], bool(model.averaged), float(model._b),
        float(model._ub), int(model._n_seen), int(model._n_mistakes), float(model._max_norm),
        preds, n, m, 0.0 if half_life is None else float(half_life), float(model._beta),
        int(model._avg_ref), factors,
    )  # fmt: skip
    if not finite:
        raise ValueError("rows have non-finite values")
    if refused >= 0:
        raise refusal(int(refused))
    _write_back(wd, names, w, had_w, w_new[:n_w_new])
    _write_back(ud, names, u, had_u, u_new[:n_u_new])
    if n_factors:
        rescale_outside(ud, names, u, True, factors[:n_factors].tolist())
    _store_counts(model, b, ub, n_seen, n_mistakes, max_norm, avg_ref if n_factors else None)
    return memoryview(preds).cast("b")


def _write_back(
    d: dict[Any, float], names: list[Any], values: array, had: bytes, new: array
) -> None:
    """The kernel's values into the model dict ``d``: the keys it had keep their place, the
    new ones (``new``: slots in the order they joined) follow in that order."""
    values_list = values.tolist()
    for j, k in enumerate(names):
        if had[j]:
            d[k] = values_list[j]
    for j in new.tolist():
        d[names[j]] = values_list[j]
