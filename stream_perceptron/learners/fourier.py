"""Random Fourier features (Rahimi & Recht 2007): an RBF kernel's feature map, made explicit.

``z(x) = sqrt(2 / D) * cos(W x + b)`` with ``D`` components, ``W`` of entries drawn from
``N(0, 2 * gamma)`` and ``b`` from ``U[0, 2 pi)``: then ``z(x) . z(x')`` approximates the RBF
kernel ``exp(-gamma * ||x - x'||^2)``, so a linear model of ``z(x)`` (a perceptron: one pass,
mistake-driven, ``D`` weights) draws curved boundaries in ``x``.

Nothing random is saved, nor any order of the features: ``W`` and ``b`` follow from
``(seed, D, gamma)`` alone. The column of ``W`` of the input feature named ``k`` is
``default_rng([seed, 1, h]).standard_normal(D) * sqrt(2 * gamma)``, ``h`` the MurmurHash3_x86_32
(seed 0) of ``str(k)``'s UTF-8 bytes (the hash of ``--hash-bits``), and ``b`` is
``default_rng([seed, 0]).uniform(0, 2 pi, D)`` (numpy's PCG64): a feature's column depends on
its name only, not on when it was first seen, so the map needs no state, a model rebuilt from
``(seed, D, gamma)`` maps every example to the same bits, and the order of x's keys does not
matter. (Two names of one 32-bit hash would share a column: their values add up, as hashed
features do.) Columns are drawn when a name is first met and cached (up to
:data:`COLUMN_CACHE` names; past that the cache starts afresh and columns are drawn again, the
same), so memory is bounded whatever the vocabulary.

The projection ``W x`` is added up one input at a time in the order of ``(h, str(k))``, then
its position (``p += v_k * W[k, d]`` from 0.0), and ``cos`` is the C library's, for a single
example and for a block alike (no BLAS, whose summation order depends on the block's shape, nor
numpy's vectorised ``cos``): the record path and the block path, the C kernel ``rff_block``
(``_features.c``) and its readable reference :meth:`RandomFourierFeatures.project_reference`
give the same bits (``tests/learners/test_fourier.py``).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Hashable, Sequence
from typing import Any

from river import base

from stream_perceptron import native
from stream_perceptron.errors import StateError
from stream_perceptron.formats.sparse_rows import SparseRows
from stream_perceptron.lazy_numpy import np
from stream_perceptron.learners._maths import too_large
from stream_perceptron.learners.hashing import murmur3_32_reference
from stream_perceptron.state import number, short

__all__ = ["RandomFourierFeatures", "COLUMN_CACHE"]

#: Input features whose columns of ``W`` are kept (``D`` floats each).
COLUMN_CACHE = 4096
#: Tuples of input names whose ordered columns are kept (a stream's records mostly share one).
ORDER_CACHE = 64

# The C kernel (``_features.rff_block``), or None: the readable reference, ``project_reference``
_kernel = native.features

_hash = native.features.murmur3_32 if native.features is not None else murmur3_32_reference

_TWO_PI = 2.0 * math.pi


def _order(term: tuple[Any, ...]) -> tuple[Any, ...]:
    """The summation order of an input: its name's ``(hash, text)``, then its position."""
    return term[0][0], term[1]


def _check(n_components: Any, gamma: Any, seed: Any) -> None:
    if not (isinstance(n_components, int) and not isinstance(n_components, bool)):
        raise ValueError(f"n_components must be an int, got {n_components!r}")
    if not 1 <= n_components <= 1 << 20:
        raise ValueError(f"n_components must be from 1 to 2^20, got {n_components}")
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float)):
        raise ValueError(f"gamma must be a number, got {gamma!r}")
    if not (0.0 < gamma < math.inf):
        raise ValueError(f"gamma must be positive and finite, got {gamma!r}")
    if not (isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed < 1 << 64):
        raise ValueError(f"seed must be an int from 0 to 2^64 - 1, got {seed!r}")


