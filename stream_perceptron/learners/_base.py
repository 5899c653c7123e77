"""What every stream-perceptron learner shares: mini-batches as row loops, state, sparse maths."""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
from river import base

from stream_perceptron.errors import LabelError, StateError, ValueTooLargeError
from stream_perceptron.learners._init_weights import WeightInitializer
from stream_perceptron.learners.labels import BinaryLabels

__all__ = [
    "StreamClassifier",
    "DenseLearner",
    "SCHEMA_VERSION",
    "BIAS_MODES",
    "sigmoid",
    "softmax",
]

#: Version 2 added ``average_half_life`` (a hyperparameter, so in ``params``), ``avg_ref`` and
#: the passive-aggressive learners; a version 1 state is read as the same model (no forgetting
#: average, reference example 0).
SCHEMA_VERSION = 2
READABLE_SCHEMA_VERSIONS = (1, 2)
BIAS_MODES = ("learned", "r2", "none")


def sigmoid(s: float) -> float:
    """Logistic function, clamped like River's so that large scores give exactly 0 or 1."""
    if s < -30:
        return 0.0
    if s > 30:
        return 1.0
    return 1.0 / (1.0 + math.exp(-s))


def softmax(scores: dict[Any, float]) -> dict[Any, float]:
    """Softmax of a dict of scores (numerically stable)."""
    if not scores:
        return {}
    top = max(scores.values())
    exps = {k: math.exp(s - top) for k, s in scores.items()}
    total = sum(exps.values())
    return {k: e / total for k, e in exps.items()}


def norm(v: Iterable[float]) -> float:
    """Euclidean norm of the values."""
    return math.sqrt(math.fsum(value * value for value in v))


_INF = math.inf


def finite(v: Any) -> bool:
    """Whether the number ``v`` is finite (NaN and infinities are not; an int of any size is)."""
    return -_INF < v < _INF


def too_large(what: str) -> ValueTooLargeError:
    """The error of an example the learner refuses: learning it would make ``what`` non-finite."""
    return ValueTooLargeError(f"learning this example would make {what} non-finite")


def norm_of(x: dict) -> float:
    """R of ``x`` as the perceptrons compute it: ``sq += v * v`` in x's order (a plain left
    fold from 0.0, not ``sum()``, which compensates from Python 3.12 on), ``math.sqrt(sq)``.
    Raises :class:`ValueTooLargeError` when it is not finite (a value inf or NaN, squares
    overflowing, an int too large for a float)."""
    return math.sqrt(sq_norm_of(x))


def sq_norm_of(x: dict) -> float:
    """R squared as :func:`norm_of` computes it (before ``math.sqrt``), refused the same way
    (the square root of a finite sum of squares is finite, and only of one)."""
    sq = 0.0
    try:
        for v in x.values():
            sq += v * v
    except OverflowError:
        raise too_large("R (the largest input norm)") from None
    if not -_INF < sq < _INF:
        raise too_large("R (the largest input norm)")
    return sq


def sparse_dot(w: dict, x: dict) -> float:
    """``sum w[k]*v`` over x's keys in ``w``: a left fold from 0.0 in x's order (not ``sum()``,
    which compensates from Python 3.12 on), as every learner computes it."""
    dot = 0.0
    for k, v in x.items():
        wk = w.get(k)
        if wk is not None:
            dot += wk * v
    return dot


def argmax(scores: dict[Any, float]) -> Any:
    """The class of the highest score, the first on ties (``None`` when there is none); ``NaN``
    never beats another score."""
    best, best_score = None, -math.inf
    for c, s in scores.items():
        if best is None or s > best_score:
            best, best_score = c, s
    return best


