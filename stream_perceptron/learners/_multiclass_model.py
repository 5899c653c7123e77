"""The multi-class perceptron's model: per class its weights, bias and accumulators (dicts, or a
native store), the scores and predictions made from it, the model as numbers, its state as
JSON, and its block learning in C. The learning rule, the reference, is
:class:`~stream_perceptron.learners.MulticlassPerceptron`'s."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from stream_perceptron import native
from stream_perceptron.formats.sparse_rows import SparseRows
from stream_perceptron.lazy_numpy import is_bool, np
from stream_perceptron.learners import _binary_kernel as _binary
from stream_perceptron.learners import _multiclass_kernel as _multiclass
from stream_perceptron.learners._linear import LinearHyperparameters, MulticlassLinearModel
from stream_perceptron.learners._maths import argmax, softmax
from stream_perceptron.learners._state import class_entries, pairs, to_json_key
from stream_perceptron.learners._stored import NativeModelStore, StoredModelDict
from stream_perceptron.state import count, keyed, number

__all__ = ["MulticlassModel"]

_EXACT_INT = 2**53  # an int lr up to it is exact in C (the kernel's lr_int)

# The dict API's C helpers of the multi-class perceptron (its learning rule in
# ``multiclass.py`` reads them here too), or None: the pure-Python loops, the reference.
_speedups = native.speedups


class MulticlassModel(NativeModelStore, LinearHyperparameters, MulticlassLinearModel):
    """What :class:`~stream_perceptron.learners.MulticlassPerceptron` holds and how it is
    read, scored, saved and learned in blocks (a base of it, after its C core)."""

    #: The model: the dicts ``_w``, ``_b``, ``_u``, ``_ub``, or native arrays (``_store``,
    #: see NativeModelStore). With the C helpers built and ``init="zeros"``, the dict API moves
    #: the model into a :class:`~stream_perceptron._speedups.ClassStore`, which then *is* the
    #: model: the four dicts are None meanwhile, and reading one (the pure-Python
    #: code, ``learn_dense``, a test) moves the model back into dicts
    #: (:meth:`_release_store`); what only reads the model (``weights``, ``get_state``, the
    #: margins) builds dicts from the store and leaves it. Never two copies to keep in step.
    _w: StoredModelDict[dict[Any, dict[Any, float]]] = StoredModelDict()
    _b: StoredModelDict[dict[Any, float]] = StoredModelDict()
    _u: StoredModelDict[dict[Any, dict[Any, float]]] = StoredModelDict()
    _ub: StoredModelDict[dict[Any, float]] = StoredModelDict()
    _dict_w: dict[Any, dict[Any, float]] | None
    _dict_b: dict[Any, float] | None
    _dict_u: dict[Any, dict[Any, float]] | None
    _dict_ub: dict[Any, float] | None

    # -- the model in a native store -----------------------------------------------------------
    def _store_dicts(self, store: Any) -> dict[str, Any]:
        w, b, u, ub = store.dicts()
        return {"_dict_w": w, "_dict_b": b, "_dict_u": u, "_dict_ub": ub}

    def _model_dicts(self) -> tuple[dict, dict, dict, dict]:
        """``(w, b, u, ub)`` to read, not to change: the dicts, or dicts built from the store
        (which keeps the model)."""
        store = self._store
        if store is not None:
            return store.dicts()
        return self._w, self._b, self._u, self._ub

    def _weight_dicts(self) -> tuple[dict, dict]:
        """``(w, b)`` to read (the metrics' weights and norms): from the store without the
        accumulators' dicts."""
        store = self._store
        if store is not None:
            b, _ = store.biases()
            return {c: dict(store.pairs(c)) for c in b}, b
        return self._w, self._b

    @property
    def classes(self) -> list[Any]:
        """Classes in the order first seen."""
        store = self._store
        return list(self._w if store is None else store.classes)

    def _add_class(self, c: Any) -> None:
        if is_bool(c):
            self._bool_classes = True
        self._w[c] = {}
        self._b[c] = 0.0
        self._u[c] = {}
        self._ub[c] = 0.0

    # -- the block interface (learners/_multiclass_kernel.py) ----------------------------------
    def block_classes(self) -> list[Any]:
        """The classes in the order first seen (the kernel's class codes)."""
        return list(self._w)

    def block_rule(self) -> tuple[Any, ...]:
        """The C ``MultiRule``'s fields: ``(lr, lr_int, bias_mode, averaged, half_life, beta,
        max_norm, n_seen, n_mistakes, avg_ref, n_active)``, ``half_life`` 0.0 for none."""
        lr, half_life = self.lr, self.average_half_life
        return (
            float(lr), isinstance(lr, int) and abs(lr) <= _EXACT_INT,
            _binary.BIAS_CODES[self._bias_mode], bool(self.averaged),
            0.0 if half_life is None else float(half_life), float(self._beta),
            float(self._max_norm), int(self._n_seen), int(self._n_mistakes), int(self._avg_ref),
            len(self._w),
        )  # fmt: skip

    def block_cells(self, names: list[Any], n_classes: int) -> tuple[np.ndarray, ...]:
        """``(W, U, b, ub, present)`` for ``n_classes`` classes (the model's, then those a block
        brings: zeros) and the block's feature ``names``: each class's weights and
        accumulators of ``names`` (0.0 where its dict has none; U empty unless averaged), its
        biases, and the presence bits (1: in the weights, 2: in the accumulators)."""
        m, averaged = len(names), bool(self.averaged)
        W, U = np.zeros((n_classes, m)), np.zeros((n_classes if averaged else 0, m))
        b, ub = np.zeros(n_classes), np.zeros(n_classes)
        present = np.zeros((n_classes, m), dtype=np.uint8)
        for i, cl in enumerate(self._w):
            wc, uc = self._w[cl], self._u[cl]
            b[i], ub[i] = self._b[cl], self._ub[cl]
            if wc or uc:
                W[i] = [wc.get(k, 0.0) for k in names]
                present[i] = [(k in wc) | (k in uc) << 1 for k in names]
                if averaged:
                    U[i] = [uc.get(k, 0.0) for k in names]
        return W, U, b, ub, present

    def commit_block(
        self, names: list[Any], classes: list[Any], cells: tuple[np.ndarray, ...],
        joined: list[np.ndarray], factors: list[float], rule: tuple[Any, ...],
    ) -> None:  # fmt: skip
        """A kernel's learned cells (``had``: the presence bits before it; ``joined``: per
        class the slots that joined its weights, then per class those of its accumulators, in
        order), the classes it brought (the first ``n_active`` of ``classes``), its
        renormalisations' ``factors`` (every other accumulator rescaled by them) and its rule's
        fields."""
        W, U, b, ub, had = cells
        (_, _, _, _, _, _, self._max_norm, self._n_seen, self._n_mistakes, self._avg_ref,
         n_active) = rule  # fmt: skip
        for cl in classes[len(self._w) : n_active]:
            self._add_class(cl)
        k = len(classes)
        for i, cl in enumerate(classes[:n_active]):
            bits = had[i].tobytes()
            _binary.write_back(self._w[cl], names, W[i], bits, 1, joined[i])
            self._b[cl] = float(b[i])
            self._ub[cl] = float(ub[i])
            if self.averaged:
                ud = self._u[cl]
                _binary.write_back(ud, names, U[i], bits, 2, joined[k + i])
                if factors:
                    _binary.rescale_outside(ud, names, U[i], True, factors)
        self._memo = None

    # -- dense blocks --------------------------------------------------------------------------
    def learn_dense(self, features: Sequence[Any], X: Any, labels: Any, /) -> list[Any]:
        """Predict-then-learn each row of ``X`` exactly as the ``predict_learn_one`` loop over
        ``dict(zip(features, row))`` would (``predict_one`` for a row whose label is ``None``),
        to the last bit, in C; return the predictions. ``X`` float64, all finite, one column
        per name of ``features``; or sparse rows (a
        :class:`~stream_perceptron.formats.sparse_rows.SparseRows`, its slots indexing
        ``features``), each row learned as the dict of its own items. Needs
        :attr:`dense_capable`.

        Examples
        --------
        >>> import numpy as np
        >>> from stream_perceptron import MulticlassPerceptron
        >>> model = MulticlassPerceptron()
        >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 0.5]])
        >>> model.learn_dense(["a", "b"], X, ["red", "blue", "red"])
        [None, 'red', 'red']
        >>> model.weights, model.n_mistakes
        ({'red': {'a': 1.0, 'b': -1.0}, 'blue': {'a': 0.0, 'b': 1.0}}, 2)

        Sparse rows, ``{"b": 1.0}`` and ``{"a": 2.0, "b": -1.0}``: each class's new keys come
        in the order the rows bring them.

        >>> from array import array
        >>> from stream_perceptron.formats.sparse_rows import SparseRows
        >>> rows = SparseRows(array("q", [0, 1, 3]), array("i", [1, 0, 1]),
        ...                   array("d", [1.0, 2.0, -1.0]))
        >>> model = MulticlassPerceptron()
        >>> model.learn_dense(["a", "b"], rows, ["red", "blue"])
        [None, 'red']
        >>> model.weights
        {'red': {'b': 2.0, 'a': -2.0}, 'blue': {'a': 2.0, 'b': -1.0}}

        """
        self._require_dense()
        if isinstance(X, SparseRows):
            return _multiclass.learn_sparse(self, features, X, labels)
        return _multiclass.learn_dense(self, features, X, labels)

    # -- prediction ----------------------------------------------------------------------------
    def _avg_argmax(self, d: float, x: dict, snapshot: bool) -> Any:
        """``_speedups.avg_class_argmax`` of the model and ``x`` (``d`` the divisor D(t)):
        from the model's store (:meth:`_take_store`) when it handles ``x``, else (the model
        back in its dicts) from the module's function; None when that declines too (or the
        C extension is off)."""
        kernels = _speedups
        if kernels is None:
            return None
        got = self._from_store("avg_class_argmax", d, x, snapshot)
        if got is not None:
            return got
        return kernels.avg_class_argmax(self._w, self._b, self._u, self._ub, d, x, snapshot)

    def _plain_argmax(self, x: dict, snapshot: bool) -> Any:
        """``_speedups.class_argmax`` of the plain model and ``x``, as :meth:`_avg_argmax`:
        from the model's store when it handles ``x``, else from the module's function on the
        dicts; None when that declines too (or the C extension is off)."""
        kernels = _speedups
        if kernels is None:
            return None
        got = self._from_store("class_argmax", x, snapshot)
        return got if got is not None else kernels.class_argmax(self._w, self._b, x, snapshot)

    @staticmethod
    def _scores(x: dict, w: dict, b: dict) -> dict[Any, float]:
        if _speedups is not None:
            got = _speedups.class_scores(w, b, x)
            if got is not None:
                return got
        scores = {}
        for c, wc in w.items():
            dot = 0.0
            for k, v in x.items():
                wk = wc.get(k)
                if wk is not None:
                    dot += wk * v
            scores[c] = dot + b[c]
        return scores

    def _average_scores(self, x: dict) -> dict[Any, float]:
        """The scores under the averaged weights and biases: ``s - (u.x + ub) / t`` per class,
        ``s`` the plain score (``w - u/t`` is the average of the ``t`` weight vectors so far):
        two dots over x's features and one division per class, whatever the size of the
        model. The same numbers as ``average_weights``/``average_bias`` give, up to float
        rounding (the tests hold them to an exact rational average)."""
        t = self._avg_div(self._n_seen)
        if _speedups is not None:
            store = self._store
            if store is None:
                store = self._take_store()
            if store is not None:
                got = store.avg_class_scores(t, x)
                if got is not None:
                    return got
                self._release_store()
            got = _speedups.avg_class_scores(self._w, self._b, self._u, self._ub, t, x)
            if got is not None:
                return got
        scores = {}
        u, b, ub = self._u, self._b, self._ub
        for c, wc in self._w.items():
            uc = u[c]
            dot = udot = 0.0
            for k, v in x.items():
                wk = wc.get(k)
                if wk is not None:
                    dot += wk * v
                    uk = uc.get(k)
                    if uk is not None:
                        udot += uk * v
            scores[c] = (dot + b[c]) - (udot + ub[c]) / t
        return scores

    def _predict_scores(self, x: dict) -> dict[Any, float]:
        if self.averaged and self._n_seen:
            return self._average_scores(x)
        return self._plain_scores(x)

    def _predict_one_py(self, x: dict, **kwargs: Any) -> Any:
        if _speedups is not None:
            t = self._n_seen
            if not (self.averaged and t):
                store = self._store
                got = None if store is None else store.class_argmax(x, True)
                if got is None:
                    got = self._plain_argmax(x, True)
                if got is not None:
                    self._memo = (x, got, t)
                    return got[0]
            else:
                store = self._store
                if store is not None:  # no subclass replaces _avg_div then
                    d = t if self.average_half_life is None else self._avg_div(t)
                    got = store.avg_class_argmax(d, x, True)
                else:
                    d = self._avg_div(t)
                    got = None
                if got is None:
                    got = self._avg_argmax(d, x, True)
                if got is not None:
                    # the plain argmax and norm, for the learn_one that usually follows
                    self._memo = (x, got[1], t)
                    return got[0]
        return argmax(self._predict_scores(x))

    def predict_proba_one(self, x: dict, **kwargs: Any) -> dict[Any, float]:
        return softmax(self._predict_scores(x))

    # -- the model as numbers ------------------------------------------------------------------
    @property
    def average_weights(self) -> dict[Any, dict[Any, float]]:
        """The averaged weights used by predictions when ``averaged=True``."""
        t = self._avg_div(self._n_seen or 1)
        w, _, u, _ = self._model_dicts()
        return {c: {k: wk - u[c].get(k, 0.0) / t for k, wk in wc.items()} for c, wc in w.items()}

    @property
    def average_bias(self) -> dict[Any, float]:
        """The averaged biases used by predictions when ``averaged=True``."""
        t = self._avg_div(self._n_seen or 1)
        _, b, _, ub = self._model_dicts()
        return {c: bc - ub[c] / t for c, bc in b.items()}

    def _plain_scores(self, x: dict) -> dict[Any, float]:
        store = self._store
        if store is None and _speedups is not None:
            store = self._take_store()
        if store is not None:
            got = store.class_scores(x)
            if got is not None:
                return got
        w, b = self._weight_dicts()
        return self._scores(x, w, b)

    # -- state ---------------------------------------------------------------------------------
    def _state_payload(self) -> dict[str, Any]:
        store = self._store
        weights: Callable[[Any], list[list[Any]]]
        accumulators: Callable[[Any], list[list[Any]]]
        if store is not None:  # the pairs straight from the arrays (no dicts built first)
            b, ub = store.biases()
            weights, accumulators = store.pairs, lambda c: store.pairs(c, True)
        else:
            w, b, u, ub = self._w, self._b, self._u, self._ub
            weights, accumulators = lambda c: pairs(w[c]), lambda c: pairs(u[c])

        classes = [
            {
                "label": to_json_key(c),
                "weights": weights(c),
                "bias": b[c],
                "avg_weights_acc": accumulators(c),
                "avg_bias_acc": ub[c],
            }
            for c in b
        ]
        return {
            "classes": classes,
            "avg_ref": self._avg_ref,
            "rng": self._init.get_state(),
        }

    def _load_payload(self, state: dict[str, Any]) -> None:
        self._memo = None
        for c, entry, field in class_entries(state):
            self._add_class(c)
            self._w[c] = keyed(entry["weights"], f"{field}.weights")
            self._b[c] = number(entry["bias"], f"{field}.bias")
            self._u[c] = keyed(entry["avg_weights_acc"], f"{field}.avg_weights_acc")
            self._ub[c] = number(entry["avg_bias_acc"], f"{field}.avg_bias_acc")
        # absent from version 1
        self._avg_ref = count(state.get("avg_ref", 0), "avg_ref", self._n_seen, "n_seen")
        self._init.set_state(state["rng"])