class RandomFourierFeatures(base.Transformer):
    """Random Fourier features of an RBF kernel, as a River transformer.

    Maps ``x`` to ``D = n_components`` features ``{0: z_0, ..., D-1: z_(D-1)}``,
    ``z = sqrt(2 / D) * cos(W x + b)``, so that ``z(x) . z(x')`` approximates
    ``exp(-gamma * ||x - x'||^2)`` (Rahimi & Recht, *Random Features for Large-Scale Kernel
    Machines*, 2007). Unlike River's ``preprocessing.RBFSampler``, which maps each feature on its
    own, ``W`` mixes the features, so the kernel sees their interactions (Bananas needs them).

    Parameters
    ----------
    n_components
        ``D``, the number of output features (memory: ``D`` floats per input feature).
    gamma
        The kernel's width, ``exp(-gamma * ||x - x'||^2)``: the entries of ``W`` are drawn from
        ``N(0, 2 * gamma)``. Larger is a more local, wigglier boundary. On standardised inputs
        of a few features, 0.5 to 4 (Bananas, 2 features: 2).
    seed
        Seeds ``W`` and ``b`` (numpy's ``default_rng``): the same seed, the same map, on every
        run and platform.

    Notes
    -----
    The column of ``W`` of each input feature is drawn from its name's hash and ``seed`` (see
    the module's notes), so the map has no learned state: :meth:`learn_one` does nothing and
    :meth:`get_state` is ``(n_components, gamma, seed)``; the matrix is never saved. An absent
    feature counts as 0. A projection that is not finite (an input too large) raises
    :class:`~stream_perceptron.errors.ValueTooLargeError`.

    Examples
    --------
    >>> from river import compose, datasets, evaluate, metrics, preprocessing
    >>> from stream_perceptron import Perceptron, RandomFourierFeatures
    >>> model = compose.Pipeline(
    ...     preprocessing.StandardScaler(),
    ...     RandomFourierFeatures(n_components=100, gamma=2.0, seed=0),
    ...     Perceptron(averaged=True),
    ... )
    >>> evaluate.progressive_val_score(datasets.Bananas(), model, metrics.Accuracy())
    Accuracy: 89.11%

    With many components, ``z(x) . z(x')`` is close to the kernel:

    >>> import math
    >>> rff = RandomFourierFeatures(n_components=20_000, gamma=0.5, seed=1)
    >>> x, x2 = {"a": 1.0, "b": -2.0}, {"a": 0.5, "b": -1.0}
    >>> z, z2 = rff.transform_one(x), rff.transform_one(x2)
    >>> abs(sum(z[i] * z2[i] for i in z) - math.exp(-0.5 * 1.25)) < 0.02
    True

    """

    def __init__(self, n_components: int = 100, gamma: float = 1.0, seed: int = 0) -> None:
        _check(n_components, gamma, seed)
        self.n_components = n_components
        self.gamma = gamma
        self.seed = seed
        self._columns: dict[Hashable, tuple[tuple[int, str], np.ndarray]] = {}
        self._orders: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
        self._b = np.random.default_rng([seed, 0]).uniform(0.0, _TWO_PI, n_components)
        self._scale = math.sqrt(2.0 / n_components)
        self._std = math.sqrt(2.0 * gamma)

    # -- the map -------------------------------------------------------------------------------
    def column(self, name: Hashable) -> np.ndarray:
        """The column of ``W`` of the input feature ``name``."""
        return self._column(name)[1]

    def _column(self, name: Hashable) -> tuple[tuple[int, str], np.ndarray]:
        got = self._columns.get(name)
        if got is None:
            text = name if name.__class__ is str else str(name)
            h = int(_hash(text.encode("utf-8", "surrogatepass"), 0))
            rng = np.random.default_rng([self.seed, 1, h])
            got = ((h, text), rng.standard_normal(self.n_components) * self._std)
            if len(self._columns) >= COLUMN_CACHE:
                self._columns.clear()
            self._columns[name] = got
        return got

    def _terms(self, names: Sequence[Hashable]) -> tuple[np.ndarray, np.ndarray]:
        """The summation order of inputs named ``names``: ``(W_ordered, idx)``, ``W_ordered``
        row k the column of ``W`` of the k-th input in that order, ``idx[k]`` its position in
        ``names``. Cached per tuple of names (a stream's records mostly share one)."""
        key = tuple(names)
        got = self._orders.get(key)
        if got is None:
            column = self._column
            terms = sorted(((column(k), c) for c, k in enumerate(key)), key=_order)
            W = np.empty((len(terms), self.n_components))
            for row, ((_, w), _) in enumerate(terms):
                W[row] = w
            idx = np.fromiter((c for _, c in terms), dtype=np.int64, count=len(terms))
            if len(self._orders) >= ORDER_CACHE:
                self._orders.clear()
            got = self._orders[key] = (W, idx)
        return got

    def project_reference(self, x: dict) -> list[float] | None:
        """``z(x)``, readable: the reference of the C kernel ``rff_block`` (``_features.c``),
        which gives the same bits. Per component ``d``: ``p = 0.0``, then ``p += v * W[k, d]``
        over the inputs in the map's order, then ``cos(p + b[d]) * sqrt(2 / D)``. ``None`` when
        a projection is not finite."""
        W, idx = self._terms(list(x))
        values = [float(v) for v in x.values()]
        out = []
        for d in range(self.n_components):
            p = 0.0
            for k in range(len(idx)):
                p += values[idx[k]] * float(W[k, d])
            if not -math.inf < p < math.inf:
                return None
            out.append(math.cos(p + float(self._b[d])) * self._scale)
        return out

    def project(self, x: dict, strict: bool = True) -> list[float]:
        """``z(x)`` as a list of ``D`` floats: the C kernel if built, else the reference.
        Raises :class:`~stream_perceptron.errors.ValueTooLargeError` when a projection is not
        finite; not ``strict`` (a prediction), all its features are then 0.0."""
        try:
            if _kernel is None:
                got = self.project_reference(x)
            else:
                W, idx = self._terms(list(x))
                X = np.fromiter(x.values(), dtype=np.float64, count=len(x))
                out = np.empty(self.n_components)
                bad = _kernel.rff_block(X, out, W, idx, self._b, 1, len(X), len(idx),
                                        self.n_components, self._scale)  # fmt: skip
                got = None if bad >= 0 else out.tolist()
        except OverflowError:  # an int past float's range
            got = None
        if got is None:
            if strict:
                raise too_large("the random Fourier features")
            return [0.0] * self.n_components
        return got

    def transform_block(self, features: Sequence[Hashable], X: np.ndarray) -> np.ndarray:
        """``z`` of every row of the dense block ``X`` (columns ``features``): ``n x D`` in one
        C call, each row the bits :meth:`project` gives for it. Raises
        :class:`~stream_perceptron.errors.ValueTooLargeError` (``row``: the first) when a
        projection is not finite."""
        W, idx = self._terms(list(features))
        X = np.ascontiguousarray(X, dtype=np.float64)
        rows, cols = X.shape
        out = np.empty((rows, self.n_components))
        if _kernel is not None:
            bad = _kernel.rff_block(X, out, W, idx, self._b, rows, cols, len(idx),
                                    self.n_components, self._scale)  # fmt: skip
        else:
            bad = -1
            for i in range(rows):
                got = self.project_reference(dict(zip(features, X[i].tolist())))
                if got is None:
                    bad = i
                    break
                out[i] = got
        if bad >= 0:
            error = too_large("the random Fourier features")
            error.row = bad  # type: ignore[attr-defined]
            raise error
        return out

    def transform_sparse(self, features: Sequence[Hashable], rows: SparseRows) -> np.ndarray:
        """:meth:`transform_block` of sparse rows (``features``: the names their slots index):
        each row's inputs summed in the map's order, the bits :meth:`project` gives for the
        row's dict."""
        assert _kernel is not None
        names = list(features)
        m = len(names)
        columns = [self._column(k) for k in names]
        ranked = sorted(range(m), key=lambda j: columns[j][0])
        rank = array("i", bytes(4 * m))
        for place, j in enumerate(ranked):
            rank[j] = place
        W = np.empty((m, self.n_components))
        for j, (_, w) in enumerate(columns):
            W[j] = w
        n = len(rows)
        out = np.empty((n, self.n_components))
        bad = _kernel.rff_rows(rows.indptr, rows.slots, rows.values, rank, W, self._b, out,
                               self.n_components, self._scale)  # fmt: skip
        if bad >= 0:
            error = too_large("the random Fourier features")
            error.row = bad  # type: ignore[attr-defined]
            raise error
        return out

    # -- River's transformer API ---------------------------------------------------------------
    def learn_one(self, x: dict) -> None:
        """Nothing to learn: the map is fixed by ``(n_components, gamma, seed)``."""

    def transform_one(self, x: dict) -> dict:
        return dict(enumerate(self.project(x, strict=False)))

    # -- state ---------------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        """The map as JSON: its hyperparameters only; not ``W`` or ``b``, which
        :meth:`from_state` draws again."""
        return {"n_components": self.n_components, "gamma": self.gamma, "seed": self.seed}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> RandomFourierFeatures:
        # the values as saved, unconverted: the constructor checks their types and ranges
        # (int() would take 2.7 for 2, float() a string)
        if not isinstance(state, dict):
            raise StateError(f"rff is {short(state)}, not a random Fourier features map")
        try:
            number(state["gamma"], "gamma")  # an int past floats' range too
            return cls(state["n_components"], state["gamma"], state["seed"])
        except KeyError as e:
            raise StateError(f"rff: the field {e} is missing") from None
        except (TypeError, ValueError) as e:
            raise StateError(f"rff: {e}") from None