def add_scaled(speedups: Any, x: dict, *targets: Any) -> bool:
    """``d[k] = d.get(k, 0.0) + a * v`` for every item of ``x`` (in x's order) and every pair
    ``d, a`` of ``targets`` (``d1, a1, d2, a2, ...``: distinct dicts), all or nothing: False,
    nothing written, when a new value would not be finite (or an int product does not fit a
    float). ``speedups``: the C helpers (``None``: this loop, the reference), whose
    ``axpy_finite`` does the same to the last bit."""
    if speedups is not None:
        done = speedups.axpy_finite(x, *targets)
        if done is not None:
            return bool(done)
    updates = []
    try:
        for i in range(0, len(targets), 2):
            d, a = targets[i], targets[i + 1]
            new = [(k, d.get(k, 0.0) + a * v) for k, v in x.items()]
            for _, value in new:
                if not -_INF < value < _INF:
                    return False
            updates.append((d, new))
    except OverflowError:
        return False
    for d, new in updates:
        for k, value in new:
            d[k] = value
    return True


BOOL_TYPES = (bool, np.bool_)  # labels that are booleans (numpy's too)


def check_class_kind(classes: dict, y: Any) -> None:
    """Raise :class:`LabelError` when ``y`` is a boolean and an equal class (``1`` for
    ``True``, ``0`` for ``False``) is not, or the other way round: equal dict keys, but the
    README's booleans are their own classes. The class is refused, not merged."""
    if y.__class__ is str or y is None:
        return
    is_bool = isinstance(y, BOOL_TYPES)
    if not is_bool:
        try:
            if not (y == 0 or y == 1):
                return
        except (TypeError, ValueError):  # an array-like label: not comparable to a bool
            return
    if y not in classes:
        return
    for c in classes:
        if c == y:
            if isinstance(c, BOOL_TYPES) != is_bool:
                raise LabelError(
                    f"label {y!r} ({type(y).__name__}) is equal to the class {c!r}"
                    f" ({type(c).__name__}): booleans and numbers are distinct classes"
                )
            return


class UndoLog:
    """What a random init inserted into the model before an example was checked: taken back
    (the keys removed, the generator's state restored) when the example is refused."""

    __slots__ = ("entries", "rng_state")

    def __init__(self, rng_state: Any) -> None:
        self.entries: list[tuple[dict, Any, Any]] = []
        self.rng_state = rng_state

    def put(self, d: dict, k: Any, value: Any) -> None:
        self.entries.append((d, k, d.get(k, _MISSING)))
        d[k] = value

    def undo(self, initializer: WeightInitializer) -> None:
        for d, k, old in reversed(self.entries):
            if old is _MISSING:
                del d[k]
            else:
                d[k] = old
        initializer.set_state(self.rng_state)


_MISSING = object()


def to_json_key(k: Any) -> Any:
    """A feature name or label as a JSON scalar (numpy scalars become Python ones)."""
    if isinstance(k, np.generic):
        k = k.item()
    if k is None or isinstance(k, (str, int, float, bool)):
        return k
    raise StateError(f"cannot save the key {k!r} of type {type(k).__name__} as JSON")


def pairs(d: dict) -> list[list[Any]]:
    """A dict as a JSON list of ``[key, value]`` pairs, keeping non-string keys' types."""
    return [[to_json_key(k), v] for k, v in d.items()]


@runtime_checkable
class DenseLearner(Protocol):
    """A learner that can also learn a dense block of rows at once (the engine's dense path).

    ``learn_dense(features, X, labels)`` predicts-then-learns each row of ``X`` (float64,
    finite, one column per name of ``features``) and leaves the learner exactly as the
    ``predict_learn_one`` loop over ``dict(zip(features, row))`` would, returning the
    predictions; a row whose label says "unlabelled" is only predicted, as ``predict_one``
    would. It may be called only while ``dense_capable`` is true. When that loop would refuse
    a row (:class:`~stream_perceptron.errors.ValueTooLargeError`, or a
    :class:`~stream_perceptron.errors.LabelError` it raises), ``learn_dense`` raises that
    error (``ValueTooLargeError.row``: the row) and the learner is as it was before the call.
    """

    @property
    def dense_capable(self) -> bool: ...

    def learn_dense(self, features: Sequence[Any], X: Any, labels: Any, /) -> Any: ...


