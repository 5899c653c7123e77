"""What every stream-perceptron learner shares: River's mini-batch classifier contract (the
mini-batches as row loops, pandas frames duck-typed), the counters, the dense-block protocol,
and the state as JSON (see :mod:`stream_perceptron.learners._state`)."""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from river import base

from stream_perceptron.errors import StateError
from stream_perceptron.formats.base import DenseBatch
from stream_perceptron.lazy_numpy import np
from stream_perceptron.learners._init_weights import WeightInitializer
from stream_perceptron.learners._maths import check_class_kind, too_large
from stream_perceptron.learners._state import LEARNERS, READABLE_SCHEMA_VERSIONS, SCHEMA_VERSION
from stream_perceptron.learners.block_learning import BlockResult, learn_multiclass_block
from stream_perceptron.state import count, number, short

__all__ = ["DenseLearner", "MulticlassClassifier", "StreamClassifier", "UndoLog", "overrides"]


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

    def learn_block(
        self, dense: DenseBatch, label_of: Mapping[bytes, Any], /, *, atomic: bool = False
    ) -> BlockResult | None: ...


#: What :func:`overrides` answered, per class (weakly held: a class made and dropped by a test
#: goes with it): ``{(base, names): answer}``. A class's methods are set when it is made (the
#: learners' are not patched at run time), so the answer holds; the block path asks on every
#: block, which was 1-2 % of the differential fuzz's CPU.
_OVERRIDES: weakref.WeakKeyDictionary[type, dict[tuple[type, tuple[str, ...]], bool]] = (
    weakref.WeakKeyDictionary()
)


def overrides(cls: type, base: type, names: Iterable[str]) -> bool:
    """Whether ``cls`` (a subclass of ``base``) replaces any of the methods ``names``."""
    key = (base, tuple(names))
    known = _OVERRIDES.get(cls)
    if known is None:
        known = _OVERRIDES[cls] = {}
    answer = known.get(key)
    if answer is None:
        answer = known[key] = any(getattr(cls, name) is not getattr(base, name) for name in key[1])
    return answer


#: The names of each class's ``__init__`` parameters, ``self`` left out (weakly held, as
#: :data:`_OVERRIDES`): :meth:`StreamClassifier._get_params` asked inspect.signature on every
#: get_state(), about half of a small model's (30 of 60 us).
_INIT_PARAMETERS: weakref.WeakKeyDictionary[type, tuple[str, ...]] = weakref.WeakKeyDictionary()


def _init_parameters(cls: type[StreamClassifier]) -> tuple[str, ...]:
    names = _INIT_PARAMETERS.get(cls)
    if names is None:
        names = _INIT_PARAMETERS[cls] = tuple(
            name for name in inspect.signature(cls.__init__).parameters if name != "self"
        )
    return names


#: Each class's ``__init__`` defaults by parameter name (weakly held): from_state() asked
#: inspect.signature on every call, more than half of a small model's (21 of 37 us), and a
#: shared-model worker rebuilds a learner from each mixture it reads.
_INIT_DEFAULTS: weakref.WeakKeyDictionary[type, dict[str, Any]] = weakref.WeakKeyDictionary()


def _init_defaults(cls: type[StreamClassifier]) -> dict[str, Any]:
    defaults = _INIT_DEFAULTS.get(cls)
    if defaults is None:
        parameters = inspect.signature(cls.__init__).parameters
        defaults = _INIT_DEFAULTS[cls] = {k: p.default for k, p in parameters.items()}
    return defaults


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
            for name in _init_parameters(type(self))
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

    def check_label(self, y: Any) -> None:
        """Raise the :class:`~stream_perceptron.errors.LabelError` learning label ``y`` would
        raise now, changing nothing (the engine's refusal order asks it, see
        :func:`stream_perceptron.engine.outcomes.refusal`). Here every label is taken."""

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

    @property
    def sparse_capable(self) -> bool:
        """Whether :meth:`learn_dense` also takes sparse rows (a
        :class:`~stream_perceptron.formats.sparse_rows.SparseRows` as ``X``, its slots
        indexing ``features``): the engine then asks the parser for sparse blocks too. False
        here; the learners that can say when."""
        return False

    def learn_dense(self, features: Sequence[Any], X: Any, labels: Any, /) -> Any:
        """Predict-then-learn a dense block of rows (see :class:`DenseLearner`)."""
        raise NotImplementedError(f"{type(self).__name__} has no dense block learning")

    def learn_block(
        self, dense: DenseBatch, label_of: Mapping[bytes, Any], /, *, atomic: bool = False
    ) -> BlockResult | None:
        """The engine's block path: a parsed block (``(names, X, raw label cells)``, each
        cell's label in ``label_of``) predicted and learned whole, its labels encoded as this
        learner encodes them, and what the engine needs of it; ``None``, the learner as it
        was, when the block is to go the per-record way (a row refused; with ``atomic``, a
        label outside the encoding too). Only while :attr:`dense_capable` is true."""
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
        if (
            klass is None
            or not issubclass(klass, StreamClassifier)
            or (cls is not StreamClassifier and klass is not cls)
        ):
            raise StateError(f"the state holds a {name!r}, not a {cls.__name__}")
        try:
            params = state.get("params")
            if not isinstance(params, dict):
                raise StateError(f"params is {short(params)}, not the hyperparameters")
            defaults = _init_defaults(klass)
            for key, value in params.items():  # finite; the constructor checks the range
                default = defaults.get(key)
                numeric = isinstance(default, (int, float)) and not isinstance(default, bool)
                if numeric or isinstance(value, (int, float)) and not isinstance(value, bool):
                    number(value, f"params.{key}")
            try:
                model = klass(**params)
            except (TypeError, ValueError, OverflowError) as e:
                raise StateError(f"params: {e}") from None
            # a checkpoint is input: every count and number checked (what a NaN or a count
            # past n_seen would do shows only later, in predictions and a failed save)
            model._n_seen = n_seen = count(state.get("n_seen"), "n_seen")
            model._n_mistakes = count(state.get("n_mistakes"), "n_mistakes", n_seen, "n_seen")
            model._max_norm = number(state.get("max_norm"), "max_norm", 0.0)
            model._load_payload(state)
        except StateError as e:
            raise StateError(f"corrupt {name} state: {e}") from None
        except KeyError as e:
            raise StateError(f"corrupt {name} state: the field {e} is missing") from None
        except (TypeError, ValueError, AttributeError, IndexError) as e:
            raise StateError(f"corrupt {name} state: {e!r}") from None
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

    def check_label(self, y: Any) -> None:
        # the one label a multi-class learner refuses: a boolean equal to a number class
        check_class_kind(dict.fromkeys(self.classes), y)  # type: ignore[attr-defined]

    def _learn(self, x: dict, y: Any) -> Any:
        raise NotImplementedError

    def learn_block(
        self, dense: DenseBatch, label_of: Mapping[bytes, Any], /, *, atomic: bool = False
    ) -> BlockResult | None:
        return learn_multiclass_block(self, dense, label_of)


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
