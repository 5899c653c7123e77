"""The native multi-class perceptron: one weight vector per class, argmax prediction."""

from __future__ import annotations

import math
from typing import Any

from stream_perceptron.errors import ValueTooLargeError
from stream_perceptron.lazy_numpy import is_bool
from stream_perceptron.learners import _multiclass_kernel as _multiclass
from stream_perceptron.learners import _multiclass_model as _model
from stream_perceptron.learners._base import UndoLog
from stream_perceptron.learners._core import MULTICLASS_FIELDS, CoreFields, MulticlassCore
from stream_perceptron.learners._init_weights import new_features
from stream_perceptron.learners._linear import MulticlassLinearModel
from stream_perceptron.learners._maths import (
    add_scaled,
    argmax,
    check_class_kind,
    norm_of,
    too_large,
)
from stream_perceptron.learners._multiclass_model import MulticlassModel
from stream_perceptron.learners._state import registered

_INF = math.inf


__all__ = ["MulticlassPerceptron"]

_argmax = argmax  # the name the tests and the kernels' docs use

#: What :meth:`MulticlassPerceptron._learn_stored` gives when the store does not handle the
#: example (nothing learned: the model is back in its dicts, for the pure-Python code).
_DECLINED = object()


@registered
class MulticlassPerceptron(MulticlassCore, CoreFields, MulticlassModel):
    """Multi-class perceptron (not one-vs-rest): ``argmax_k w_k.x + b_k``, updated on mistakes.

    Learning ``(x, y)`` first predicts ``y_hat`` with the classes known so far; when
    ``y_hat != y`` (always so for a class seen for the first time), ``w_y += lr*x``,
    ``b_y += lr``, ``w_y_hat -= lr*x`` and ``b_y_hat -= lr``. So every prequential mistake is
    exactly one update. ``bias="r2"`` moves the biases by ``R**2`` instead of ``lr``;
    ``bias="none"`` keeps them at 0. Ties go to the class seen first.

    Parameters
    ----------
    lr
        Learning rate.
    bias
        ``"learned"``, ``"r2"`` or ``"none"``.
    init
        ``"zeros"`` or ``"random"`` (each class's weight for a feature starts from a small
        normal value the first time that class learns from that feature).
    seed
        Seed of the generator for ``init="random"``.
    averaged
        Predict with the averaged weights (lazy averaging, O(non-zero features) per update).

    Attributes
    ----------
    weights
        Class -> (feature -> weight).
    bias
        Class -> bias.
    classes
        The classes in the order they were first seen.

    Examples
    --------
    >>> from stream_perceptron import MulticlassPerceptron
    >>> model = MulticlassPerceptron()
    >>> model.predict_one({"a": 1.0}) is None
    True
    >>> for x, y in [({"a": 1.0}, "red"), ({"b": 1.0}, "blue"), ({"a": 2.0}, "red")]:
    ...     model.learn_one(x, y)
    >>> model.weights
    {'red': {'a': 1.0, 'b': -1.0}, 'blue': {'b': 1.0}}
    >>> model.bias, model.n_mistakes
    ({'red': 0.0, 'blue': 1.0}, 2)
    >>> model.predict_one({"a": 1.0}), model.predict_one({"b": 1.0})
    ('red', 'blue')

    """

    _CORE_FIELDS = MULTICLASS_FIELDS

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
        self._w = {}
        self._b = {}
        self._u = {}
        self._ub = {}
        self._init_counters()
        # Whether a class is a boolean: only then can an int label clash with one (True == 1).
        self._bool_classes = False

    # -- learning ------------------------------------------------------------------------------
    # predict_one, learn_one and predict_learn_one are MulticlassCore's (see learners/_core.py):
    # the usual case in C, the rest in these Python methods, the reference the C code follows.
    _learn_one_py = MulticlassLinearModel.learn_one

    def _predict_learn_one_py(self, x: dict, y: Any) -> Any:
        """Predict ``x`` as ``predict_one`` would, then learn ``(x, y)``; return the prediction."""
        store = self._store
        if store is not None and _model._speedups is not None:
            # the model in its store: straight to it (the store exists only where the learning
            # code is this class's, so nothing below is replaced by a subclass)
            if not self.averaged:
                got = self._learn_stored(store, x, y, None)
                return got if got is not _DECLINED else self._learn(x, y)
            t = self._n_seen
            if t:
                d = t if self.average_half_life is None else self._avg_div(t)
                both = store.avg_class_argmax(d, x, False)
                if both is not None:
                    if self._learn_stored(store, x, y, both[1]) is _DECLINED:
                        self._learn(x, y)
                    return both[0]
                self._release_store()
        if self.averaged:
            t = self._n_seen
            if t and _model._speedups is not None and not self._init.random:
                # predict_one's averaged argmax and _learn's plain argmax and norm, one pass
                d = self._avg_div(t)
                got = self._avg_argmax(d, x, False)
                if got is not None:
                    self._learn(x, y, got[1])
                    return got[0]
            prediction = self._predict_before_learning(x)
            self._learn(x, y)
            return prediction
        return self._learn(x, y)

    # -- the model in a native store -----------------------------------------------------------
    def _take_store(self) -> Any:
        """Move the model from its dicts into a new ``ClassStore`` and return it; None (the
        dicts kept) when it cannot (see
        :meth:`~stream_perceptron.learners._stored.NativeModelStore._new_store`)."""
        store = self._new_store(
            _model._speedups, MulticlassPerceptron,
            (self._dict_w, self._dict_b, self._dict_u, self._dict_ub),
        )  # fmt: skip
        if store is not None:
            self._dict_w = self._dict_b = self._dict_u = self._dict_ub = None
            self._store = store
        return store

    def _init_entries(self, c: Any, x: dict, t: int, log: UndoLog) -> None:
        wc = self._w[c]
        fresh = new_features(x, wc)
        if fresh:
            uc = self._u[c]
            for k, v in zip(fresh, self._init.draw(len(fresh))):
                log.put(wc, k, v)
                if self.averaged:
                    log.put(uc, k, uc.get(k, 0.0) + self._avg_coef(t) * v)

    def _learn(self, x: dict, y: Any, known: tuple[Any, float] | None = None) -> Any:
        """Learn ``(x, y)``; return the plain-weight prediction made before learning.
        ``known``: the plain ``(argmax, r)`` of ``x`` now, when the caller computed them.

        As ``Perceptron._learn``: R, the two classes' new weights, biases and averaging
        accumulators are computed and checked before anything is stored; a value that would
        not be finite raises :class:`ValueTooLargeError`, the model as it was. A class equal
        to ``y`` but of the other kind (``True`` and ``1``) raises :class:`LabelError`. A
        score that overflows is not stored: ``NaN`` never beats another score in the argmax
        (so the first class wins when all are ``NaN``)."""
        store = self._store
        if store is None and _model._speedups is not None:
            store = self._take_store()
        if store is not None and _model._speedups is not None:
            got = self._learn_stored(store, x, y, known)
            if got is not _DECLINED:
                return got
            known = None
        kind = y.__class__
        if kind is not str and (kind is not int or self._bool_classes):
            check_class_kind(self._w, y)
        t = self._n_seen + 1
        memo = self._memo
        if memo is not None:
            self._memo = None
        got = known
        if got is None and _model._speedups is not None and not self._init.random:
            # predict_one's argmax and norm when it was given this very dict, unchanged since,
            # and the model has not learned since; else computed
            if memo is not None:
                got = _model._speedups.recall(memo, x, t - 1)
            if got is None:
                got = _model._speedups.class_argmax(self._w, self._b, x)
        log = None
        if got is not None:
            y_hat = got[0]
            r = got[1]
            if not r < _INF:  # r >= 0, or NaN
                raise too_large("R (the largest input norm)")
        else:
            r = norm_of(x)
            if self._init.random:
                log = UndoLog(self._init.get_state())
                for c in self._w:
                    self._init_entries(c, x, t, log)
            try:
                y_hat = _argmax(self._scores(x, self._w, self._b))
            except BaseException:
                if log is not None:
                    log.undo(self._init)
                raise
        max_norm = r if r > self._max_norm else self._max_norm
        if y_hat == y and y_hat is not None and y in self._w:
            self._max_norm = max_norm
            self._n_seen = t
        else:
            try:
                self._update(x, y, y_hat, max_norm, t)
            except ValueTooLargeError:
                if log is not None:
                    log.undo(self._init)
                raise
        if self._renormalise_due(t):
            self._renormalise(t)
        return y_hat

    def _learn_stored(self, store: Any, x: dict, y: Any, known: tuple[Any, float] | None) -> Any:
        """:meth:`_learn` on the model in ``store``, to the last bit; ``_DECLINED`` (nothing
        learned, the model back in its dicts) when the store does not handle ``x``."""
        kind = y.__class__
        if kind is not str and (kind is not int or self._bool_classes):
            check_class_kind(store.classes, y)
        t = self._n_seen + 1
        memo = self._memo
        if memo is not None:
            self._memo = None
        got = known
        if got is None and memo is not None:
            got = _model._speedups.recall(memo, x, t - 1)  # type: ignore[union-attr]
        if got is None:
            got = store.class_argmax(x)
            if got is None:
                self._release_store()
                return _DECLINED
        y_hat = got[0]
        r = got[1]
        if not r < _INF:  # r >= 0, or NaN
            raise too_large("R (the largest input norm)")
        max_norm = r if r > self._max_norm else self._max_norm
        if y_hat == y and y_hat is not None and y in store.classes:
            self._max_norm = max_norm
            self._n_seen = t
        else:
            averaging = self._averaging(t)
            done = store.update(
                x, y, y_hat, self.lr, self._bias_step(max_norm),
                self._avg_coef(t) if averaging else None,
            )  # fmt: skip
            if done is None:  # not handled: the pure-Python update, on the dicts
                self._release_store()
                self._update(x, y, y_hat, max_norm, t)
            elif done is not True:
                raise too_large(done)
            else:
                if is_bool(y):
                    self._bool_classes = True
                self._n_mistakes += 1
                self._max_norm = max_norm
                self._n_seen = t
        if self._renormalise_due(t):
            self._renormalise(t)
        return y_hat

    def _bias_step(self, max_norm: float) -> float:
        """What an update adds to the bias of the true class (and takes from the predicted)."""
        if self._bias_mode == "learned":
            return self.lr
        if self._bias_mode == "r2":
            return max_norm * max_norm
        return 0.0

    def _renormalise(self, t: int) -> None:
        """Move the forgetting average's reference example up to ``t``: the same average, with
        coefficients back near 1 (see :class:`LinearHyperparameters`)."""
        factor = math.pow(self._beta, t - self._avg_ref)
        store = self._store
        if store is not None:
            store.rescale(factor)
        else:
            for c, uc in self._u.items():
                self._rescale(uc, factor)
                self._ub[c] = self._ub[c] * factor
        self._avg_ref = t

    def _update(self, x: dict, y: Any, y_hat: Any, max_norm: float, t: int) -> None:
        """The update of a mistake, every new value checked before any is stored."""
        lr = self.lr
        db = self._bias_step(max_norm)
        new_class = y not in self._w
        if new_class:
            wy: dict[Any, float] = {}
            uy: dict[Any, float] = {}
            by = uby = 0.0
            if self._init.random:  # the generator's draws are taken back by the caller's log
                for k, v in zip(fresh := new_features(x, wy), self._init.draw(len(fresh))):
                    wy[k] = v
                    if self.averaged:
                        uy[k] = uy.get(k, 0.0) + self._avg_coef(t) * v
        else:
            wy, uy, by, uby = self._w[y], self._u[y], self._b[y], self._ub[y]
        averaging = self._averaging(t)
        c = self._avg_coef(t) if averaging else 0
        try:
            by += db
            if averaging:
                uby += c * db
            if y_hat is None:
                bh = ubh = 0.0
                targets: tuple[Any, ...] = (wy, lr, uy, c * lr) if averaging else (wy, lr)
            else:
                bh = self._b[y_hat] + -db
                ubh = self._ub[y_hat] + c * -db if averaging else self._ub[y_hat]
                wh = self._w[y_hat]
                targets = (
                    (wy, lr, wh, -lr, uy, c * lr, self._u[y_hat], c * -lr)
                    if averaging
                    else (wy, lr, wh, -lr)
                )
        except OverflowError:
            raise too_large("a bias") from None
        if not (-_INF < by < _INF and -_INF < uby < _INF and -_INF < bh < _INF
                and -_INF < ubh < _INF):  # fmt: skip
            raise too_large("a bias")
        done = _model._speedups.axpy_finite(x, *targets) if _model._speedups is not None else None
        if done is None:
            done = add_scaled(None, x, *targets)
        if not done:
            raise too_large("a weight")
        if new_class:
            self._w[y] = wy
            self._u[y] = uy
            if is_bool(y):
                self._bool_classes = True
        self._b[y] = by
        self._ub[y] = uby
        if y_hat is not None:
            self._b[y_hat] = bh
            self._ub[y_hat] = ubh
        self._n_mistakes += 1
        self._max_norm = max_norm
        self._n_seen = t

    # -- dense blocks --------------------------------------------------------------------------
    #: The methods whose code the dense kernel reproduces: a subclass replacing any of them
    #: learns differently, so it is not dense-capable.
    _DENSE_REFERENCE = (
        "_learn", "_update", "_scores", "_average_scores", "_predict_scores", "predict_one",
        "predict_learn_one", "learn_one", "_predict_one_py", "_learn_one_py",
        "_predict_learn_one_py", "_learn_stored",
    )  # fmt: skip

    #: The methods whose code the store's path reproduces (a subclass replacing any of them
    #: keeps its model in dicts).
    _STORE_REFERENCE = (
        *_DENSE_REFERENCE, "_renormalise", "_bias_step", "_avg_coef", "_avg_div", "_averaging",
        "_add_class",
    )  # fmt: skip

    @property
    def dense_capable(self) -> bool:
        """Whether :meth:`learn_dense` can run: the C extension is built,
        ``init="zeros"``, a plain number as ``lr``, and the class does not replace the learning
        code the kernel reproduces."""
        return self._kernel_applies(MulticlassPerceptron) and _multiclass.supported(self)

    @property
    def sparse_capable(self) -> bool:
        """Whether :meth:`learn_dense` takes sparse rows too: whenever it can run."""
        return self.dense_capable