def overrides(cls: type, base: type, names: Iterable[str]) -> bool:
    """Whether ``cls`` (a subclass of ``base``) replaces any of the methods ``names``."""
    return any(getattr(cls, name) is not getattr(base, name) for name in names)


class StreamClassifier(base.MiniBatchClassifier):
    """Base of the learners: River's mini-batch classifier contract, implemented exactly.

    ``learn_many`` is a ``learn_one`` loop in row order, so a mini-batch never changes what the
    model learns. Subclasses implement ``learn_one``, ``predict_proba_one``, ``_state_payload``
    and ``_load_payload``.
    """

    _n_seen: int
    _n_mistakes: int
    _max_norm: float
    _bias_mode: str

    # The ``bias`` hyperparameter is kept as ``_bias_mode``: ``bias`` is the learned bias.
    _param_attributes: dict[str, str] = {"bias": "_bias_mode"}

    def _init_counters(self) -> None:
        self._n_seen = 0
        self._n_mistakes = 0
        self._max_norm = 0.0

    # What ``predict_one`` computed for the ``learn_one`` that usually follows on the same dict:
    # ``(x, kernel result with its snapshot of x's items, n_seen then)``. ``learn_one`` uses it
    # only for that very dict, unchanged, with the model unchanged since (every learn bumps
    # ``n_seen``). Never saved: not in :meth:`get_state`, pickles or deep copies.
    _memo: tuple[Any, ...] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_memo", None)
        return state

    def _get_params(self) -> dict[str, Any]:
        return {
            name: getattr(self, self._param_attributes.get(name, name))
            for name in inspect.signature(type(self).__init__).parameters
            if name != "self"
        }

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._get_params().items())
        return f"{type(self).__name__}({args})"

    @property
    def bias_mode(self) -> str:
        """The ``bias`` hyperparameter: ``"learned"``, ``"r2"`` or ``"none"``."""
        return self._bias_mode

    # -- counters shared by every learner ------------------------------------------------------
    @property
    def n_seen(self) -> int:
        """Number of labelled examples learned from."""
        return self._n_seen

    @property
    def n_mistakes(self) -> int:
        """Number of mistakes made while learning (the number of updates for perceptrons)."""
        return self._n_mistakes

    @property
    def max_norm(self) -> float:
        """R, the largest input norm seen so far."""
        return self._max_norm

    def geometric_margins(self, examples: Iterable[tuple[dict, Any]]) -> list[float]:
        """``geometric_margin(x, y)`` of each example, computed together (what the model's
        norms take is computed once)."""
        return [self.geometric_margin(x, y) for x, y in examples]  # type: ignore[attr-defined]

    # -- what every learner has ----------------------------------------------------------------
    def _predict_before_learning(self, x: dict) -> Any:
        """``predict_one(x)`` for a ``predict_learn_one`` that learns next: an int feature past
        float's range, which learning would refuse too, is refused here the same way."""
        try:
            return self.predict_one(x)
        except OverflowError:
            raise too_large("R (the largest input norm)") from None

    def predict_learn_one(self, x: dict, y: Any) -> Any:
        """Predict ``x`` as ``predict_one`` would, then learn ``(x, y)``; return the prediction
        (the engine's prequential step: the learners do both in one pass where they can)."""
        prediction = self.predict_one(x)
        self.learn_one(x, y)
        return prediction

    @property
    def weights(self) -> Any:
        """The learned weights: ``{feature: w}``, or ``{class: {feature: w}}``."""
        raise NotImplementedError

    @property
    def bias(self) -> Any:
        """The learned bias: a number, or ``{class: b}``."""
        raise NotImplementedError

    # -- dense blocks (see DenseLearner) --------------------------------------------------------
    @property
    def dense_capable(self) -> bool:
        """Whether :meth:`learn_dense` can run: the C extension is built and a kernel handles
        this learner's configuration. False here; the perceptrons say when."""
        return False

    def learn_dense(self, features: Sequence[Any], X: Any, labels: Any, /) -> Any:
        """Predict-then-learn a dense block of rows (see :class:`DenseLearner`)."""
        raise NotImplementedError(f"{type(self).__name__} has no dense block learning")

    #: The methods whose code a class's C kernel reproduces (a subclass replacing any of them
    #: learns row by row); see :meth:`_kernel_applies`.
    _DENSE_REFERENCE: tuple[str, ...] = ()

    def _kernel_applies(self, kernel_class: type) -> bool:
        """Whether ``kernel_class``'s C kernel can learn for this object: the extension is
        built and its class (a subclass of ``kernel_class``) replaces none of the
        ``_DENSE_REFERENCE`` methods. The learners' ``dense_capable`` starts here."""
        from stream_perceptron import native

        return native.has_dense() and not overrides(
            type(self), kernel_class, self._DENSE_REFERENCE
        )

    def _require_dense(self) -> None:
        """What a ``learn_dense`` checks first: RuntimeError without the C kernels, ValueError
        for a configuration they do not handle (not :attr:`dense_capable`)."""
        if not self.dense_capable:
            from stream_perceptron import native

            if not native.has_dense():
                raise RuntimeError(f"the C kernel is unavailable: {native.dense_error}")
            raise ValueError(f"learn_dense does not support {self!r}")

    # -- mini-batches --------------------------------------------------------------------------
    def learn_many(self, X: Any, y: Any, **kwargs: Any) -> None:
        """Learn from the rows of ``X`` in order: exactly a ``learn_one`` loop."""
        for x, label in zip(_rows(X), _labels(y), strict=True):
            self.learn_one(x, label)

    def predict_many(self, X: Any) -> Any:
        """``predict_one`` for each row (a pandas Series when ``X`` is a DataFrame)."""
        predictions = [self.predict_one(x) for x in _rows(X)]
        if _is_dataframe(X):
            import pandas as pd

            return pd.Series(predictions, index=X.index, dtype=object)
        return predictions

    def predict_proba_many(self, X: Any) -> Any:
        """``predict_proba_one`` for each row (a pandas DataFrame when ``X`` is one)."""
        probas = [self.predict_proba_one(x) for x in _rows(X)]
        if _is_dataframe(X):
            import pandas as pd

            return pd.DataFrame(probas, index=X.index).fillna(0.0)
        return probas

    # -- state ---------------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        """The whole learner as a JSON-serialisable dict (see :func:`from_state`)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "learner": type(self).__name__,
            "params": self._get_params(),
            "n_seen": self._n_seen,
            "n_mistakes": self._n_mistakes,
            "max_norm": self._max_norm,
            **self._state_payload(),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> StreamClassifier:
        """Rebuild a learner from :meth:`get_state`; it then predicts and learns identically."""
        from stream_perceptron.learners import LEARNERS

        if not isinstance(state, dict):
            raise StateError("a learner state must be a JSON object")
        version = state.get("schema_version")
        if version not in READABLE_SCHEMA_VERSIONS or isinstance(version, bool):
            raise StateError(
                f"unsupported state schema_version {version!r}"
                f" (this release reads {', '.join(map(str, READABLE_SCHEMA_VERSIONS))})"
            )
        name = state.get("learner")
        klass = LEARNERS.get(name) if isinstance(name, str) else None
        if klass is None or (cls is not StreamClassifier and klass is not cls):
            raise StateError(f"the state holds a {name!r}, not a {cls.__name__}")
        try:
            model = klass(**state["params"])
            model._n_seen = int(state["n_seen"])
            model._n_mistakes = int(state["n_mistakes"])
            model._max_norm = float(state["max_norm"])
            model._load_payload(state)
        except (KeyError, TypeError, ValueError) as e:
            raise StateError(f"corrupt {name} state: {e!r}") from e
        return model

    def _state_payload(self) -> dict[str, Any]:
        raise NotImplementedError

    def _load_payload(self, state: dict[str, Any]) -> None:
        raise NotImplementedError


