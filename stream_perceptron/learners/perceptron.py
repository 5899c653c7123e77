"""Rosenblatt's binary perceptron: mistake-driven, with learned, R^2-scaled or no bias."""

from __future__ import annotations

import math
from typing import Any

from stream_perceptron import native
from stream_perceptron.errors import ValueTooLargeError
from stream_perceptron.learners import _binary_kernel as _binary
from stream_perceptron.learners._base import UndoLog
from stream_perceptron.learners._core import BINARY_FIELDS, BinaryCore, CoreFields
from stream_perceptron.learners._init_weights import new_features
from stream_perceptron.learners._linear import BinaryLinearModel
from stream_perceptron.learners._maths import add_scaled, norm_of, sparse_dot, too_large
from stream_perceptron.learners._perceptron_model import ROW, PerceptronModel
from stream_perceptron.learners._state import registered
from stream_perceptron.learners.labels import BinaryLabels

_INF = math.inf

# The dict API's C helpers, or None (the pure-Python loops below, the reference).
_speedups = native.speedups

__all__ = ["Perceptron"]


@registered
class Perceptron(BinaryCore, CoreFields, PerceptronModel):
    """Binary perceptron, learning one example at a time and only from its mistakes.

    The score is ``s = w.x + b``. An example ``(x, y)`` with ``y`` in {-1, +1} is a mistake when
    ``y*s <= 0`` (a tie counts, as in River's ``learn_one``); only then does the model change:
    ``w += lr*y*x`` and, by bias mode, ``b += lr*y`` (``"learned"``), ``b += y*R**2``
    (``"r2"``, R the largest input norm so far, updated before the check) or nothing
    (``"none"``). A score of exactly 0 predicts the negative class.

    Parameters
    ----------
    lr
        Learning rate: the step of each update.
    bias
        ``"learned"``, ``"r2"`` or ``"none"``.
    init
        ``"zeros"``, or ``"random"``: a feature's weight starts from a small normal value drawn
        (reproducibly, from a generator seeded by ``seed``) the first time it is learned from.
    seed
        Seed of the generator for ``init="random"``.
    averaged
        Predict with the average of the weight vectors after every example (Freund and
        Schapire's averaged perceptron), kept lazily: an update costs O(non-zero features).

    Attributes
    ----------
    weights
        Feature -> weight.
    bias
        The bias b.
    n_seen
        Examples learned from.
    n_mistakes
        Mistakes made while learning (= updates).
    max_norm
        R, the largest input norm seen.

    Examples
    --------
    >>> from stream_perceptron import Perceptron
    >>> model = Perceptron()
    >>> for x, y in [({"a": 1.0}, True), ({"a": -1.0}, False), ({"a": 2.0}, True)]:
    ...     model.learn_one(x, y)
    >>> model.weights, model.bias, model.n_mistakes
    ({'a': 2.0}, 0.0, 2)
    >>> model.predict_one({"a": 0.5}), model.predict_one({"a": -3.0})
    (True, False)

    References
    ----------
    F. Rosenblatt, "The perceptron: a probabilistic model for information storage and
    organization in the brain", Psychological Review, 1958.
    Y. Freund and R. Schapire, "Large margin classification using the perceptron algorithm",
    Machine Learning, 1999.

    """

    _CORE_FIELDS = BINARY_FIELDS

    def __init__(
        self,
        lr: float = 1.0,
        bias: str = "learned",
        init: str = "zeros",
        seed: int | None = None,
        averaged: bool = False,
        average_half_life: float | None = None,
    ) -> None:
        self._set_hyperparameters(lr, bias, init, seed, averaged, average_half_life)
        self._labels = BinaryLabels()
        self._w = {}
        self._b = 0.0
        # Lazy averaging: u holds sum over updates of c(t) * delta; average = w - u / D(t)
        # (see LinearHyperparameters: c(t) = t - 1 and D(t) = t for the plain average).
        self._u = {}
        self._ub = 0.0
        self._init_counters()

    # -- learning ------------------------------------------------------------------------------
    # predict_one, learn_one and predict_learn_one are BinaryCore's (see learners/_core.py): the
    # usual case in C, the rest in these Python methods, the reference the C code follows.
    _learn_one_py = BinaryLinearModel.learn_one

    def _predict_learn_one_py(self, x: dict, y: Any) -> Any:
        """Predict ``x`` as ``predict_one`` would, then learn ``(x, y)``; return the prediction.

        One pass over ``x`` instead of two when the model is not averaged.
        """
        labels = self._labels
        if not labels.settled:
            return self._predict_learn_first(x, y)
        sign = labels.encode(y)
        if self.averaged:
            t = self._n_seen
            store = self._store
            if t and store is not None and _speedups is not None:
                # the model in its store: straight to it (the store exists only where the
                # learning code is this class's, so nothing here is replaced by a subclass)
                got = store.row_avg_dot_norm(x, False)
                if got is not None:
                    d = t if self.average_half_life is None else self._avg_div(t)
                    plain = got[1]
                    score = (plain[0] + self._b) - (got[0] + self._ub) / d
                    self._learn(x, sign, plain)
                    return labels.positive if score > 0 else labels.negative
            if t and _speedups is not None and not self._init.random:
                # predict_one's averaged score and _learn's plain dot and norm, in one pass
                got = self._avg_dot_norm(x, False)
                if got is not None:
                    score = (got[1][0] + self._b) - (got[0] + self._ub) / self._avg_div(t)
                    self._learn(x, sign, got[1])
                    return labels.positive if score > 0 else labels.negative
            prediction = self._predict_before_learning(x)
            self._learn(x, sign)
            return prediction
        score = self._learn(x, sign)
        return labels.decode(1 if score > 0 else -1)

    def _predict_learn_first(self, x: dict, y: Any) -> Any:
        """``predict_learn_one`` while the encoding is open: the prediction decodes with the
        encoding ``y`` settles, which is taken back when the example is refused."""
        labels = self._labels
        saved = labels.get_state()
        labels.commit(labels.propose(y)[1])
        try:
            return self.predict_learn_one(x, y) if labels.settled else self._predict_open(x, y)
        except ValueTooLargeError:
            self._labels = BinaryLabels.from_state(saved)
            raise

    def _predict_open(self, x: dict, y: Any) -> Any:
        # the encoding still open after y (a first label 1): predict_learn_one's body
        sign = self._labels.encode(y)
        if self.averaged:
            try:
                prediction = self.predict_one(x)
            except OverflowError:
                raise too_large("R (the largest input norm)") from None
            self._learn(x, sign)
            return prediction
        score = self._learn(x, sign)
        return self._labels.decode(1 if score > 0 else -1)

    def _learn(self, x: dict, y: int, known: tuple[float, float] | None = None) -> float:
        """Learn from ``x`` with sign ``y``; return the score before learning. ``known``: the
        ``(dot, r)`` of ``x`` under the weights now, when the caller computed them.

        Everything the example changes (R, the weights, the bias, the averaging accumulators)
        is computed and checked before anything is stored: when a value would not be finite,
        :class:`ValueTooLargeError` and the model is as it was (a random init's fresh weights
        and generator draws taken back). A score that overflows (``inf``, or ``NaN`` from
        ``inf - inf``) is not stored: ``y * score <= 0`` decides as for any score (``NaN``:
        no mistake), and ``predict_one`` gives the negative class for it."""
        t = self._n_seen + 1
        store = self._store
        if store is None and _speedups is not None:
            store = self._take_store()
        w = self._w if store is None else None
        memo = self._memo
        if memo is not None:
            self._memo = None
        undo = None
        if self._init.random:  # never with a store
            assert w is not None
            fresh = new_features(x, w)
            if fresh:
                memo = None  # weights of x's features drawn since predict_one
                undo = UndoLog(self._init.get_state())
                for k, v in zip(fresh, self._init.draw(len(fresh))):
                    undo.put(w, k, v)
                    if self.averaged:
                        undo.put(self._u, k, self._u.get(k, 0.0) + self._avg_coef(t) * v)
        try:
            got = known
            if got is None and _speedups is not None:
                # predict_one's dot and norm when it was given this very dict, unchanged
                # since, and the model has not learned since; else computed
                if memo is not None:
                    got = _speedups.recall(memo, x, t - 1)
                if got is None and store is not None:
                    got = store.row_dot_norm(x)
                    if got is None:  # not handled: the model back in its dicts
                        self._release_store()
                        store = None
                        w = self._w
                if got is None and w is not None:
                    got = _speedups.dot_norm(w, x)
            if got is not None:
                dot = got[0]
                r = got[1]
                if not r < _INF:  # r >= 0, or NaN
                    raise too_large("R (the largest input norm)")
            else:
                if store is not None:  # the C helpers switched off meanwhile (the tests)
                    self._release_store()
                    store = None
                w = self._w
                r = norm_of(x)
                dot = 0.0
                for k, v in x.items():
                    wk = w.get(k)
                    if wk is not None:
                        dot += wk * v
            max_norm = r if r > self._max_norm else self._max_norm
            score = dot + self._b
            if y * score <= 0:
                step = self.lr * y
                if self._bias_mode == "learned":
                    db = step
                elif self._bias_mode == "r2":
                    db = y * max_norm * max_norm
                else:
                    db = 0.0
                averaging = self._averaging(t)
                c = self._avg_coef(t) if averaging else 0
                try:
                    b = self._b + db
                    ub = self._ub + c * db if averaging else self._ub
                except OverflowError:
                    raise too_large("the bias") from None
                if not (-_INF < b < _INF and -_INF < ub < _INF):
                    raise too_large("the bias")
                done = None
                if store is not None:  # the biases are the learner's: the store's stay 0
                    done = store.update(x, ROW, None, step, 0, c if averaging else None)
                    if done is None:  # not handled: the update on the dicts
                        self._release_store()
                        store = None
                    elif done is not True:
                        raise too_large("a weight")
                if done is None:
                    w = self._w
                    done = (
                        add_scaled(_speedups, x, w, step, self._u, c * step)
                        if averaging
                        else add_scaled(_speedups, x, w, step)
                    )
                    if not done:
                        raise too_large("a weight")
                self._b = b
                self._ub = ub
                self._n_mistakes += 1
            self._max_norm = max_norm
            self._n_seen = t
            if self._renormalise_due(t):
                self._renormalise(t)
            return score
        except ValueTooLargeError:
            if undo is not None:
                undo.undo(self._init)
            raise

    def _renormalise(self, t: int) -> None:
        """Move the forgetting average's reference example up to ``t``: the same average, with
        coefficients back near 1 (see :class:`LinearHyperparameters`)."""
        factor = math.pow(self._beta, t - self._avg_ref)
        store = self._store
        if store is not None:
            store.rescale(factor)
        else:
            self._rescale(self._u, factor)
        self._ub = self._ub * factor
        self._avg_ref = t

    # -- the model in a native store -----------------------------------------------------------
    def _take_store(self) -> Any:
        """Move the weights and accumulators from their dicts into a new ``ClassStore`` of one
        class and return it; None (the dicts kept) when it cannot (see
        :meth:`~stream_perceptron.learners._stored.NativeModelStore._new_store`)."""
        dicts = ({ROW: self._dict_w}, {ROW: 0.0}, {ROW: self._dict_u}, {ROW: 0.0})
        store = self._new_store(_speedups, Perceptron, dicts)
        if store is not None:
            self._dict_w = self._dict_u = None
            self._store = store
        return store

    def _dot_norm(self, x: dict, snapshot: bool) -> Any:
        """``_speedups.dot_norm`` of the weights and ``x``: from the model's store when it
        handles ``x``, else (the model back in its dicts) from the module's function; None
        when that declines too (or the C extension is off)."""
        kernels = _speedups
        if kernels is None:
            return None
        got = self._from_store("row_dot_norm", x, snapshot)
        return got if got is not None else kernels.dot_norm(self._w, x, snapshot)

    def _avg_dot_norm(self, x: dict, snapshot: bool) -> Any:
        """``_speedups.avg_dot_norm`` of the weights, accumulators and ``x``, as
        :meth:`_dot_norm`."""
        kernels = _speedups
        if kernels is None:
            return None
        got = self._from_store("row_avg_dot_norm", x, snapshot)
        return got if got is not None else kernels.avg_dot_norm(self._w, self._u, x, snapshot)

    # -- dense blocks --------------------------------------------------------------------------
    #: The methods whose code the dense kernel reproduces: a subclass replacing any of them
    #: learns differently, so it is not dense-capable.
    _DENSE_REFERENCE = (
        "_learn", "_score", "_average_score", "predict_one", "predict_learn_one",
        "_predict_learn_first", "_predict_open", "learn_one", "_predict_one_py",
        "_learn_one_py", "_predict_learn_one_py",
    )  # fmt: skip

    #: The methods whose code the store's path reproduces (a subclass replacing any of them
    #: keeps its model in dicts).
    _STORE_REFERENCE = (
        *_DENSE_REFERENCE, "_renormalise", "_avg_coef", "_avg_div", "_averaging",
        "_plain_score",
    )  # fmt: skip

    @property
    def dense_capable(self) -> bool:
        """Whether :meth:`learn_dense` can run: the C extension is built, ``init="zeros"``
        (a random init draws weights per new feature), a plain number as ``lr``, and the
        class does not replace the learning code the kernel reproduces."""
        return self._kernel_applies(Perceptron) and _binary.supported(self)

    @property
    def sparse_capable(self) -> bool:
        """Whether :meth:`learn_dense` takes sparse rows too: whenever it can run."""
        return self.dense_capable

    # -- prediction ----------------------------------------------------------------------------
    def _score(self, x: dict) -> float:
        if self.averaged and self._n_seen:
            return self._average_score(x)
        got = self._dot_norm(x, True)
        if got is not None:
            self._memo = (x, got, self._n_seen)
            return got[0] + self._b
        return self._plain_score(x)

    def _plain_score(self, x: dict) -> float:
        store = self._store
        if store is not None:
            got = store.row_dot_norm(x)
            if got is not None:
                return got[0] + self._b
        return sparse_dot(self._weight_dict(), x) + self._b

    def _average_score(self, x: dict) -> float:
        """The score under the averaged weights: ``s - (u.x + ub) / t``, ``s`` the plain score
        (``w - u/t`` is the average of the ``t`` weight vectors so far, see ``_learn``): two
        dots over x's features and one division, whatever the size of the model. The same
        number as ``average_weights . x + average_bias`` up to float rounding (the tests hold
        it to an exact rational average)."""
        t = self._n_seen
        d = self._avg_div(t)
        got = self._avg_dot_norm(x, True)
        if got is not None:
            # the plain dot and norm, for the learn_one that usually follows
            self._memo = (x, got[1], t)
            return (got[1][0] + self._b) - (got[0] + self._ub) / d
        w, u = self._model_dicts()
        dot = udot = 0.0
        for k, v in x.items():
            wk = w.get(k)
            if wk is not None:
                dot += wk * v
                uk = u.get(k)
                if uk is not None:
                    udot += uk * v
        return (dot + self._b) - (udot + self._ub) / d

    def _predict_one_py(self, x: dict, **kwargs: Any) -> Any:
        if _speedups is not None:  # _score's and _average_score's fast paths, inlined
            t = self._n_seen
            labels = self._labels
            if not (self.averaged and t):
                store = self._store
                got = None if store is None else store.row_dot_norm(x, True)
                if got is None:
                    got = self._dot_norm(x, True)
                if got is not None:
                    self._memo = (x, got, t)
                    return labels.positive if got[0] + self._b > 0 else labels.negative
            else:
                store = self._store
                if store is not None:  # as predict_learn_one: straight to the store
                    got = store.row_avg_dot_norm(x, True)
                    if got is not None:
                        plain = got[1]
                        self._memo = (x, plain, t)
                        d = t if self.average_half_life is None else self._avg_div(t)
                        score = (plain[0] + self._b) - (got[0] + self._ub) / d
                        return labels.positive if score > 0 else labels.negative
                got = self._avg_dot_norm(x, True)
                if got is not None:
                    self._memo = (x, got[1], t)
                    d = self._avg_div(t)
                    score = (got[1][0] + self._b) - (got[0] + self._ub) / d
                    return labels.positive if score > 0 else labels.negative
        return self._labels.decode(1 if self._score(x) > 0 else -1)

    # -- state ---------------------------------------------------------------------------------
