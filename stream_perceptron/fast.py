"""Exact vectorised fast path for the perceptrons on dense rows.

:func:`learn_dense` predicts-then-learns every row of a dense float64 matrix and leaves the
model exactly as the ``predict_learn_one`` loop over ``dict(zip(features, row))`` would, to the
last bit: the same predictions, mistakes, weights (same keys, same insertion order), bias,
averaging accumulators, counters and ``max_norm``. The model's dicts stay authoritative: each
call copies the weights of ``features`` into arrays, runs a kernel over the whole matrix, and
writes the arrays back.

Three kernels do the same floating-point operations in the same order as ``Perceptron._learn``
/ ``Perceptron._score``:

* a C kernel (``stream_perceptron/_dense.c``, compiled with ``-ffp-contract=off``), used when
  the extension was built at install (``STREAM_PERCEPTRON_NO_C=1`` turns it off); numba is then
  not even imported (its import and first call cost half a second of start-up);
* a numba kernel (``@njit(cache=True, nogil=True)``, no fastmath, so no reassociation and no
  FMA contraction), used when numba is installed (``STREAM_PERCEPTRON_NO_NUMBA=1`` turns it
  off);
* a pure-NumPy kernel otherwise. Between two mistakes the weights do not change, so it scores
  a block of rows at once (products elementwise, then ``np.add.accumulate`` along the row,
  which is a strictly sequential left fold: never ``np.dot``/``np.sum``, whose pairwise or
  BLAS order differs), learns from the block's first mistake and starts the next block after
  it.

Exactness notes (``perceptron.py`` is the reference):

* ``dot`` starts at ``+0.0`` and adds ``w*v`` for features present in ``_w`` only; absent
  ones are masked, not added as ``0.0*v``. (Adding ``±0.0`` would in fact be harmless: a left
  fold from ``+0.0`` never holds ``-0.0``, and ``a + ±0.0 == a`` bitwise for every other
  ``a`` — but masking needs no argument and also covers a ``_u`` key without a ``_w`` key.)
* ``np.add.accumulate`` starts from the first product instead of ``+0.0``; the two folds differ
  only when every product is ``-0.0`` (``-0.0`` against ``+0.0``), so ``+ 0.0`` afterwards makes
  them bitwise equal (it maps ``-0.0`` to ``+0.0`` and leaves every other value, NaN included,
  unchanged).
* A weight absent from ``_w`` is ``+0.0`` in the arrays, which is what ``w.get(k, 0.0)`` gives
  the update; likewise ``u.get(k, 0.0)``.

Extension: a sign of ``0`` marks an unlabelled row: it is predicted as ``predict_one`` would
(the averaged score when ``averaged``) and not learned from (``n_seen`` and ``max_norm``
unchanged), so a batch mixing labelled and unlabelled rows needs one call.

The module also holds :func:`encode_labels` (a batch's labels as signs, as the row loop
encodes them); :func:`parse_csv_block` / :func:`parse_csv_numbers`, the CSV number scanner (C,
else numba) behind :meth:`CsvParser.parse_dense_block` (exact: Clinger's fast path and
Eisel-Lemire, float() for the rest); :func:`parse_jsonl_block`, its C counterpart for flat JSON
objects; and :func:`learn_dense_multiclass`, the C kernel's counterpart of :func:`learn_dense`
for the :class:`MulticlassPerceptron`.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from stream_perceptron.errors import LabelError
from stream_perceptron.formats.base import parse_label
from stream_perceptron.learners._base import BIAS_MODES
from stream_perceptron.learners.multiclass import MulticlassPerceptron
from stream_perceptron.learners.perceptron import Perceptron

__all__ = [
    "compiled",
    "default_backend",
    "load_numba",
    "encode_labels",
    "learn_array",
    "learn_dense",
    "learn_dense_multiclass",
    "parse_csv_block",
    "parse_csv_numbers",
    "parse_jsonl_block",
    "supports",
    "supports_multiclass",
]

logger = logging.getLogger(__name__)

_BIAS_CODES = {mode: i for i, mode in enumerate(BIAS_MODES)}  # learned 0, r2 1, none 2
_LEARNED, _R2 = _BIAS_CODES["learned"], _BIAS_CODES["r2"]

# -- the numba kernel -----------------------------------------------------------------------------


def _kernel(X, signs, w, present, u, lr, bias_mode, averaged, b, ub, n_seen, n_mistakes, max_norm,
            preds):  # fmt: skip
    """One row at a time, the operations of ``predict_one`` + ``_learn`` in their order."""
    n, d = X.shape
    all_present = True
    for j in range(d):
        if not present[j]:
            all_present = False
    w_updated = False
    u_updated = False
    for i in range(n):
        y = signs[i]
        # One pass computes the three sums, each a left fold in feature order as in Python:
        # the plain dot (_learn), the averaged one (_score) and the squared norm.
        dot = 0.0
        adot = 0.0
        sq = 0.0
        nonfinite = 0.0  # v - v is 0.0 for a finite v, NaN otherwise
        with_average = averaged and n_seen > 0
        tp = float(n_seen)
        if all_present and not with_average:
            for j in range(d):
                v = X[i, j]
                dot += w[j] * v
                sq += v * v
                nonfinite += v - v
        elif all_present:
            for j in range(d):
                v = X[i, j]
                wj = w[j]
                dot += wj * v
                adot += (wj - u[j] / tp) * v
                sq += v * v
                nonfinite += v - v
        else:
            for j in range(d):
                v = X[i, j]
                if present[j]:
                    wj = w[j]
                    dot += wj * v
                    if with_average:
                        adot += (wj - u[j] / tp) * v
                sq += v * v
                nonfinite += v - v
        if nonfinite != 0.0:  # X breaks the precondition: the caller discards the results
            return b, ub, n_seen, n_mistakes, max_norm, False, False, False
        score = dot + b
        if with_average:
            preds[i] = 1 if adot + (b - ub / tp) > 0 else -1
        else:
            preds[i] = 1 if score > 0 else -1
        if y == 0:
            continue
        n_seen += 1
        t = n_seen
        r = math.sqrt(sq)
        if r > max_norm:
            max_norm = r
        if y * score <= 0:
            n_mistakes += 1
            step = lr * y
            for j in range(d):
                w[j] = w[j] + step * X[i, j]
            all_present = True
            w_updated = True
            if bias_mode == _LEARNED:
                db = step
            elif bias_mode == _R2:
                db = y * max_norm * max_norm
            else:
                db = 0.0
            b += db
            if averaged and t > 1:
                c = (t - 1) * step
                for j in range(d):
                    u[j] = u[j] + c * X[i, j]
                ub += (t - 1) * db
                u_updated = True
    return b, ub, n_seen, n_mistakes, max_norm, w_updated, u_updated, True


_numba_kernel: Any = None
_numba_error: str | None = None
_numba_loaded = False


def load_numba() -> bool:
    """Import numba and compile (or load from its cache) the numba kernel and CSV parser.

    Done at import only when the C extension is not built: numba's import and its first call
    cost about half a second of start-up, which the C kernels do not. True when numba works.
    """
    global _numba_kernel, _numba_error, _numba_loaded
    global _mul64, _eisel_lemire, _is_space, _parse_decimal, _read_digits, _read_significant
    global _scan_csv_numba
    if _numba_loaded:
        return _numba_kernel is not None
    _numba_loaded = True
    if os.environ.get("STREAM_PERCEPTRON_NO_NUMBA"):
        _numba_error = "disabled by STREAM_PERCEPTRON_NO_NUMBA"
        return False
    try:
        import numba
    except ImportError as e:  # the default install: the NumPy kernel
        _numba_error = f"numba is not installed ({e})"
        return False
    # fastmath stays off: no reassociation, no mul+add contraction into FMA. nogil: other
    # threads (a Kafka client's heartbeat) run meanwhile; the kernel owns its arrays.
    jit = numba.njit(cache=True, nogil=True, fastmath=False, error_model="numpy")
    _numba_kernel = jit(_kernel)
    _mul64 = jit(_mul64)
    _eisel_lemire = jit(_eisel_lemire)
    _is_space = jit(_is_space)
    _parse_decimal = jit(_parse_decimal)
    _read_digits = jit(_read_digits)
    _read_significant = jit(_read_significant)
    _scan_csv_numba = jit(_scan_csv)
    return True


def compiled() -> bool:
    """Whether :func:`learn_dense` runs a compiled kernel, C or numba (else the NumPy one)."""
    return _c is not None or _numba_kernel is not None


def default_backend() -> str:
    """The kernel :func:`learn_dense` uses by default: ``"c"``, ``"numba"`` or ``"numpy"``."""
    if _c is not None:
        return "c"
    return "numba" if _numba_kernel is not None else "numpy"


def _run_numba(*args: Any) -> tuple:
    global _numba_kernel, _numba_error
    try:
        return _numba_kernel(*args)
    except Exception as e:  # a compile failure: say so once and use NumPy from now on
        if not _is_compile_error(e):
            raise
        _numba_error = f"numba could not compile the kernel: {e!r}"
        logger.warning("%s; using the NumPy kernel", _numba_error)
        _numba_kernel = None
        with np.errstate(all="ignore"):
            return _run_numpy(*args)


def _is_compile_error(e: Exception) -> bool:
    try:
        from numba.core.errors import NumbaError
    except ImportError:  # pragma: no cover
        return False
    return isinstance(e, NumbaError)


# -- the NumPy kernel -----------------------------------------------------------------------------

_MIN_BLOCK = 16
_MAX_BLOCK = 1 << 15


def _fold(P: np.ndarray) -> np.ndarray:
    """Row sums of ``P`` as the left fold ``((0.0 + p0) + p1) + ...`` (see the module notes)."""
    if P.shape[1] == 0:
        return np.zeros(P.shape[0])
    return np.add.accumulate(P, axis=1)[:, -1] + 0.0


def _run_numpy(X, signs, w, present, u, lr, bias_mode, averaged, b, ub, n_seen, n_mistakes,
               max_norm, preds):  # fmt: skip
    n, d = X.shape
    if not np.isfinite(X).all():
        return b, ub, n_seen, n_mistakes, max_norm, False, False, False, w, u
    labelled = signs != 0
    # max_norm after each row does not depend on the mistakes: a running maximum of the norms.
    sq = np.zeros(n)
    for j in range(d):
        col = X[:, j]
        sq += col * col  # sq = sq + v*v, column after column: the per-row sequential fold
    norms = np.sqrt(sq)
    norms[~labelled] = -np.inf  # predicting an unlabelled row leaves max_norm alone
    running = np.maximum.accumulate(np.concatenate(([max_norm], norms)))[1:]
    cols = np.flatnonzero(present)
    all_present = len(cols) == d
    w_updated = u_updated = False
    y_all = signs.astype(np.float64)
    block = _MIN_BLOCK
    pos = 0
    while pos < n:
        end = min(n, pos + block)
        Xb = X[pos:end]
        yb = y_all[pos:end]
        lb = labelled[pos:end]
        if all_present:
            Xp, wp, up = Xb, w, u
        else:
            Xp, wp, up = Xb[:, cols], w[cols], u[cols]
        score = _fold(Xp * wp) + b
        mistakes = lb & (yb * score <= 0)
        m = int(np.argmax(mistakes)) if mistakes.any() else -1
        stop = end - pos if m < 0 else m + 1  # rows of this block dealt with now
        before = np.cumsum(lb[:stop]) - lb[:stop] + n_seen  # n_seen before each row
        if averaged and before[-1] > 0:
            t = before.astype(np.float64)[:, None]
            safe = np.where(t > 0, t, 1.0)
            ascore = _fold((wp - up / safe) * Xp[:stop]) + (b - ub / safe[:, 0])
            decide = np.where(before > 0, ascore, score[:stop])
        else:
            decide = score[:stop]
        preds[pos : pos + stop] = np.where(decide > 0, 1, -1)
        n_seen += int(np.count_nonzero(lb[:stop]))
        if m < 0:
            pos = end
            block = min(2 * block, _MAX_BLOCK)
            continue
        i = pos + m
        y = int(signs[i])
        x = X[i]
        t1 = n_seen  # the 1-based index of this example
        n_mistakes += 1
        step = lr * y
        w = w + step * x
        all_present = True
        w_updated = True
        if bias_mode == _LEARNED:
            db = step
        elif bias_mode == _R2:
            r = float(running[i])
            db = y * r * r
        else:
            db = 0.0
        b += db
        if averaged and t1 > 1:
            c = (t1 - 1) * step
            u = u + c * x
            ub += (t1 - 1) * db
            u_updated = True
        pos = i + 1
        block = min(max(_MIN_BLOCK, 2 * (m + 1)), _MAX_BLOCK)
    if n:
        max_norm = float(running[-1])
    return b, ub, n_seen, n_mistakes, max_norm, w_updated, u_updated, True, w, u


# -- CSV numbers: an exact decimal -> float64 parser, compiled with numba ------------------------
#
# CsvParser.parse_dense uses it (when numba is installed) instead of float() on every cell. A
# cell is parsed here only when it is a plain decimal -- ASCII whitespace, an optional sign,
# digits with an optional point, an optional exponent, at most 19 significant digits -- and the
# value comes from Clinger's exact fast path or from the Eisel-Lemire algorithm, both correctly
# rounded (Eisel-Lemire gives up instead of guessing, as in Go's strconv/eisel_lemire.go, which
# this follows). Every other cell (underscores, inf, nan, too many digits, a subnormal or
# overflowing result, a halfway case, anything invalid) is left to float(), which decides.

_U0, _U1, _U3 = np.uint64(0), np.uint64(1), np.uint64(3)
_U9, _U10, _U16 = np.uint64(9), np.uint64(10), np.uint64(16)
_U32, _U48, _U53 = np.uint64(32), np.uint64(48), np.uint64(53)
_U56, _U60, _U62, _U63 = np.uint64(56), np.uint64(60), np.uint64(62), np.uint64(63)
_MASK32 = np.uint64(0xFFFFFFFF)
_LOW9 = np.uint64(0x1FF)
_ALL_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)
_TWO53 = np.uint64(1 << 53)
_POW10 = np.array([10.0**k for k in range(23)])  # all exact
_E10_MIN, _E10_MAX = -348, 347


def _powers_of_ten() -> tuple[np.ndarray, np.ndarray]:
    """10**e as 128-bit mantissas rounded down, top bit set (Go's detailedPowersOfTen)."""
    lo = np.empty(_E10_MAX - _E10_MIN + 1, dtype=np.uint64)
    hi = np.empty_like(lo)
    for i, e in enumerate(range(_E10_MIN, _E10_MAX + 1)):
        if e >= 0:
            v = 10**e
            shift = v.bit_length() - 128
            m = v >> shift if shift > 0 else v << -shift
        else:
            d = 10**-e
            m = (1 << (127 + d.bit_length())) // d
        lo[i] = m & 0xFFFFFFFFFFFFFFFF
        hi[i] = m >> 64
    return lo, hi


_POW10_LO, _POW10_HI = _powers_of_ten()


def _mul64(a, b):
    """The 128-bit product of two uint64: (high, low)."""
    a_lo = a & _MASK32
    a_hi = a >> _U32
    b_lo = b & _MASK32
    b_hi = b >> _U32
    p0 = a_lo * b_lo
    p1 = a_lo * b_hi
    p2 = a_hi * b_lo
    p3 = a_hi * b_hi
    mid = (p0 >> _U32) + (p1 & _MASK32) + (p2 & _MASK32)
    hi = p3 + (p1 >> _U32) + (p2 >> _U32) + (mid >> _U32)
    lo = (mid << _U32) | (p0 & _MASK32)
    return hi, lo


def _eisel_lemire(man, exp10):
    """``man * 10**exp10`` correctly rounded, for ``man`` > 0; ok False when undecided."""
    if exp10 < _E10_MIN or exp10 > _E10_MAX:
        return False, 0.0
    clz = 0
    if man >> _U32 == _U0:
        man <<= _U32
        clz += 32
    if man >> _U48 == _U0:
        man <<= _U16
        clz += 16
    if man >> _U56 == _U0:
        man <<= np.uint64(8)
        clz += 8
    if man >> _U60 == _U0:
        man <<= np.uint64(4)
        clz += 4
    if man >> _U62 == _U0:
        man <<= np.uint64(2)
        clz += 2
    if man >> _U63 == _U0:
        man <<= _U1
        clz += 1
    exp2 = ((217706 * exp10) >> 16) + 64 + 1023 - clz
    k = exp10 - _E10_MIN
    x_hi, x_lo = _mul64(man, _POW10_HI[k])
    if (x_hi & _LOW9) == _LOW9 and x_lo + man < man:
        y_hi, y_lo = _mul64(man, _POW10_LO[k])
        merged_hi = x_hi
        merged_lo = x_lo + y_hi
        if merged_lo < x_lo:
            merged_hi += _U1
        if (merged_hi & _LOW9) == _LOW9 and merged_lo == _ALL_ONES and y_lo + man < man:
            return False, 0.0
        x_hi = merged_hi
        x_lo = merged_lo
    msb = x_hi >> _U63
    mantissa = x_hi >> (msb + _U9)
    exp2 -= 1 - np.int64(msb)
    if x_lo == _U0 and (x_hi & _LOW9) == _U0 and (mantissa & _U3) == _U1:
        return False, 0.0  # halfway between two doubles, maybe: let float() decide
    mantissa += mantissa & _U1
    mantissa >>= _U1
    if mantissa >> _U53 > _U0:
        mantissa >>= _U1
        exp2 += 1
    if exp2 <= 0 or exp2 >= 0x7FF:  # subnormal, infinite: float() decides
        return False, 0.0
    # mantissa in [2**52, 2**53): an exact float, and an exact power-of-two scaling
    return True, math.ldexp(float(mantissa), exp2 - 1075)


def _is_space(c):
    return c == 32 or (9 <= c <= 13)  # float(bytes) strips exactly these


def _read_significant(buf, i, end, man, n_significant):
    """The digits at ``buf[i:end]`` appended to ``man``, leading zeros not counted as
    significant: ``(index after them, man, n_significant, digits read)``; an
    ``n_significant`` of 20 means more than 19 (then ``man`` is incomplete)."""
    n_digits = 0
    while i < end and 48 <= buf[i] <= 57:
        d = buf[i] - 48
        if n_significant or d:
            if n_significant >= 19:
                return i, man, 20, n_digits
            man = man * _U10 + np.uint64(d)
            n_significant += 1
        n_digits += 1
        i += 1
    return i, man, n_significant, n_digits


def _parse_decimal(buf, start, end):
    """(ok, value) of ``buf[start:end]``; not ok: not plain, or not decided here."""
    i = start
    while i < end and _is_space(buf[i]):
        i += 1
    while end > i and _is_space(buf[end - 1]):
        end -= 1
    if i == end:
        return False, 0.0
    neg = False
    c = buf[i]
    if c == 45:  # -
        neg = True
        i += 1
    elif c == 43:  # +
        i += 1
    exp10 = 0
    i, man, n_significant, n_digits = _read_significant(buf, i, end, _U0, 0)
    if i < end and buf[i] == 46:  # .
        i, man, n_significant, n_fraction = _read_significant(buf, i + 1, end, man, n_significant)
        exp10 -= n_fraction
        n_digits += n_fraction
    if n_significant > 19:
        return False, 0.0
    if n_digits == 0:
        return False, 0.0
    if i < end and (buf[i] == 101 or buf[i] == 69):  # e E
        i += 1
        exp_neg = False
        if i < end and (buf[i] == 45 or buf[i] == 43):
            exp_neg = buf[i] == 45
            i += 1
        if i == end or not (48 <= buf[i] <= 57):
            return False, 0.0
        e = 0
        while i < end and 48 <= buf[i] <= 57:
            if e < 100000:
                e = e * 10 + (buf[i] - 48)
            i += 1
        exp10 += -e if exp_neg else e
    if i != end:
        return False, 0.0
    if man == _U0:
        value = 0.0
    elif man <= _TWO53 and -22 <= exp10 <= 22:  # Clinger: one rounding of exact operands
        value = float(man)
        if exp10 >= 0:
            value = value * _POW10[exp10]
        else:
            value = value / _POW10[-exp10]
    else:
        ok, value = _eisel_lemire(man, exp10)
        if not ok:
            return False, 0.0
    return True, -value if neg else value


def _read_digits(buf, j, man):
    """The digits at ``buf[j:]`` appended to ``man`` (wrapping past 19 digits: the caller
    counts them); ``(index after them, man)``. ``buf`` ends with a non-digit."""
    d = np.int64(buf[j]) - 48
    while 0 <= d <= 9:
        man = man * _U10 + np.uint64(d)
        j += 1
        d = np.int64(buf[j]) - 48
    return j, man


def _scan_csv(buf, n, ncol, label_col, X, labels, slow):
    """Parse ``n`` lines of ``ncol`` cells, each ending with a newline, into X (the label apart).

    ``buf`` must end with a newline: every inner loop stops at it without a bounds check.
    Returns ``(status, n_labels, n_slow)``. Status 0: done; 1: a quote; 2: more cells for
    float() than ``slow`` holds; 3: not ``n`` lines of ``ncol`` cells. The label cells are
    copied into ``labels[:n_labels]``, joined by newlines; ``slow[k]`` is the
    (start, end, row, column) of a cell for float() to decide.

    One pass: a cell of the plain form ``[-+]digits[.digits][(e|E)[-+]digits]`` with at most 19
    digits (leading zeros included, so the mantissa fits in 64 bits) is converted as it is
    read; any other cell goes to :func:`_parse_decimal`, which handles the rest of what
    ``float()`` accepts or leaves it to ``float()``.
    """
    size = buf.shape[0]
    row = 0
    col = 0
    n_slow = 0
    n_labels = 0
    i = 0
    while i < size:
        start = i
        if col == label_col:
            if row:
                labels[n_labels] = 10
                n_labels += 1
            c = buf[i]
            while c != 44 and c != 10:
                if c == 34:
                    return 1, n_labels, n_slow
                labels[n_labels] = c
                n_labels += 1
                i += 1
                c = buf[i]
        else:
            j = i
            c = buf[j]
            neg = c == 45
            if neg or c == 43:
                j += 1
            d0 = j
            j, man = _read_digits(buf, j, _U0)
            n_digits = j - d0
            exp10 = 0
            if buf[j] == 46:
                j += 1
                f0 = j
                j, man = _read_digits(buf, j, man)
                exp10 = f0 - j
                n_digits += j - f0
            plain = 0 < n_digits <= 19
            c = buf[j]
            if plain and (c == 101 or c == 69):
                j += 1
                eneg = buf[j] == 45
                if eneg or buf[j] == 43:
                    j += 1
                e = 0
                e0 = j
                d = np.int64(buf[j]) - 48
                while 0 <= d <= 9:
                    if e < 100000:
                        e = e * 10 + d
                    j += 1
                    d = np.int64(buf[j]) - 48
                if j == e0:
                    plain = False
                exp10 += -e if eneg else e
                c = buf[j]
            ok = False
            value = 0.0
            if plain and (c == 44 or c == 10):
                if man == _U0:
                    ok = True
                elif man <= _TWO53 and -22 <= exp10 <= 22:
                    value = float(man)
                    if exp10 >= 0:
                        value = value * _POW10[exp10]
                    else:
                        value = value / _POW10[-exp10]
                    ok = True
                else:
                    ok, value = _eisel_lemire(man, exp10)
                if neg:
                    value = -value
                i = j
            else:
                while c != 44 and c != 10:
                    if c == 34:
                        return 1, n_labels, n_slow
                    j += 1
                    c = buf[j]
                i = j
                ok, value = _parse_decimal(buf, start, i)
            if col >= ncol or row >= n:
                return 3, n_labels, n_slow
            k = col if col < label_col else col - 1
            if ok:
                X[row, k] = value
            else:
                if n_slow == slow.shape[0]:
                    return 2, n_labels, n_slow
                slow[n_slow, 0] = start
                slow[n_slow, 1] = i
                slow[n_slow, 2] = row
                slow[n_slow, 3] = k
                n_slow += 1
        if col >= ncol or row >= n:
            return 3, n_labels, n_slow
        if buf[i] == 10:
            if col != ncol - 1:
                return 3, n_labels, n_slow
            row += 1
            col = 0
        else:
            col += 1
        i += 1
    if row != n:
        return 3, n_labels, n_slow
    return 0, n_labels, n_slow


_scan_csv_numba: Any = None

# -- the compiled backends: the C extension (stream_perceptron/_dense.c), else numba ----------

_c: Any = None
_c_error: str | None = None
if os.environ.get("STREAM_PERCEPTRON_NO_C"):
    _c_error = "disabled by STREAM_PERCEPTRON_NO_C"
else:
    try:
        from stream_perceptron import _dense as _c
    except ImportError as e:  # built without a C compiler: numba, if installed
        _c_error = f"the C extension is not built ({e})"
    else:
        _c.set_tables(_POW10_LO, _POW10_HI)
if _c is None:
    load_numba()

# The CSV scanner parse_csv_block runs (None: float() on every cell).
_scan_csv_compiled: Any = _c.scan_csv if _c is not None else _scan_csv_numba

_SLOW_CELLS = 4096


def _disable_csv_parser() -> None:
    global _scan_csv_compiled
    _scan_csv_compiled = None


def parse_csv_numbers(
    values: list[bytes], ncol: int, label_col: int
) -> tuple[np.ndarray, list[bytes]] | None:
    """The work of :meth:`CsvParser.parse_dense`, with the numba parser.

    ``values``: CSV lines of ``ncol`` cells, the label in column ``label_col``. Returns
    ``(X, label cells)`` with ``float()``'s value for every feature cell; ``None`` when a line
    is not plain (a quote, a wrong column count, a cell that float() refuses or reads as inf
    or nan, a label cell that is not UTF-8); ``NotImplemented`` when this parser cannot help
    (no numba, no line, a line holding a newline, too many cells that need float()): parse
    another way.
    """
    n = len(values)
    if _scan_csv_compiled is None or not n:
        return NotImplemented
    block = b"\n".join(values) + b"\n"
    if block.count(b"\n") != n:  # a line holds a newline: let another way say
        return NotImplemented
    return parse_csv_block(block, n, ncol, label_col)


def parse_csv_block(
    block: bytes, n: int, ncol: int, label_col: int
) -> tuple[np.ndarray, list[bytes]] | None:
    """:func:`parse_csv_numbers` of ``n`` lines given as one block, each line ending with a
    newline (a line source's block, or lines joined): no list of lines is ever made."""
    if _scan_csv_compiled is None or not n:
        return NotImplemented
    buf = np.frombuffer(block, dtype=np.uint8)
    X = np.empty((n, ncol - 1), dtype=np.float64)
    label_buf = np.empty(len(block), dtype=np.uint8)
    slow = np.empty((min(_SLOW_CELLS, n * ncol), 4), dtype=np.int64)
    try:
        status, n_labels, n_slow = _scan_csv_compiled(buf, n, ncol, label_col, X, label_buf, slow)
    except Exception as e:  # a compile failure: say so once and let float() parse from now on
        if not _is_compile_error(e):
            raise
        logger.warning("numba could not compile the CSV parser (%r): using float()", e)
        _disable_csv_parser()
        return NotImplemented
    if status == 1 or status == 3:  # a quote; a wrong column count
        return None
    if status == 2:
        return NotImplemented
    for start, end, row, col in slow[:n_slow].tolist():
        try:
            X[row, col] = float(block[start:end])
        except ValueError:
            return None
    if n_slow and not np.isfinite(X).all():  # the plain form is always finite
        return None
    label_bytes = label_buf[:n_labels].tobytes()
    try:
        label_bytes.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return X, label_bytes.split(b"\n")


def parse_jsonl_block(
    block: bytes, n: int, keys: list[bytes], label_index: int
) -> tuple[np.ndarray, list[bytes]] | None:
    """``n`` flat JSON objects, one a line (each line ending with a newline), with exactly the
    keys ``keys`` (UTF-8, no escapes) in that order, the label at ``label_index`` and numbers or
    booleans everywhere else: ``(X, raw label values)``, ``X`` holding what
    :class:`~stream_perceptron.formats.JsonLinesParser` makes of each value (``float(int)``
    for an integer, ``float`` for a number with a fraction or exponent, 1.0/0.0 for
    true/false). ``None`` when a line is of another form, or without the C extension."""
    if _c is None or not n:
        return None
    buf = np.frombuffer(block, dtype=np.uint8)
    X = np.empty((n, len(keys) - 1), dtype=np.float64)
    label_buf = np.empty(len(block), dtype=np.uint8)
    slow = np.empty((min(_SLOW_CELLS, n * len(keys)), 4), dtype=np.int64)
    status, n_labels, n_slow = _c.scan_jsonl(buf, n, keys, label_index, X, label_buf, slow)
    if status != 0:
        return None
    for start, end, row, col in slow[:n_slow].tolist():
        text = block[start:end]
        try:  # a JSON integer is a Python int first
            X[row, col] = float(text) if b"." in text or b"e" in text or b"E" in text else float(
                int(text)
            )
        except (ValueError, OverflowError):
            return None
    if n_slow and not np.isfinite(X).all():
        return None
    return X, label_buf[:n_labels].tobytes().split(b"\n")


# -- the public API -------------------------------------------------------------------------------


def supports(model: Any) -> bool:
    """True for a :class:`Perceptron` with ``init="zeros"`` (any bias mode, averaged or not).

    ``init="random"`` draws a weight per new feature from the model's generator: leave those to
    the dict path. A subclass overriding the learning code is not supported either.
    """
    if not isinstance(model, Perceptron):
        return False
    cls = type(model)
    for name in ("_learn", "_score", "predict_one", "predict_learn_one"):
        if getattr(cls, name) is not getattr(Perceptron, name):
            return False
    lr = model.lr
    return (
        not model._init.random
        and model._bias_mode in _BIAS_CODES
        and isinstance(lr, (int, float))
        and not isinstance(lr, bool)
        and float(lr) == lr
    )


def learn_dense(
    model: Perceptron,
    features: Sequence[Any],
    X: np.ndarray,
    signs: np.ndarray,
    *,
    backend: str | None = None,
) -> np.ndarray:
    """Predict-then-learn each row of ``X`` exactly as the ``predict_learn_one`` loop would.

    Parameters
    ----------
    model
        A model :func:`supports` accepts; its private state is updated in place.
    features
        The feature names of ``X``'s columns (distinct).
    X
        float64 values, shape ``(n, len(features))``, all finite.
    signs
        The labels encoded by ``model._labels`` (-1/+1); ``0`` marks an unlabelled row, only
        predicted (as ``predict_one`` does).
    backend
        ``"c"``, ``"numba"``, ``"numpy"`` or ``None`` (:func:`default_backend`).

    Returns
    -------
    The predicted signs (int8, -1/+1), each made before learning its row: what ``predict_one``
    returns then (the averaged score decides when ``averaged``). Decode row ``i``'s with the
    ``classes[i]`` of :func:`encode_labels` (``model._labels.decode`` once the encoding is
    settled).

    Examples
    --------
    >>> model = Perceptron()
    >>> X = np.array([[1.0, 0.0], [-1.0, 2.0], [2.0, 1.0]])
    >>> learn_dense(model, ["a", "b"], X, np.array([1, -1, 1])).tolist()
    [-1, -1, 1]
    >>> model.weights, model.bias, model.n_mistakes
    ({'a': 2.0, 'b': -2.0}, 0.0, 2)

    """
    if not supports(model):
        raise ValueError(f"learn_dense does not support {model!r}")
    features = list(features)
    X = np.ascontiguousarray(X, dtype=np.float64)
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
    signs = signs.astype(np.int8, copy=False)
    if backend is None:
        backend = default_backend()
    if backend not in ("c", "numba", "numpy"):
        raise ValueError(f"backend must be 'c', 'numba' or 'numpy', got {backend!r}")
    if backend == "c" and _c is None:
        raise RuntimeError(f"the C kernel is unavailable: {_c_error}")
    if backend == "numba" and not load_numba():
        raise RuntimeError(f"the numba kernel is unavailable: {_numba_error}")
    preds = np.empty(n, dtype=np.int8)
    if n == 0:
        return preds

    wd, ud = model._w, model._u
    w = np.array([wd.get(k, 0.0) for k in features], dtype=np.float64)
    present = np.array([k in wd for k in features], dtype=np.bool_)
    u = np.array([ud.get(k, 0.0) for k in features], dtype=np.float64)
    args = (
        X,
        signs,
        w,
        present,
        u,
        float(model.lr),
        _BIAS_CODES[model._bias_mode],
        bool(model.averaged),
        float(model._b),
        float(model._ub),
        int(model._n_seen),
        int(model._n_mistakes),
        float(model._max_norm),
        preds,
    )
    if backend == "c":
        out = _c.kernel(*args, n, X.shape[1])
    elif backend == "numba":
        out = _run_numba(*args)
    else:
        with np.errstate(all="ignore"):  # overflows to inf and NaN, exactly as in Python
            out = _run_numpy(*args)
    b, ub, n_seen, n_mistakes, max_norm, w_updated, u_updated, finite = out[:8]
    if not finite:  # checked by the kernels, on the way: the model is left as it was
        raise ValueError("X has non-finite values")
    if len(out) > 8:
        w, u = out[8], out[9]
    if w_updated:  # every feature of a dense row is in _w after its first mistake
        for k, v in zip(features, w.tolist()):
            wd[k] = v  # existing keys keep their place, new ones follow in features order
    if u_updated:
        for k, v in zip(features, u.tolist()):
            ud[k] = v
    model._b = float(b)
    model._ub = float(ub)
    model._n_seen = int(n_seen)
    model._n_mistakes = int(n_mistakes)
    model._max_norm = float(max_norm)
    return preds


def supports_multiclass(model: Any) -> bool:
    """True for a :class:`MulticlassPerceptron` that :func:`learn_dense_multiclass` can run:
    not averaged, ``init="zeros"``, the C extension built."""
    if _c is None or not isinstance(model, MulticlassPerceptron):
        return False
    cls = type(model)
    for name in ("_learn", "_step", "_scores", "predict_one", "predict_learn_one"):
        if getattr(cls, name) is not getattr(MulticlassPerceptron, name):
            return False
    lr = model.lr
    return (
        not model.averaged
        and not model._init.random
        and model._bias_mode in _BIAS_CODES
        and isinstance(lr, (int, float))
        and not isinstance(lr, bool)
        and float(lr) == lr
    )


def learn_dense_multiclass(
    model: MulticlassPerceptron, features: Sequence[Any], X: np.ndarray, labels: Sequence[Any]
) -> list[Any]:
    """Predict-then-learn each row of ``X`` exactly as the ``predict_learn_one`` loop over
    ``dict(zip(features, row))`` would (``predict_one`` for a row whose label is ``None``);
    return the predictions. ``X`` float64, finite; ``model`` one :func:`supports_multiclass`
    accepts.

    Examples
    --------
    >>> model = MulticlassPerceptron()
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 0.5]])
    >>> learn_dense_multiclass(model, ["a", "b"], X, ["red", "blue", "red"])
    [None, 'red', 'red']
    >>> model.weights, model.n_mistakes
    ({'red': {'a': 1.0, 'b': -1.0}, 'blue': {'a': 0.0, 'b': 1.0}}, 2)

    """
    if not supports_multiclass(model):
        raise ValueError(f"learn_dense_multiclass does not support {model!r}")
    features = list(features)
    X = np.ascontiguousarray(X, dtype=np.float64)
    n, d = X.shape
    if d != len(features) or len(labels) != n:
        raise ValueError(f"X has shape {X.shape}: {len(features)} features, {len(labels)} labels?")
    classes = list(model._w)
    index = {c: i for i, c in enumerate(classes)}
    code_of: dict[Any, int] = {}
    for y in dict.fromkeys(labels):  # distinct labels, in the order they first come
        if y is None:
            code_of[y] = -1
        elif y in index:
            code_of[y] = index[y]
        else:  # a new class: added when its first row is learned, so in this order
            index[y] = code_of[y] = len(classes)
            classes.append(y)
    codes = np.fromiter(map(code_of.__getitem__, labels), dtype=np.int64, count=n)
    W = np.zeros((len(classes), d))
    bias = np.zeros(len(classes))
    for i, c in enumerate(model._w):
        wc = model._w[c]
        W[i] = [wc.get(k, 0.0) for k in features]
        bias[i] = model._b[c]
    updated = np.zeros(len(classes), dtype=np.uint8)
    preds = np.empty(n, dtype=np.int64)
    known = len(model._w)
    n_active, max_norm, n_seen, n_mistakes = _c.kernel_multiclass(
        X, codes, W, bias, updated, known, float(model.lr), _BIAS_CODES[model._bias_mode],
        float(model._max_norm), int(model._n_seen), int(model._n_mistakes), preds, n, d,
        len(classes),
    )  # fmt: skip
    for c in classes[known:n_active]:
        model._add_class(c)
    for i in np.flatnonzero(updated).tolist():
        wc = model._w[classes[i]]
        for k, v in zip(features, W[i].tolist()):
            wc[k] = v  # existing keys keep their place, new ones follow in features order
        model._b[classes[i]] = float(bias[i])
    model._max_norm = float(max_norm)
    model._n_seen = int(n_seen)
    model._n_mistakes = int(n_mistakes)
    model._memo = None
    named = [None, *classes]
    return [named[p + 1] for p in preds.tolist()]


def learn_array(X: np.ndarray, y: np.ndarray, **params: Any) -> Perceptron:
    """A new :class:`Perceptron` (``params`` its hyperparameters) learned from the rows of ``X``
    (features named by column index) and labels ``y`` in {-1, +1}, one pass, exactly as the
    ``learn_one`` loop would.

    Examples
    --------
    >>> model = learn_array(np.array([[1.0, 0.0], [-1.0, 2.0]]), np.array([1, -1]))
    >>> model.weights, model.n_mistakes
    ({0: 2.0, 1: -2.0}, 2)

    """
    model = Perceptron(**params)
    model._labels.encode(-1)  # the caller's encoding: -1/+1
    X = np.asarray(X, dtype=np.float64)
    learn_dense(model, list(range(X.shape[1])), X, np.asarray(y, dtype=np.int8))
    return model


def encode_labels(
    model: Perceptron, labels: Sequence[Any]
) -> tuple[np.ndarray, list[tuple[Any, Any]], dict[int, LabelError]]:
    """Encode a batch's labels as :func:`learn_dense` wants them, as the row loop would.

    ``labels`` are parsed labels (``None``: unlabelled) or raw label cells (``bytes``, parsed
    with :func:`parse_label`, ``b""`` unlabelled). Encoding does not depend on the weights, so
    encoding the whole batch first leaves ``model._labels`` as the interleaved loop does.

    Returns ``(signs, classes, errors)``: ``signs`` int8 (``0`` for unlabelled rows and for
    rejected ones), ``classes[i]`` the ``(negative, positive)`` labels that decode row ``i``'s
    prediction (the encoding can settle during a batch), and ``errors`` row -> the
    :class:`LabelError` of a label outside the encoding: drop those rows from ``X`` and
    ``signs`` before :func:`learn_dense` (the loop neither predicts nor learns them).
    """
    codec = model._labels
    signs = np.zeros(len(labels), dtype=np.int8)
    classes: list[tuple[Any, Any]] = []
    errors: dict[int, LabelError] = {}
    parsed: dict[bytes, Any] = {}
    encoding = codec.encoding
    current = (codec.negative, codec.positive)
    for i, y in enumerate(labels):
        if isinstance(y, bytes):
            cell = y
            if cell in parsed:
                y = parsed[cell]
            else:
                y = parsed[cell] = parse_label(cell.decode("utf-8"))
        if y is not None:
            try:
                signs[i] = codec.encode(y)
            except LabelError as e:
                errors[i] = e
            if codec.encoding != encoding:
                encoding = codec.encoding
                current = (codec.negative, codec.positive)
        classes.append(current)
    return signs, classes, errors