class MulticlassClassifier(StreamClassifier):
    """Base of the multi-class learners: ``learn_one`` is ``_learn`` (which returns the
    prediction made before learning)."""

    @property
    def _multiclass(self) -> bool:
        return True

    def learn_one(self, x: dict, y: Any) -> None:
        self._learn(x, y)

    def predict_learn_one(self, x: dict, y: Any) -> Any:
        """Predict ``x`` as ``predict_one`` would, then learn ``(x, y)``; return the prediction."""
        return self._learn(x, y)

    def _learn(self, x: dict, y: Any) -> Any:
        raise NotImplementedError


class BinaryLinearModel(StreamClassifier):
    """What the binary linear rules ``s = w.x + b`` share (the perceptron and the PA learner):
    labels mapped to -1/+1 by :class:`BinaryLabels`, ``_learn(x, sign)`` returning the score
    before learning, and the model as numbers. ``_score`` is the score predictions use."""

    _labels: BinaryLabels
    _w: dict[Any, float]
    _b: float

    def learn_one(self, x: dict, y: Any) -> None:
        labels = self._labels
        if labels.settled:  # the usual case: the encoding cannot change
            self._learn(x, labels.encode(y))
            return
        sign, setting = labels.propose(y)
        self._learn(x, sign)
        labels.commit(setting)  # once learned: a refused example leaves the encoding open

    def _learn(self, x: dict, y: int) -> float:
        raise NotImplementedError

    def _plain_score(self, x: dict) -> float:
        return sparse_dot(self._w, x) + self._b

    def _score(self, x: dict) -> float:
        return self._plain_score(x)

    def predict_one(self, x: dict, **kwargs: Any) -> Any:
        return self._labels.decode(1 if self._score(x) > 0 else -1)

    def predict_proba_one(self, x: dict, **kwargs: Any) -> dict[Any, float]:
        p = sigmoid(self._score(x))
        return {self._labels.negative: 1.0 - p, self._labels.positive: p}

    @property
    def weights(self) -> dict[Any, float]:
        """Feature -> weight (a copy)."""
        return dict(self._w)

    @property
    def bias(self) -> float:
        """The learned bias b (the ``bias`` hyperparameter is :attr:`bias_mode`)."""
        return self._b

    @property
    def weight_norm(self) -> float:
        """||w||, the bias excluded."""
        return norm(self._w.values())

    def margin(self, x: dict, y: Any) -> float:
        """Functional margin ``y * (w.x + b)`` of ``(x, y)`` under the current weights."""
        return self._labels.encode_known(y) * self._plain_score(x)

    def geometric_margin(self, x: dict, y: Any) -> float:
        """Signed distance of ``x`` to the hyperplane, positive when on ``y``'s side."""
        n = self.weight_norm
        return self.margin(x, y) / n if n else 0.0

    def geometric_margins(self, examples: Iterable[tuple[dict, Any]]) -> list[float]:
        """``geometric_margin`` of each example, ||w|| computed once."""
        n = self.weight_norm
        return [self.margin(x, y) / n if n else 0.0 for x, y in examples]

    def _linear_payload(self) -> dict[str, Any]:
        return {"labels": self._labels.get_state(), "weights": pairs(self._w), "bias": self._b}

    def _load_linear_payload(self, state: dict[str, Any]) -> None:
        self._labels = BinaryLabels.from_state(state["labels"])
        self._w = {k: float(v) for k, v in state["weights"]}
        self._b = float(state["bias"])


