"""The binary perceptron's model: its weights and accumulators (dicts, or a native store of one
class), the model as numbers, its state as JSON, and its block learning in C. The learning
rule, the reference, is :class:`~stream_perceptron.learners.Perceptron`'s."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

from stream_perceptron.formats.sparse_rows import SparseRows
from stream_perceptron.lazy_numpy import np
from stream_perceptron.learners import _binary_kernel as _binary
from stream_perceptron.learners._linear import BinaryLinearModel, LinearHyperparameters
from stream_perceptron.learners._maths import norm
from stream_perceptron.learners._state import pairs
from stream_perceptron.learners._stored import NativeModelStore, StoredModelDict
from stream_perceptron.learners.binary_blocks import BinaryBlocks
from stream_perceptron.state import count, keyed, number

__all__ = ["ROW", "PerceptronModel"]

_EXACT_INT = 2**53  # an int lr up to it is exact in C (the kernel's lr_int)

#: The label of the store's one class (its weights are ``_w``, its accumulators ``_u``; the
#: biases stay attributes of the learner).
ROW = 0


class PerceptronModel(NativeModelStore, LinearHyperparameters, BinaryBlocks, BinaryLinearModel):
    """What :class:`~stream_perceptron.learners.Perceptron` holds and how it is read, saved
    and learned in blocks (a base of it, after its C core)."""

    #: The weights and averaging accumulators: the dicts ``_w`` and ``_u``, or native arrays
    #: (``_store``, see NativeModelStore). With the C helpers built and ``init="zeros"``, the
    #: dict API moves them into a :class:`~stream_perceptron._speedups.ClassStore` of one
    #: class, which then *is* the model: the two dicts are None meanwhile, and reading one
    #: (the pure-Python code, ``learn_dense``, a test) moves them back (``_release_store``);
    #: what only reads the model (``weights``, ``get_state``, the margins) builds dicts from
    #: the store and leaves it. Scoring is one index lookup per feature (none when the
    #: example's key objects are the last one's) instead of one dict lookup per feature and
    #: dict (two when averaged).
    _w: StoredModelDict[dict[Any, float]] = StoredModelDict()
    _u: StoredModelDict[dict[Any, float]] = StoredModelDict()
    _dict_w: dict[Any, float] | None
    _dict_u: dict[Any, float] | None

    # -- the model in a native store -----------------------------------------------------------
    def _store_dicts(self, store: Any) -> dict[str, Any]:
        w, _, u, _ = store.dicts()
        return {"_dict_w": w[ROW], "_dict_u": u[ROW]}

    def _weight_dict(self) -> dict[Any, float]:
        """The weights to read (the metrics' weights and norm): from the store without the
        accumulators' dict."""
        store = self._store
        return dict(store.pairs(ROW)) if store is not None else self._w

    def _model_dicts(self) -> tuple[dict[Any, float], dict[Any, float]]:
        """``(w, u)`` to read, not to change: the dicts, or dicts built from the store (which
        keeps the model)."""
        store = self._store
        if store is not None:
            w, _, u, _ = store.dicts()
            return w[ROW], u[ROW]
        return self._w, self._u

    # -- the model as numbers ------------------------------------------------------------------
    @property
    def average_weights(self) -> dict[Any, float]:
        """The averaged weights predictions use when ``averaged=True``."""
        d = self._avg_div(self._n_seen or 1)
        w, u = self._model_dicts()
        return {k: wk - u.get(k, 0.0) / d for k, wk in w.items()}

    @property
    def average_bias(self) -> float:
        """The averaged bias predictions use when ``averaged=True``."""
        return self._b - self._ub / self._avg_div(self._n_seen or 1)

    # -- state ---------------------------------------------------------------------------------
    @property
    def weights(self) -> dict[Any, float]:
        """Feature -> weight (a copy)."""
        store = self._store
        return dict(store.pairs(ROW)) if store is not None else dict(self._w)

    @property
    def weight_norm(self) -> float:
        """||w||, the bias excluded."""
        return norm(self._weight_dict().values())

    def _state_payload(self) -> dict[str, Any]:
        store = self._store
        if store is not None:  # the pairs straight from the arrays (no dicts built first)
            weights, accumulators = store.pairs(ROW), store.pairs(ROW, True)
        else:
            weights, accumulators = pairs(self._w), pairs(self._u)
        return {
            "labels": self._labels.get_state(),
            "weights": weights,
            "bias": self._b,
            "avg_weights_acc": accumulators,
            "avg_bias_acc": self._ub,
            "avg_ref": self._avg_ref,
            "rng": self._init.get_state(),
        }

    def _load_payload(self, state: dict[str, Any]) -> None:
        self._memo = None
        self._store_reset()  # the state replaces the whole model
        self._load_linear_payload(state)
        self._u = keyed(state["avg_weights_acc"], "avg_weights_acc")
        self._ub = number(state["avg_bias_acc"], "avg_bias_acc")
        # absent from version 1
        self._avg_ref = count(state.get("avg_ref", 0), "avg_ref", self._n_seen, "n_seen")
        self._init.set_state(state["rng"])

    # -- blocks: what the kernel needs (_binary_kernel.BinaryKernelModel) --------------------
    def block_rule(self) -> tuple[Any, ...]:
        """The C ``BinaryRule``'s fields: ``(lr, lr_int, bias_mode, averaged, half_life, beta,
        b, ub, max_norm, n_seen, n_mistakes, avg_ref)``, ``half_life`` 0.0 for none."""
        lr, half_life = self.lr, self.average_half_life
        lr_int = isinstance(lr, int) and abs(lr) <= _EXACT_INT
        return (
            float(lr), lr_int, _binary.BIAS_CODES[self._bias_mode], bool(self.averaged),
            0.0 if half_life is None else float(half_life), float(self._beta),
            float(self._b), float(self._ub), float(self._max_norm), int(self._n_seen),
            int(self._n_mistakes), int(self._avg_ref),
        )  # fmt: skip

    def block_cells(self, names: list[Any]) -> tuple[array, array, bytearray]:
        """The weights and accumulators of ``names`` (0.0 for a key the dict lacks) and their
        presence bits (1: in the weights, 2: in the accumulators)."""
        wd, ud = self._w, self._u
        w = array("d", [wd.get(k, 0.0) for k in names])
        u = array("d", [ud.get(k, 0.0) for k in names])
        present = bytearray([(k in wd) | (k in ud) << 1 for k in names])
        return w, u, present

    def commit_block(
        self, names: list[Any], cells: tuple[array, array, bytes], joined: tuple[array, array],
        factors: list[float], rule: tuple[Any, ...],
    ) -> None:  # fmt: skip
        """A kernel's learned cells (``had``: the presence bits before it; ``joined``: the
        slots that joined the weights, the accumulators, in order), its renormalisations'
        ``factors`` (every other accumulator rescaled by them) and its rule's fields."""
        w, u, had = cells
        wd, ud = self._w, self._u
        _binary.write_back(wd, names, w, had, 1, joined[0])
        _binary.write_back(ud, names, u, had, 2, joined[1])
        if factors:
            _binary.rescale_outside(ud, names, u, True, factors)
        (_, _, _, _, _, _, self._b, self._ub, self._max_norm, self._n_seen,
         self._n_mistakes, self._avg_ref) = rule  # fmt: skip

    # -- dense blocks --------------------------------------------------------------------------
    def learn_dense(self, features: Sequence[Any], X: Any, signs: Any, /) -> np.ndarray:
        """Predict-then-learn each row of ``X`` exactly as the ``predict_learn_one`` loop over
        ``dict(zip(features, row))`` would, to the last bit (predictions, mistakes, weights
        and their key order, bias, averaging accumulators, counters, ``max_norm``), in C.

        ``features``: the distinct names of ``X``'s columns; ``X``: float64, all finite;
        ``signs``: the signs the labels encode to (-1/+1, as ``self._labels`` encodes them,
        see :func:`stream_perceptron.learners.binary_blocks.encode_labels`), ``0`` for an unlabelled
        row, which is only predicted (as ``predict_one`` would). Returns the predicted signs
        (int8, -1/+1), each made before learning its row: a NumPy array, or an int8
        ``memoryview`` for the C scanner's block (a 2-D float64 ``memoryview`` ``X`` with int8
        buffer ``signs``, read without NumPy). Needs :attr:`dense_capable`. A row
        ``_learn`` would refuse (its update would make the model non-finite) raises
        :class:`ValueTooLargeError` (``row``: its index), the model as before the call.

        Examples
        --------
        >>> import numpy as np
        >>> from stream_perceptron import Perceptron
        >>> model = Perceptron()
        >>> X = np.array([[1.0, 0.0], [-1.0, 2.0], [2.0, 1.0]])
        >>> model.learn_dense(["a", "b"], X, np.array([1, -1, 1])).tolist()
        [-1, -1, 1]
        >>> model.weights, model.bias, model.n_mistakes
        ({'a': 2.0, 'b': -2.0}, 0.0, 2)

        """
        self._require_dense()
        if isinstance(X, SparseRows):
            return _binary.learn_sparse(self, features, X, signs)
        return _binary.learn_dense(self, features, X, signs)
