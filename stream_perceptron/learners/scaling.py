"""Online standardisation: a running mean and variance per feature (Welford), River's update.

The readable reference of the C block kernel ``scale_block`` (``_features.c``): the same
floating-point operations in the same order, so both give the same bits.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from typing import Any

from stream_perceptron import native
from stream_perceptron.errors import StateError
from stream_perceptron.formats.sparse_rows import SparseRows
from stream_perceptron.lazy_numpy import np
from stream_perceptron.learners._maths import too_large
from stream_perceptron.learners._state import to_json_key
from stream_perceptron.state import count, json_key, number, short

__all__ = ["Standardizer"]

# The dict transform in C (``_features.scale_dict``), or None: the Python loop, the reference
# (``STREAM_PERCEPTRON_PURE_PYTHON=1`` turns it off, as the learners' dict helpers).
_speedup = native.features if native.speedups is not None else None

_INF = math.inf

#: The largest ``|v|`` the statistics count (``SCALE_LIMIT`` in ``_features.c``). With every
#: counted value within it, the mean stays within it, the variance under its square and
#: ``(v - old) * (v - mean)`` under ``4 * SCALE_LIMIT**2 = 2**1022``: no later update can
#: overflow them. A larger value would leave statistics that every later value of the feature
#: overflows (one 1e200 disabled a feature for good), so its example is refused instead.
SCALE_LIMIT = 2.0**510


def value_of(v: float, n: int, mean: float, var: float) -> float:
    """``v`` standardised with the statistics ``n, mean, var`` that already count it.

    ``(v - mean) / sqrt(var)`` when the variance is positive. A feature seen once has nothing
    to standardise against: 0.0 (as River). A feature seen at least twice, always with the same
    value (an indicator feature ``name=value`` is 1.0 whenever present), is passed through
    unchanged: dividing by a zero deviation is undefined, and River's 0.0 would erase every
    indicator feature from the model."""
    if var > 0.0:
        return (v - mean) / math.sqrt(var)
    if n >= 2:
        return v
    return 0.0


class Standardizer:
    """Running mean and (population) variance per feature, and the standardised values.

    A feature's statistics count only the examples where it is present: an absent feature is
    missing, not 0, so it is neither counted nor scaled (it stays absent, i.e. 0 for the
    model). This is River's ``preprocessing.StandardScaler``: per feature, ``n += 1``,
    ``mean += (v - old) / n``, ``var += ((v - old) * (v - mean) - var) / n``.

    An example is standardised with the statistics that already count it (River's
    ``learn_one`` then ``transform_one``, what ``StandardScaler() | model`` learns from); its
    prediction uses the same values, so predict-then-learn scales each example once.

    Examples
    --------
    >>> scaler = Standardizer()
    >>> for x in [{"a": 1.0}, {"a": 3.0}]:
    ...     values, pending = scaler.transform(x)
    ...     scaler.commit(pending)
    >>> values
    {'a': 1.0}
    >>> scaler.stats("a")
    (2, 2.0, 1.0)

    """

    __slots__ = ("_n", "_mean", "_var")

    def __init__(self) -> None:
        self._n: dict[Any, int] = {}
        self._mean: dict[Any, float] = {}
        self._var: dict[Any, float] = {}

    def __len__(self) -> int:
        return len(self._n)

    def stats(self, k: Any) -> tuple[int, float, float]:
        """``(n, mean, variance)`` of the feature ``k`` (zeros when never seen)."""
        return self._n.get(k, 0), self._mean.get(k, 0.0), self._var.get(k, 0.0)

    def transform(
        self, x: dict, strict: bool = True
    ) -> tuple[dict, list[tuple[Any, int, float, float]]]:
        """``x`` standardised, and the statistics counting it (for :meth:`commit`, once the
        example is learned). Raises :class:`ValueTooLargeError` when a statistic or a value
        would not be finite, or a value is past :data:`SCALE_LIMIT`, unless not ``strict`` (a
        prediction: the values as they come)."""
        n_of, mean_of, var_of = self._n, self._mean, self._var
        if _speedup is not None:  # the same in C, or None: this loop
            got = _speedup.scale_dict(x, n_of, mean_of, var_of, strict)
            if got is not None:
                if got is False:
                    raise too_large("the scaler's statistics")
                return got
        out = {}
        pending = []
        try:
            for k, v in x.items():
                n = n_of.get(k, 0) + 1
                old = mean_of.get(k, 0.0)
                var = var_of.get(k, 0.0)
                mean = old + (v - old) / n
                var = var + ((v - old) * (v - mean) - var) / n
                r = value_of(v, n, mean, var)
                if strict and not (
                    -SCALE_LIMIT <= v <= SCALE_LIMIT
                    and -_INF < mean < _INF
                    and -_INF < var < _INF
                    and -_INF < r < _INF
                ):
                    raise too_large("the scaler's statistics")
                out[k] = r
                pending.append((k, n, mean, var))
        except OverflowError:  # an int past float's range (predict_one raises it too)
            if not strict:
                raise
            raise too_large("the scaler's statistics") from None
        return out, pending

    def commit(self, pending: list[tuple[Any, int, float, float]]) -> None:
        """Store the statistics :meth:`transform` computed."""
        n_of, mean_of, var_of = self._n, self._mean, self._var
        if _speedup is not None:
            _speedup.commit_dict(pending, n_of, mean_of, var_of)
            return
        for k, n, mean, var in pending:
            n_of[k] = n
            mean_of[k] = mean
            var_of[k] = var

    def transform_block(
        self, features: Sequence[Any], X: np.ndarray, learn: np.ndarray
    ) -> tuple[np.ndarray, Any]:
        """The rows of ``X`` standardised in order, as :meth:`transform` would one by one, in
        one C call (``native.features``); ``learn[i]``: row i counts in the statistics (an
        unlabelled row is scaled, not counted). Returns ``(values, pending)`` for
        :meth:`commit_block`; raises :class:`ValueTooLargeError` (``row``: the first row)
        when a value would not be finite."""
        kernel = native.features
        assert kernel is not None
        cols = len(features)
        n = np.fromiter((self._n.get(k, 0) for k in features), dtype=np.float64, count=cols)
        mean = np.fromiter((self._mean.get(k, 0.0) for k in features), np.float64, cols)
        var = np.fromiter((self._var.get(k, 0.0) for k in features), np.float64, cols)
        X = np.ascontiguousarray(X, dtype=np.float64)
        out = np.empty_like(X)
        flags = np.ascontiguousarray(learn, dtype=np.uint8)
        bad = kernel.scale_block(X, out, flags, n, mean, var, X.shape[0], cols)
        if bad >= 0:
            error = too_large("the scaler's statistics")
            error.row = bad  # type: ignore[attr-defined]
            raise error
        return out, (features, n, mean, var)

    def transform_sparse(
        self, features: Sequence[Any], rows: SparseRows, learn: bytes
    ) -> tuple[SparseRows, Any]:
        """:meth:`transform_block` of sparse rows (``features``: the names their slots index):
        each value standardised with its feature's statistics, row by row, in one C call;
        ``(rows', pending)`` for :meth:`commit_sparse`."""
        kernel = native.features
        assert kernel is not None
        m = len(features)
        had = [k in self._n for k in features]
        n = array("d", [self._n.get(k, 0) for k in features])
        mean = array("d", [self._mean.get(k, 0.0) for k in features])
        var = array("d", [self._var.get(k, 0.0) for k in features])
        out = array("d", bytes(8 * len(rows.values)))
        order = array("i", bytes(4 * m))
        bad, n_new = kernel.scale_rows(
            rows.indptr, rows.slots, rows.values, out, learn, n, mean, var, order
        )
        if bad >= 0:
            error = too_large("the scaler's statistics")
            error.row = bad  # type: ignore[attr-defined]
            raise error
        pending = (features, had, n, mean, var, order[:n_new])
        return SparseRows(rows.indptr, rows.slots, out), pending

    def commit_sparse(self, pending: Any) -> None:
        """Store the statistics :meth:`transform_sparse` computed: the features the scaler
        had in place, the new ones in the order the rows brought them."""
        features, had, n, mean, var, new = pending
        n_of, mean_of, var_of = self._n, self._mean, self._var
        ns, means, vars_ = n.tolist(), mean.tolist(), var.tolist()
        for j in [j for j, present in enumerate(had) if present] + new.tolist():
            k = features[j]
            n_of[k] = int(ns[j])
            mean_of[k] = means[j]
            var_of[k] = vars_[j]

    def commit_block(self, pending: Any) -> None:
        """Store the statistics :meth:`transform_block` computed."""
        features, n, mean, var = pending
        n_of, mean_of, var_of = self._n, self._mean, self._var
        for k, nk, mk, vk in zip(features, n.tolist(), mean.tolist(), var.tolist()):
            if nk:
                n_of[k] = int(nk)
                mean_of[k] = mk
                var_of[k] = vk

    # -- state ---------------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        """The statistics as JSON: ``[feature, n, mean, variance]`` per feature."""
        mean, var = self._mean, self._var
        return {"stats": [[to_json_key(k), n, mean[k], var[k]] for k, n in self._n.items()]}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Standardizer:
        """Rebuild from :meth:`get_state`: :class:`StateError` naming the field for statistics
        no run of it holds (a feature counted 0 times or twice, a mean past
        :data:`SCALE_LIMIT`, a variance negative or past its square, a number not finite)."""
        stats = state.get("stats") if isinstance(state, dict) else None
        if not isinstance(stats, list):
            raise StateError(f"scaler.stats is {short(stats)}, not a list of statistics")
        scaler = cls()
        for row in stats:
            if not isinstance(row, list) or len(row) != 4:
                raise StateError(f"scaler.stats holds {short(row)}, not [feature, n, mean, var]")
            k = json_key(row[0], "scaler.stats")
            if k in scaler._n:
                raise StateError(f"scaler.stats has the feature {short(k)} twice")
            field = f"scaler.stats[{k!r}]"
            scaler._n[k] = count(row[1], f"{field}.n", low=1)
            # the bounds every counted value keeps them in (see SCALE_LIMIT)
            scaler._mean[k] = number(row[2], f"{field}.mean", -SCALE_LIMIT, SCALE_LIMIT)
            scaler._var[k] = number(row[3], f"{field}.variance", 0.0, SCALE_LIMIT * SCALE_LIMIT)
        return scaler