class MulticlassLinearModel(MulticlassClassifier):
    """What the multi-class linear rules ``argmax_k w_k.x + b_k`` share (the multi-class
    perceptron and PA learner): the model as numbers, margins from ``_plain_scores``."""

    _w: dict[Any, dict[Any, float]]
    _b: dict[Any, float]

    def _weight_dicts(self) -> tuple[dict[Any, dict[Any, float]], dict[Any, float]]:
        """The weights and biases, to read (a learner keeping them elsewhere builds them)."""
        return self._w, self._b

    def _plain_scores(self, x: dict) -> dict[Any, float]:
        w, b = self._weight_dicts()
        return {c: sparse_dot(wc, x) + b[c] for c, wc in w.items()}

    @property
    def classes(self) -> list[Any]:
        """Classes in the order first seen."""
        return list(self._w)

    @property
    def weights(self) -> dict[Any, dict[Any, float]]:
        """Class -> (feature -> weight) (a copy)."""
        return {c: dict(wc) for c, wc in self._weight_dicts()[0].items()}

    @property
    def bias(self) -> dict[Any, float]:
        """Class -> bias (a copy)."""
        return dict(self._weight_dicts()[1])

    @property
    def weight_norm(self) -> dict[Any, float]:
        """Class -> ||w_class||."""
        return {c: norm(wc.values()) for c, wc in self._weight_dicts()[0].items()}

    def margin(self, x: dict, y: Any) -> float:
        """Score of ``y`` minus the best other score (``-inf`` when ``y`` is unknown)."""
        return class_margins(self._plain_scores(x), y, self._weight_dicts()[0])[0]

    def geometric_margin(self, x: dict, y: Any) -> float:
        """Distance of ``x`` to the boundary between ``y`` and its best rival, signed."""
        return class_margins(self._plain_scores(x), y, self._weight_dicts()[0])[1]

    def geometric_margins(self, examples: Iterable[tuple[dict, Any]]) -> list[float]:
        """``geometric_margin`` of each example, each pair of classes' distance computed once."""
        distances: dict[tuple[Any, Any], float] = {}
        w = self._weight_dicts()[0]
        return [class_margins(self._plain_scores(x), y, w, distances)[1] for x, y in examples]


