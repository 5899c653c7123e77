"""Glue of the binary perceptron's C kernel: a block's cells from the model, the kernel, back.

:func:`learn_dense` predicts-then-learns every row of a dense float64 matrix and leaves the
model exactly as the ``predict_learn_one`` loop over ``dict(zip(features, row))`` would, to the
last bit: the same predictions, mistakes, weights (same keys, same insertion order), bias,
averaging accumulators, counters and ``max_norm``; :func:`learn_sparse` the same over sparse
rows. The model (a :class:`BinaryKernelModel`) gives the cells of the block's features as
arrays and its rule's fields, and takes them back learned. Call them through
:meth:`Perceptron.learn_dense <stream_perceptron.learners.Perceptron.learn_dense>`.

The rule is ``_rules.h``'s ``binary_rule_row``, which the dict API (``_speedups.c``) runs too: the
floating-point operations of ``Perceptron._learn`` / ``Perceptron._score`` (the reference) in
the same order. A dense row is the row whose slots are the block's features in order.

A labelled row whose update would make R, the bias, a weight or an averaging accumulator
non-finite (what ``Perceptron._learn`` refuses with :class:`~stream_perceptron.errors.
ValueTooLargeError`) stops the kernel: :func:`learn_dense` then raises that error, with the
row's index as ``row``, and gives nothing back: the model is as it was before the call (the
caller learns the block row by row, which refuses that row alone).

A sign of ``0`` marks an unlabelled row: it is predicted as ``predict_one`` would (the averaged
score when ``averaged``) and not learned from (``n_seen`` and ``max_norm`` unchanged), so a
batch mixing labelled and unlabelled rows needs one call.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any, Protocol

from stream_perceptron import native
from stream_perceptron.errors import ValueTooLargeError
from stream_perceptron.formats.sparse_rows import SparseRows
from stream_perceptron.lazy_numpy import np
from stream_perceptron.learners._linear import BIAS_MODES

__all__ = [
    "BIAS_CODES",
    "BinaryKernelModel",
    "rescale_outside",
    "write_back",
    "supported",
    "learn_dense",
    "checked_block",
    "plain_block",
    "predictions",
    "refusal",
    "learn_sparse",
    "run_kernel",
    "sparse_block",
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


class BinaryKernelModel(Protocol):
    """What the binary perceptron's kernel needs of a model: its rule (hyperparameters and
    scalars, the C ``BinaryRule``'s fields), the cells of a block's features, and both given
    back learned. The model keeps its fields to itself."""

    def block_rule(self) -> tuple[Any, ...]: ...

    def block_cells(self, names: list[Any]) -> tuple[array, array, bytearray]: ...

    def commit_block(
        self, names: list[Any], cells: tuple[array, array, bytes], joined: tuple[array, array],
        factors: list[float], rule: tuple[Any, ...],
    ) -> None: ...  # fmt: skip


def learn_dense(
    model: BinaryKernelModel, features: Sequence[Any], X: np.ndarray, signs: np.ndarray
) -> np.ndarray:
    """:meth:`Perceptron.learn_dense`'s work, for a model whose ``dense_capable`` is true."""
    features, X, signs = checked_block(features, X, signs, keep_f32=True)
    f32 = not isinstance(X, memoryview) and X.dtype == np.float32
    n = X.shape[0]
    preds = bytearray(n)  # int8 predictions, written by the kernel
    if n:
        forgetting = model.block_rule()[4] > 0  # the rule's half-life
        run_kernel("kernel_binary", model, features, X, None, None, signs, preds, X.shape[1],
                   f32, forgetting)  # fmt: skip
    return predictions(preds, X)


def run_kernel(
    kernel: str, model: BinaryKernelModel, names: list[Any], X: Any, indptr: Any, slots: Any,
    signs: Any, preds: bytearray, d: int, f32: bool = False, forgetting: bool = False,
) -> None:  # fmt: skip
    """The C kernel ``kernel`` (``kernel_binary``, ``kernel_pa_binary``) over a block (dense:
    ``indptr`` None; sparse: ``X`` the CSR values), the model's cells and rule given to it
    and, learned, back to the model; the model unchanged when the kernel stops at a row
    (ValueError, or :func:`refusal`). ``forgetting``: room for the renormalisations'
    factors."""
    c = native.dense
    if c is None:
        raise RuntimeError(f"the C kernel is unavailable: {native.dense_error}")
    m, n = len(names), len(preds)
    w, u, present = model.block_cells(names)
    had = bytes(present)
    joined_w, joined_u = array("q", bytes(8 * m)), array("q", bytes(8 * m))
    factors = array("d", bytes(8 * n) if forgetting else b"")
    rule, n_w, n_u, n_factors, stopped, why = getattr(c, kernel)(
        X, indptr, slots, signs, w, u, present, joined_w, joined_u, preds, factors, n, d, m,
        f32, model.block_rule(),
    )  # fmt: skip
    if stopped >= 0:  # the model is left as it was
        if why == 2:
            raise ValueError("X has non-finite values")
        raise refusal(int(stopped))
    joined = (joined_w[:n_w], joined_u[:n_u])
    model.commit_block(names, (w, u, had), joined, factors[:n_factors].tolist(), rule)


def sparse_block(
    kernel: str, model: BinaryKernelModel, features: Sequence[Any], rows: SparseRows,
    signs: Any, forgetting: bool = False,
) -> Any:  # fmt: skip
    """:func:`run_kernel` over a sparse block (``rows``' slots index ``features``): the int8
    predictions as a ``memoryview``."""
    names = list(features)
    n = len(rows)
    preds = bytearray(n)
    if n == 0:
        return memoryview(preds).cast("b")
    if len(memoryview(signs)) != n:
        raise ValueError(f"signs has shape ({len(memoryview(signs))},), expected ({n},)")
    try:
        run_kernel(kernel, model, names, rows.values, rows.indptr, rows.slots, signs, preds, 0,
                   forgetting=forgetting)  # fmt: skip
    except ValueError as error:
        if str(error) == "X has non-finite values":
            raise ValueError("rows have non-finite values") from None
        raise
    return memoryview(preds).cast("b")


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
    model: BinaryKernelModel, features: Sequence[Any], rows: SparseRows, signs: Any
) -> Any:
    """:func:`learn_dense` of a sparse block (``rows``' slots index ``features``): the model
    left exactly as the ``predict_learn_one`` loop over each row's dict would leave it, new
    keys entering the model's dicts in the order that loop adds them."""
    forgetting = model.block_rule()[4] > 0
    return sparse_block("kernel_binary", model, features, rows, signs, forgetting)


def write_back(
    d: dict[Any, float], names: list[Any], values: Any, had: bytes, bit: int, new: Any
) -> None:
    """The kernel's values (an ``array`` or a NumPy row) into the model dict ``d``: the keys it
    had (``had[j] & bit``) keep their place, the new ones (``new``: slots in the order they
    joined) follow in that order."""
    values_list = values.tolist()
    for j, k in enumerate(names):
        if had[j] & bit:
            d[k] = values_list[j]
    for j in new.tolist():
        d[names[j]] = values_list[j]
