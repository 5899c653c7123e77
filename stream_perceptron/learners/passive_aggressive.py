"""Passive-aggressive learners (Crammer et al. 2006): PA, PA-I and PA-II, binary and multi-class."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from stream_perceptron import native
from stream_perceptron.errors import ValueTooLargeError
from stream_perceptron.formats.sparse_rows import SparseRows
from stream_perceptron.lazy_numpy import np
from stream_perceptron.learners import _pa_kernel as _pa
from stream_perceptron.learners._linear import BinaryLinearModel, MulticlassLinearModel
from stream_perceptron.learners._maths import (
    add_scaled,
    argmax,
    check_class_kind,
    softmax,
    sparse_dot,
    sq_norm_of,
    too_large,
)
from stream_perceptron.learners._pa_blocks import PaBlockModel, PaMultiBlockModel
from stream_perceptron.learners._state import class_entries, pairs, registered, to_json_key
from stream_perceptron.learners.binary_blocks import BinaryBlocks
from stream_perceptron.learners.labels import BinaryLabels
from stream_perceptron.state import keyed, number

_INF = math.inf

# The dict API's C helpers, or None (the pure-Python loops, the reference).
_speedups = native.speedups

__all__ = ["PassiveAggressive", "MulticlassPassiveAggressive", "PA_VARIANTS", "PA_BIAS_MODES"]

PA_VARIANTS = ("pa", "pa1", "pa2")
PA_BIAS_MODES = ("learned", "none")


def _check(C: float, variant: str, bias: str) -> None:
    if variant not in PA_VARIANTS:
        raise ValueError(f"variant must be one of {PA_VARIANTS}, got {variant!r}")
    if bias not in PA_BIAS_MODES:
        raise ValueError(f"bias must be one of {PA_BIAS_MODES}, got {bias!r}")
    if isinstance(C, bool) or not isinstance(C, (int, float)) or not 0 < C < _INF:
        raise ValueError(f"C must be a positive finite number, got {C!r}")


def step_size(variant: str, C: float, loss: float, sq: float) -> float:
    """Crammer et al.'s step tau for a hinge ``loss`` > 0 and ``sq``, the squared norm of the
    update's direction: PA ``loss / sq``, PA-I ``min(C, loss / sq)`` (0 when ``sq`` is 0, as
    River), PA-II ``loss / (sq + 1 / (2C))``."""
    if variant == "pa2":
        return loss / (sq + 0.5 / C)
    if not sq > 0:
        return 0.0
    tau = loss / sq
    if variant == "pa1" and C < tau:
        return float(C)
    return tau


def _sq_dot(w: dict, x: dict) -> tuple[float, float]:
    """``(sq, dot)``: ``sum v*v`` over x and ``sum w[k]*v`` over x's keys in w, left folds
    from 0.0 in x's order; :class:`ValueTooLargeError` when the squared norm is not finite.
    The C helpers' ``dot_sq`` does the same to the last bit (this loop is the reference, and
    runs for what it declines: a value that is not a float or an int of at most 2**53)."""
    got = _speedups.dot_sq(w, x) if _speedups is not None else None
    if got is not None:
        sq, dot = got
        if not -_INF < sq < _INF:
            raise too_large("R (the largest input norm)")
        return sq, dot
    sq = dot = 0.0
    try:
        for k, v in x.items():
            sq += v * v
            wk = w.get(k)
            if wk is not None:
                dot += wk * v
    except OverflowError:
        raise too_large("R (the largest input norm)") from None
    if not -_INF < sq < _INF:
        raise too_large("R (the largest input norm)")
    return sq, dot


_NO_WEIGHTS: dict[Any, float] = {}


def _sq_norm(x: dict) -> float:
    """:func:`sq_norm_of` (the reference, and what runs for what the C helpers decline), the
    sum of squares taken from the helpers' ``dot_sq`` against no weights when they can."""
    got = _speedups.dot_sq(_NO_WEIGHTS, x) if _speedups is not None else None
    if got is None:
        return sq_norm_of(x)
    sq = got[0]
    if not -_INF < sq < _INF:
        raise too_large("R (the largest input norm)")
    return sq