#: How far (in half-lives) the forgetting average's reference time may lag before its
#: accumulators are rescaled: its coefficients reach 2**RENORMALISE_HALF_LIVES at most.
RENORMALISE_HALF_LIVES = 256

#: The shortest half-life the forgetting average can take: ``beta = 2**(-1/N)`` and its inverse
#: must stay finite and non-zero, and one example's coefficient ``2**(1/N)`` no larger than
#: the ``2**RENORMALISE_HALF_LIVES`` the renormalisation keeps the others under.
MIN_HALF_LIFE = 1.0 / RENORMALISE_HALF_LIVES


def check_half_life(value: object) -> str | None:
    """Why ``value`` cannot be an ``average_half_life`` (None when it can): the one rule the
    constructor and the ``--average-half-life`` flag both apply.

    Examples
    --------
    >>> check_half_life(700.0) is None
    True
    >>> check_half_life(1e-20)
    'must be a finite number of examples from 0.00390625 on'

    """
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not MIN_HALF_LIFE <= value < math.inf
    ):
        return f"must be a finite number of examples from {MIN_HALF_LIFE:g} on"
    return None


class LinearHyperparameters:
    """The hyperparameters both perceptrons share, checked and stored under their own names.

    Averaging, kept lazily in ``_u``/``_ub`` beside the weights ``_w``/``_b``. The average
    after ``t`` examples is ``w - u / D(t)``, where an update ``delta`` made at example ``tau``
    adds ``c(tau) * delta`` to ``u``:

    * the plain average of the weight vectors after examples 1..t (Freund and Schapire):
      ``c(tau) = tau - 1``, ``D(t) = t``;
    * the forgetting average (``average_half_life`` N): ``a_t = beta*a_{t-1} + (1-beta)*w_t``
      with ``beta = 2**(-1/N)``, ``a_0 = 0``, which is ``w_t - sum_tau beta**(t+1-tau) *
      delta_tau``: ``c(tau) = beta**(ref - tau)`` and ``D(t) = beta**(ref - t - 1)``, ``ref``
      a reference example (``_avg_ref``) moved up to ``t`` (and ``u`` multiplied by
      ``beta**(t - ref)``) every ``RENORMALISE_HALF_LIVES * N`` examples, so that no
      coefficient passes ``2**256``. An update stays O(features of x); the rescaling is
      O(model) once per 256 half-lives.
    """

    average_half_life: float | None
    _avg_ref: int
    _beta: float

    def _set_hyperparameters(
        self,
        lr: float,
        bias: str,
        init: str,
        seed: int | None,
        averaged: bool,
        average_half_life: float | None = None,
    ) -> None:
        if bias not in BIAS_MODES:
            raise ValueError(f"bias must be one of {BIAS_MODES}, got {bias!r}")
        if not lr > 0:
            raise ValueError(f"lr must be positive, got {lr!r}")
        if average_half_life is not None:
            problem = check_half_life(average_half_life)
            if problem is not None:
                raise ValueError(
                    f"average_half_life {problem} (or None), got {average_half_life!r}"
                )
            if not averaged:
                raise ValueError("average_half_life needs averaged=True")
        self.lr = lr
        self._bias_mode = bias
        self.init = init
        self.seed = seed
        self.averaged = averaged
        self.average_half_life = average_half_life
        self._init = WeightInitializer(init, seed)
        self._avg_ref = 0
        self._beta = 1.0 if average_half_life is None else 2.0 ** (-1.0 / average_half_life)

    def _avg_coef(self, t: int) -> float:
        """``c(t)``: what an update made at example ``t`` adds to ``u``, per unit of change."""
        if self.average_half_life is None:
            return t - 1
        return math.pow(self._beta, self._avg_ref - t)

    def _avg_div(self, t: int) -> float:
        """``D(t)``: the divisor of ``u`` in the average after ``t >= 1`` examples."""
        if self.average_half_life is None:
            return t
        return math.pow(self._beta, self._avg_ref - t - 1)

    def _averaging(self, t: int) -> bool:
        """Whether an update at example ``t`` changes ``u`` (the plain average's ``c(1)`` is 0)."""
        return self.averaged and (t > 1 or self.average_half_life is not None)

    def _renormalise_due(self, t: int) -> bool:
        half_life = self.average_half_life
        return half_life is not None and t - self._avg_ref >= RENORMALISE_HALF_LIVES * half_life

    @staticmethod
    def _rescale(u: dict[Any, float], factor: float) -> None:
        for k, v in u.items():
            u[k] = v * factor


def class_margins(
    scores: dict[Any, float],
    y: Any,
    vectors: dict[Any, dict[Any, float]],
    distances: dict[tuple[Any, Any], float] | None = None,
) -> tuple[float, float]:
    """Functional margin (score of ``y`` minus the best other score) and geometric margin (that
    divided by the distance between the two classes' vectors) of a multi-class linear rule.
    ``distances``: a cache of those distances, for many examples under the same vectors."""
    if y not in scores:
        return -math.inf, -math.inf
    if len(scores) < 2:
        return math.inf, math.inf
    rival = max((c for c in scores if c != y), key=scores.__getitem__)
    functional = scores[y] - scores[rival]
    distance = None if distances is None else distances.get((y, rival))
    if distance is None:
        wy, wr = vectors[y], vectors[rival]
        distance = norm(wy.get(k, 0.0) - wr.get(k, 0.0) for k in wy.keys() | wr.keys())
        if distances is not None:
            distances[(y, rival)] = distance
    return functional, (functional / distance if distance else 0.0)


def _is_dataframe(X: Any) -> bool:
    # Duck-typed on purpose (River's mini-batch API takes pandas frames; pandas is optional).
    return hasattr(X, "columns") and hasattr(X, "itertuples")


def _rows(X: Any) -> Iterator[dict]:
    """Rows of a DataFrame, 2-D array or iterable of dicts, as sparse dicts (NaN = missing)."""
    if _is_dataframe(X):
        columns = list(X.columns)
        for row in X.itertuples(index=False, name=None):
            yield {c: v for c, v in zip(columns, row) if v == v and v is not None}
    elif isinstance(X, np.ndarray):
        for row in X:
            yield {j: float(v) for j, v in enumerate(row) if v == v}
    else:
        yield from X


def _labels(y: Any) -> Iterable[Any]:
    if hasattr(y, "tolist"):  # a pandas Series or numpy array, duck-typed like _is_dataframe
        return y.tolist()
    return y