@registered
class PassiveAggressive(PaBlockModel, BinaryBlocks, BinaryLinearModel):
    """Binary passive-aggressive classifier: the smallest change of ``w`` that gives the example
    a margin of 1 (Crammer et al. 2006), with River's ``PAClassifier`` arithmetic.

    The score is ``s = w.x + b``; with ``y`` in {-1, +1} the hinge loss is
    ``l = max(0, 1 - y*s)``. When ``l > 0`` the learner moves ``w += tau*y*x`` (and
    ``b += tau*y`` with ``bias="learned"``; the bias is not part of the norm, as in River), with
    ``tau = l / ||x||^2`` (``"pa"``), ``min(C, l / ||x||^2)`` (``"pa1"``) or
    ``l / (||x||^2 + 1/(2C))`` (``"pa2"``); otherwise it stays as it is (passive). A score of
    exactly 0 predicts the negative class. Unlike the perceptron, the step depends on the loss,
    so the scale of x matters.

    Parameters
    ----------
    C
        Aggressiveness of PA-I and PA-II: the largest step (PA-I), or the weight of the loss
        against the change (PA-II). Smaller C: more cautious updates, more robust to noise.
        Ignored by ``"pa"``.
    variant
        ``"pa"``, ``"pa1"`` (River's default ``mode=1``) or ``"pa2"``.
    bias
        ``"learned"`` (River's ``learn_intercept=True``) or ``"none"`` (the paper's PA).

    Attributes
    ----------
    weights
        Feature -> weight.
    bias
        The bias b.
    n_mistakes
        Updates made (examples whose margin was below 1).

    Examples
    --------
    >>> from stream_perceptron import PassiveAggressive
    >>> model = PassiveAggressive(C=1.0, variant="pa1")
    >>> for x, y in [({"a": 1.0}, True), ({"a": -2.0}, False), ({"a": 0.5, "b": 1.0}, False)]:
    ...     model.learn_one(x, y)
    >>> model.weights, model.bias
    ({'a': 0.5, 'b': -1.0}, 0.0)
    >>> model.predict_one({"a": 1.0}), model.predict_one({"b": 1.0})
    (True, False)

    References
    ----------
    K. Crammer, O. Dekel, J. Keshet, S. Shalev-Shwartz and Y. Singer, "Online
    passive-aggressive algorithms", Journal of Machine Learning Research 7, 2006.

    """

    def __init__(self, C: float = 1.0, variant: str = "pa1", bias: str = "learned") -> None:
        _check(C, variant, bias)
        self.C = C
        self.variant = variant
        self._bias_mode = bias
        self._labels = BinaryLabels()
        self._w: dict[Any, float] = {}
        self._b = 0.0
        self._init_counters()

    # -- learning ------------------------------------------------------------------------------
    def predict_learn_one(self, x: dict, y: Any) -> Any:
        """Predict ``x`` as ``predict_one`` would, then learn ``(x, y)``; return the prediction
        (decoded with the encoding ``y`` settles, as :class:`Perceptron` does)."""
        labels = self._labels
        if labels.settled:
            score = self._learn(x, labels.encode(y))
            return labels.positive if score > 0 else labels.negative
        saved = labels.get_state()
        sign, setting = labels.propose(y)
        labels.commit(setting)
        try:
            score = self._learn(x, sign)
        except ValueTooLargeError:
            self._labels = BinaryLabels.from_state(saved)
            raise
        return labels.decode(1 if score > 0 else -1)

    def _learn(self, x: dict, y: int) -> float:
        """Learn from ``x`` with sign ``y``; return the score before learning. Every new value
        is checked before any is stored (:class:`ValueTooLargeError`, the model as it was)."""
        sq, dot = _sq_dot(self._w, x)
        r = math.sqrt(sq)
        max_norm = r if r > self._max_norm else self._max_norm
        score = dot + self._b
        loss = 1.0 - y * score
        if loss > 0:  # NaN (an overflowing score): no update
            step = step_size(self.variant, self.C, loss, sq) * y
            b = self._b + step if self._bias_mode == "learned" else self._b
            if not -_INF < b < _INF:
                raise too_large("the bias")
            if not add_scaled(_speedups, x, self._w, step):
                raise too_large("a weight")
            self._b = b
            self._n_mistakes += 1
        self._max_norm = max_norm
        self._n_seen += 1
        return score

    def _plain_score(self, x: dict) -> float:
        """``sparse_dot(w, x) + b``; the C helpers' ``dot_norm`` gives the same dot."""
        got = _speedups.dot_norm(self._w, x) if _speedups is not None else None
        return (sparse_dot(self._w, x) if got is None else got[0]) + self._b

    # -- dense blocks -------------------------------------------------------------------------
    #: The methods whose code the C kernel reproduces: a subclass replacing any of them
    #: learns row by row.
    _DENSE_REFERENCE = (
        "_learn", "_score", "_plain_score", "predict_one", "predict_learn_one", "learn_one",
    )  # fmt: skip

    @property
    def dense_capable(self) -> bool:
        """Whether :meth:`learn_dense` can run: the C extension is built and the class does
        not replace the learning code the kernel reproduces."""
        return self._kernel_applies(PassiveAggressive)

    @property
    def sparse_capable(self) -> bool:
        """Whether :meth:`learn_dense` takes sparse rows too: whenever it can run."""
        return self.dense_capable

    def learn_dense(self, features: Sequence[Any], X: Any, signs: Any, /) -> np.ndarray:
        """Predict-then-learn each row of ``X`` exactly as the ``predict_learn_one`` loop over
        ``dict(zip(features, row))`` would, to the last bit (predictions, updates, weights and
        their key order, bias, counters, ``max_norm``), in C.

        ``features``: the distinct names of ``X``'s columns; ``X``: finite numbers, or sparse
        rows (a :class:`~stream_perceptron.formats.sparse_rows.SparseRows`, its slots indexing
        ``features``: each row learned as the dict of its own items); ``signs``:
        the signs the labels encode to (-1/+1, see :meth:`encode_block`), ``0`` for an
        unlabelled row, which is only predicted. Returns the predicted signs (int8; a
        ``memoryview`` for the C scanner's block or sparse rows, as :meth:`Perceptron.learn_dense
        <stream_perceptron.learners.Perceptron.learn_dense>`), each made before learning its
        row. Needs :attr:`dense_capable`. A row ``_learn`` would refuse
        raises :class:`ValueTooLargeError` (``row``: its index), the model as before the call.

        Examples
        --------
        >>> import numpy as np
        >>> model = PassiveAggressive(C=0.5, variant="pa1")
        >>> X = np.array([[1.0, 0.0], [-1.0, 2.0], [2.0, 1.0]])
        >>> model.learn_dense(["a", "b"], X, np.array([1, -1, 1])).tolist()
        [-1, -1, 1]
        >>> model.weights, model.bias, model.n_mistakes
        ({'a': 0.7, 'b': -0.4}, 0.3, 2)

        """
        self._require_dense()
        if isinstance(X, SparseRows):
            return _pa.learn_sparse(self, features, X, signs)
        return _pa.learn_dense(self, features, X, signs)

    # -- state (prediction and the model as numbers: BinaryLinearModel's) ---------------------
    def _state_payload(self) -> dict[str, Any]:
        return self._linear_payload()

    def _load_payload(self, state: dict[str, Any]) -> None:
        self._load_linear_payload(state)


@registered
class MulticlassPassiveAggressive(PaMultiBlockModel, MulticlassLinearModel):
    """Multi-class passive-aggressive classifier (Crammer et al. 2006, section 7): one weight
    vector per class, ``argmax_k w_k.x + b_k``.

    Learning ``(x, y)``: ``r`` is the best-scoring class other than ``y`` (the first on ties;
    a class seen for the first time scores 0), the loss ``l = max(0, 1 - (s_y - s_r))``. When
    ``l > 0``: ``w_y += tau*x``, ``w_r -= tau*x`` (biases by ``tau`` likewise with
    ``bias="learned"``), ``tau`` as in :class:`PassiveAggressive` with ``2*||x||^2``, the squared
    norm of the update's direction, in place of ``||x||^2``. Predictions are made with the
    classes known before learning (``None`` before the first).

    Parameters
    ----------
    C
        Aggressiveness of PA-I and PA-II (see :class:`PassiveAggressive`).
    variant
        ``"pa"``, ``"pa1"`` or ``"pa2"``.
    bias
        ``"learned"`` or ``"none"``.

    Examples
    --------
    >>> from stream_perceptron import MulticlassPassiveAggressive
    >>> model = MulticlassPassiveAggressive(variant="pa")
    >>> for x, y in [({"a": 1.0}, "red"), ({"b": 1.0}, "blue"), ({"a": 2.0}, "red")]:
    ...     model.learn_one(x, y)
    >>> model.predict_one({"a": 1.0}), model.predict_one({"b": 1.0})
    ('red', 'blue')

    """

    def __init__(self, C: float = 1.0, variant: str = "pa1", bias: str = "learned") -> None:
        _check(C, variant, bias)
        self.C = C
        self.variant = variant
        self._bias_mode = bias
        self._w: dict[Any, dict[Any, float]] = {}
        self._b: dict[Any, float] = {}
        self._init_counters()

    def _learn(self, x: dict, y: Any) -> Any:
        """Learn ``(x, y)``; return the prediction made before learning. Every new value is
        checked before any is stored (:class:`ValueTooLargeError`, the model as it was); a
        class equal to ``y`` but of the other kind (``True`` and ``1``) raises
        :class:`~stream_perceptron.errors.LabelError`."""
        check_class_kind(self._w, y)
        sq = _sq_norm(x)
        r = math.sqrt(sq)
        scores = self._plain_scores(x)
        y_hat = argmax(scores)
        rival = argmax({c: s for c, s in scores.items() if c != y})
        max_norm = r if r > self._max_norm else self._max_norm
        if rival is not None:
            loss = 1.0 - (scores.get(y, 0.0) - scores[rival])
            if loss > 0:
                self._update(x, y, rival, step_size(self.variant, self.C, loss, 2.0 * sq))
        self._max_norm = max_norm
        self._n_seen += 1
        if y not in self._w:  # a class seen for the first time, with no rival to move
            self._add_class(y)
        return y_hat

    def _update(self, x: dict, y: Any, rival: Any, tau: float) -> None:
        wy = self._w.get(y)
        new_class = wy is None
        if wy is None:
            wy = {}
        by = self._b.get(y, 0.0)
        br = self._b[rival]
        if self._bias_mode == "learned":
            by, br = by + tau, br - tau
            if not (-_INF < by < _INF and -_INF < br < _INF):
                raise too_large("a bias")
        if not add_scaled(_speedups, x, wy, tau, self._w[rival], -tau):
            raise too_large("a weight")
        if new_class:
            self._add_class(y)
            self._w[y] = wy
        self._b[y] = by
        self._b[rival] = br
        self._n_mistakes += 1

    def _add_class(self, c: Any) -> None:
        self._w[c] = {}
        self._b[c] = 0.0

    # -- dense blocks -------------------------------------------------------------------------
    #: The methods whose code the C kernel reproduces: a subclass replacing any of them
    #: learns row by row.
    _DENSE_REFERENCE = (
        "_learn", "_update", "_add_class", "_plain_scores", "predict_one", "predict_learn_one",
        "learn_one",
    )  # fmt: skip

    @property
    def dense_capable(self) -> bool:
        """Whether :meth:`learn_dense` can run: the C extension is built and the class does
        not replace the learning code the kernel reproduces."""
        return self._kernel_applies(MulticlassPassiveAggressive)

    @property
    def sparse_capable(self) -> bool:
        """Whether :meth:`learn_dense` takes sparse rows too: whenever it can run."""
        return self.dense_capable

    def learn_dense(self, features: Sequence[Any], X: Any, labels: Any, /) -> list[Any]:
        """Predict-then-learn each row of ``X`` exactly as the ``predict_learn_one`` loop over
        ``dict(zip(features, row))`` would (``predict_one`` for a row whose label is ``None``),
        to the last bit, in C; return the predictions. ``X``: finite numbers, one column per
        name of ``features``, or sparse rows (a
        :class:`~stream_perceptron.formats.sparse_rows.SparseRows`, as
        :meth:`PassiveAggressive.learn_dense`). Needs :attr:`dense_capable`. A row ``_learn``
        would refuse raises its error (:class:`ValueTooLargeError` with ``row``, or
        :class:`~stream_perceptron.errors.LabelError`), the model as before the call.

        Examples
        --------
        >>> import numpy as np
        >>> model = MulticlassPassiveAggressive(variant="pa")
        >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 0.5]])
        >>> model.learn_dense(["a", "b"], X, ["red", "blue", "red"])
        [None, 'red', 'blue']
        >>> model.classes, model.n_mistakes
        (['red', 'blue'], 2)

        """
        self._require_dense()
        if isinstance(X, SparseRows):
            return _pa.learn_sparse_multiclass(self, features, X, labels)
        return _pa.learn_dense_multiclass(self, features, X, labels)

    def _plain_scores(self, x: dict) -> dict[Any, float]:
        """``{c: sparse_dot(w[c], x) + b[c]}`` in class order; the C helpers' ``class_scores``
        gives the same dict."""
        got = _speedups.class_scores(self._w, self._b, x) if _speedups is not None else None
        return super()._plain_scores(x) if got is None else got

    def predict_one(self, x: dict, **kwargs: Any) -> Any:
        return argmax(self._plain_scores(x))

    def predict_proba_one(self, x: dict, **kwargs: Any) -> dict[Any, float]:
        return softmax(self._plain_scores(x))

    # -- state ---------------------------------------------------------------------------------
    def _state_payload(self) -> dict[str, Any]:
        return {
            "classes": [
                {"label": to_json_key(c), "weights": pairs(self._w[c]), "bias": self._b[c]}
                for c in self._w
            ]
        }

    def _load_payload(self, state: dict[str, Any]) -> None:
        for c, entry, field in class_entries(state):
            self._add_class(c)
            self._w[c] = keyed(entry["weights"], f"{field}.weights")
            self._b[c] = number(entry["bias"], f"{field}.bias")
