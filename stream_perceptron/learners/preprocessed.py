"""A learner with its features hashed, standardised and/or mapped to random Fourier features
first, as one River classifier."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

from stream_perceptron.errors import StateError
from stream_perceptron.formats.base import DenseBatch
from stream_perceptron.formats.sparse_rows import SparseRows
from stream_perceptron.lazy_numpy import np
from stream_perceptron.learners._base import StreamClassifier
from stream_perceptron.learners._state import SCHEMA_VERSION, registered
from stream_perceptron.learners.binary_blocks import BinaryBlocks
from stream_perceptron.learners.block_learning import (
    BlockResult,
    learn_binary_block,
    learn_multiclass_block,
)
from stream_perceptron.learners.fourier import RandomFourierFeatures
from stream_perceptron.learners.hashing import FeatureHasher
from stream_perceptron.learners.perceptron import Perceptron
from stream_perceptron.learners.scaling import Standardizer

#: A binary block's signs (int8 -1/0/+1 as bytes) to one byte a row: learned (1) or not (0).
_LEARNED = bytes([0, 1] + [1] * 254)

__all__ = ["Preprocessed", "SCALES", "base_learner"]

SCALES = (None, "standard")


def base_learner(learner: Any) -> Any:
    """The learner that does the learning: ``learner.model`` for a :class:`Preprocessed`."""
    return learner.model if isinstance(learner, Preprocessed) else learner


@registered
class Preprocessed(StreamClassifier):
    """A perceptron whose inputs are hashed (``hash_bits``), standardised (``scale``) and/or
    mapped to random Fourier features (``rff_components``), in that order.

    One classifier, no pipeline: ``Preprocessed(Perceptron(averaged=True), scale="standard")``
    learns and predicts like River's ``StandardScaler() | Perceptron(...)`` learns (per
    feature, a running mean and variance updated by each learned example, then the example
    standardised with them), predicts each example with the same values it then learns from,
    saves the statistics in its state, and keeps the dense block path (a block standardised
    in one C call, then the learner's kernel).

    Parameters
    ----------
    model
        The learner (default: ``Perceptron()``).
    scale
        ``None``, or ``"standard"``: each feature's value ``v`` becomes
        ``(v - mean) / std`` with the feature's running mean and population standard deviation,
        counting the example itself (River's ``learn_one`` then ``transform_one``). A feature
        seen once gives 0.0; one seen only with the same value (an indicator ``name=value``
        is 1.0 whenever present) is passed through unchanged. An absent feature is missing,
        not 0: neither counted nor scaled (a sparse example stays sparse). An example only
        predicted (no label) is scaled with the statistics as they would be, not counted.
    hash_bits
        ``None``, or B: feature names are hashed to ``2**B`` buckets (MurmurHash3_x86_32, seed
        0, of the name's UTF-8 bytes, low B bits: Vowpal Wabbit's ``-b``); colliding features
        add up. Memory is then bounded by B whatever the vocabulary. :attr:`weights` shows a
        bucket under the most recent name learned into it (4096 remembered), else its number.
    rff_components
        ``None``, or D: the (hashed, standardised) input is mapped to D random Fourier features
        (:class:`~stream_perceptron.learners.fourier.RandomFourierFeatures`), an RBF kernel's
        map, so the linear learner draws curved boundaries; the model's features are then
        ``0 .. D-1``. The state keeps ``(rff_seed, D, rff_gamma)``, never the random matrix
        (a feature's column of it is drawn from its name's hash and the seed).
    rff_gamma
        The kernel width ``gamma`` of ``exp(-gamma * ||x - x'||^2)``.
    rff_seed
        The seed of the map.

    Examples
    --------
    >>> from stream_perceptron import Perceptron, Preprocessed
    >>> model = Preprocessed(Perceptron(averaged=True), scale="standard")
    >>> for x, y in [({"a": 10.0}, True), ({"a": -10.0}, False), ({"a": 30.0}, True)]:
    ...     model.learn_one(x, y)
    >>> model.predict_one({"a": 20.0}), model.scaler.stats("a")
    (True, (3, 10.0, 266.66666666666663))

    """

    def __init__(
        self,
        model: StreamClassifier | None = None,
        scale: str | None = None,
        hash_bits: int | None = None,
        rff_components: int | None = None,
        rff_gamma: float = 1.0,
        rff_seed: int = 0,
    ) -> None:
        if scale not in SCALES:
            raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
        if isinstance(model, Preprocessed):
            raise ValueError("the model is already preprocessed")
        self.model = Perceptron() if model is None else model
        self.scale = scale
        self.hash_bits = hash_bits
        self._scaler = Standardizer() if scale == "standard" else None
        self._hasher = FeatureHasher(hash_bits) if hash_bits is not None else None
        self.rff_components = rff_components
        self.rff_gamma = rff_gamma
        self.rff_seed = rff_seed
        self._rff = (
            RandomFourierFeatures(rff_components, rff_gamma, rff_seed)
            if rff_components is not None
            else None
        )

    def _get_params(self) -> dict[str, Any]:
        return {
            "model": self.model, "scale": self.scale, "hash_bits": self.hash_bits,
            "rff_components": self.rff_components, "rff_gamma": self.rff_gamma,
            "rff_seed": self.rff_seed,
        }  # fmt: skip

    def _own_params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"scale": self.scale, "hash_bits": self.hash_bits}
        if self._rff is not None:  # absent from states of models without the map
            params.update(
                rff_components=self.rff_components, rff_gamma=self.rff_gamma,
                rff_seed=self.rff_seed,
            )  # fmt: skip
        return params

    @property
    def _multiclass(self) -> bool:
        return bool(self.model._multiclass)

    @property
    def scaler(self) -> Standardizer | None:
        """The running statistics (``None`` without ``scale``)."""
        return self._scaler

    @property
    def hasher(self) -> FeatureHasher | None:
        """The feature hasher (``None`` without ``hash_bits``)."""
        return self._hasher

    @property
    def rff(self) -> RandomFourierFeatures | None:
        """The random Fourier features map (``None`` without ``rff_components``)."""
        return self._rff

    # -- the features --------------------------------------------------------------------------
    def _prepare(self, x: dict, strict: bool = True) -> tuple[dict, Any, Any]:
        """``x`` hashed and standardised, and what to commit once it is learned. Not
        ``strict`` (a prediction): non-finite standardised values are not refused."""
        names = pending = None
        if self._hasher is not None:
            x, names = self._hasher.transform(x)
        if self._scaler is not None:
            x, pending = self._scaler.transform(x, strict)
        if self._rff is not None:
            x = dict(enumerate(self._rff.project(x, strict)))
        return x, names, pending

    def _commit(self, names: Any, pending: Any) -> None:
        if names is not None:
            assert self._hasher is not None
            self._hasher.commit(names)
        if pending is not None:
            assert self._scaler is not None
            self._scaler.commit(pending)

    def transform_one(self, x: dict) -> dict:
        """``x`` as the model sees it now (hashed, standardised), nothing learned."""
        return self._prepare(x, strict=False)[0]

    # -- River's API ---------------------------------------------------------------------------
    def learn_one(self, x: dict, y: Any) -> None:
        xs, names, pending = self._prepare(x)
        self.model.learn_one(xs, y)
        self._commit(names, pending)

    def predict_learn_one(self, x: dict, y: Any) -> Any:
        xs, names, pending = self._prepare(x)
        prediction = self.model.predict_learn_one(xs, y)
        self._commit(names, pending)
        return prediction

    def predict_one(self, x: dict, **kwargs: Any) -> Any:
        return self.model.predict_one(self.transform_one(x))

    def check_label(self, y: Any) -> None:
        self.model.check_label(y)

    def predict_proba_one(self, x: dict, **kwargs: Any) -> dict[Any, float]:
        return self.model.predict_proba_one(self.transform_one(x))

    # -- dense blocks --------------------------------------------------------------------------
    @property
    def dense_capable(self) -> bool:
        from stream_perceptron import native

        return self.model.dense_capable and (
            (self._scaler is None and self._rff is None) or native.features is not None
        )

    def _rff_block(self, features: Sequence[Any], X: Any) -> tuple[Sequence[Any], Any]:
        if self._rff is None:
            return features, X
        return range(self._rff.n_components), self._rff.transform_block(features, X)

    @property
    def sparse_capable(self) -> bool:
        """Sparse rows, hashed and standardised or not, when the model takes them; through
        random Fourier features, whose map makes dense rows, when it takes dense ones."""
        from stream_perceptron import native

        if self._rff is not None:  # the map's output is dense: the model learns that
            return self.model.dense_capable and native.features is not None
        return self.model.sparse_capable and (
            (self._hasher is None and self._scaler is None) or native.features is not None
        )

    def learn_dense(self, features: Sequence[Any], X: Any, labels: Any, /) -> Any:
        """The model's ``learn_dense`` on the block hashed and standardised (one C call each
        way), exactly as the ``predict_learn_one`` loop; nothing kept when the model refuses
        the block."""
        if isinstance(X, SparseRows):
            return self._learn_sparse(features, X, labels)
        names = pending = None
        if self._hasher is not None or self._scaler is not None or self._rff is not None:
            X = np.asarray(X)  # the transforms work on NumPy arrays (a scanner's block: a view)
        if self._hasher is not None:
            features, X, names = self._hasher.transform_block(features, X)
        if isinstance(self.model, BinaryBlocks):
            learn = np.asarray(labels) != 0
        else:
            learn = np.fromiter((y is not None for y in labels), dtype=bool, count=len(labels))
        if self._scaler is not None:
            X, pending = self._scaler.transform_block(features, X, learn)
        predictions = self.model.learn_dense(*self._rff_block(features, X), labels)
        if names is not None:
            assert self._hasher is not None
            learned = int(learn.sum())
            if learned:
                self._hasher.commit(names, learned)
        if pending is not None:
            assert self._scaler is not None
            self._scaler.commit_block(pending)
        return predictions

    def _learn_sparse(self, features: Sequence[Any], X: SparseRows, labels: Any) -> Any:
        """:meth:`learn_dense` of sparse rows (see :attr:`sparse_capable`): hashed, then
        standardised, then mapped, as this learner does, the name cache and the statistics
        kept as the row loop keeps them; nothing kept when the model refuses the block."""
        hasher, scaler, rff = self._hasher, self._scaler, self._rff
        if hasher is None and scaler is None and rff is None:
            return self.model.learn_dense(features, X, labels)
        if isinstance(self.model, BinaryBlocks):
            learn = memoryview(labels).cast("B").tobytes().translate(_LEARNED)
        else:
            learn = bytes(y is not None for y in labels)
        names = pending = None
        if hasher is not None:
            features, X, names = hasher.transform_sparse(features, X, learn)
        if scaler is not None:
            X, pending = scaler.transform_sparse(features, X, learn)
        rows: Any = X
        if rff is not None:
            features, rows = range(rff.n_components), rff.transform_sparse(features, X)
        predictions = self.model.learn_dense(features, rows, labels)
        if names is not None:
            assert hasher is not None
            hasher.commit_sparse(names)
        if pending is not None:
            assert scaler is not None
            scaler.commit_sparse(pending)
        return predictions

    def learn_block(
        self, dense: DenseBatch, label_of: Mapping[bytes, Any], /, *, atomic: bool = False
    ) -> BlockResult | None:
        """The model's kind of block learning (binary or multi-class) over this learner's
        ``learn_dense`` and label encoding."""
        if isinstance(self.model, BinaryBlocks):
            return learn_binary_block(self, dense, label_of, atomic)
        return learn_multiclass_block(self, dense, label_of)

    def encode_block(
        self, keys: Sequence[Hashable], label_of: Mapping[Hashable, Any], *,
        atomic: bool = False, ids: np.ndarray | None = None,
    ) -> Any:  # fmt: skip
        """The binary model's :meth:`~stream_perceptron.learners.binary_blocks.BinaryBlocks.
        encode_block`."""
        assert isinstance(self.model, BinaryBlocks)
        return self.model.encode_block(keys, label_of, atomic=atomic, ids=ids)

    @property
    def label_encoding(self) -> dict[str, Any]:
        """The binary model's :attr:`~stream_perceptron.learners.binary_blocks.BinaryBlocks.
        label_encoding`."""
        assert isinstance(self.model, BinaryBlocks)
        return self.model.label_encoding

    @label_encoding.setter
    def label_encoding(self, state: dict[str, Any]) -> None:
        assert isinstance(self.model, BinaryBlocks)
        self.model.label_encoding = state

    # -- the model as numbers ------------------------------------------------------------------
    @property
    def n_seen(self) -> int:
        return self.model.n_seen

    @property
    def n_mistakes(self) -> int:
        return self.model.n_mistakes

    @property
    def max_norm(self) -> float:
        """R of the inputs as the model sees them (hashed, standardised, mapped)."""
        return self.model.max_norm

    def _named(self, weights: dict) -> dict:
        hasher = self._hasher
        if hasher is None or self._rff is not None:
            return weights
        return {hasher.name_of(b): w for b, w in weights.items()}

    @property
    def weights(self) -> Any:
        """The model's weights; with hashing, keyed by the bucket's recent name or number."""
        weights = self.model.weights
        if self._hasher is None or self._rff is not None:
            return weights
        if self._multiclass:
            return {c: self._named(wc) for c, wc in weights.items()}
        return self._named(weights)

    @property
    def bias(self) -> Any:
        return self.model.bias

    @property
    def classes(self) -> list[Any]:
        """The classes of a multi-class model."""
        return self.model.classes  # type: ignore[attr-defined]

    @property
    def weight_norm(self) -> Any:
        return self.model.weight_norm  # type: ignore[attr-defined]

    def margin(self, x: dict, y: Any) -> float:
        return self.model.margin(self.transform_one(x), y)  # type: ignore[attr-defined]

    def geometric_margin(self, x: dict, y: Any) -> float:
        return self.model.geometric_margin(self.transform_one(x), y)  # type: ignore[attr-defined]

    def geometric_margins(self, examples: Iterable[tuple[dict, Any]]) -> list[float]:
        return self.model.geometric_margins([(self.transform_one(x), y) for x, y in examples])

    def describe(self, top: int = 10) -> list[str]:
        """Lines for ``stream-perceptron inspect``: the hashing and the scaling."""
        lines = []
        hasher, scaler = self._hasher, self._scaler
        if hasher is not None:
            lines.append(
                f"hashing      2^{hasher.bits} buckets (MurmurHash3), collisions"
                f" {hasher.collisions}, merged in one example {hasher.merged}"
            )
        rff = self._rff
        if scaler is not None:
            lines.append(f"scaling      standard, statistics of {len(scaler)} features")
        if rff is not None:
            lines.append(
                f"fourier      {rff.n_components} random Fourier features, gamma"
                f" {rff.gamma:g}, seed {rff.seed}"
            )
        if scaler is not None and rff is None:
            rows: list[tuple[float, Any]] = []
            weights = self.model.weights
            vectors = weights.values() if self._multiclass else [weights]
            for wc in vectors:
                rows += [(abs(v), k) for k, v in wc.items()]
            rows.sort(key=lambda r: r[0], reverse=True)
            shown: list[Any] = []
            for _, k in rows:
                if k not in shown:
                    shown.append(k)
                if len(shown) == top:
                    break
            for k in shown:
                n, mean, var = scaler.stats(k)
                name = k if hasher is None else hasher.name_of(k)
                lines.append(f"  {name!s:<30} n {n}, mean {mean:.6g}, std {var**0.5:.6g}")
        return lines

    # -- state ---------------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "learner": type(self).__name__,
            "params": self._own_params(),
            "n_seen": self.n_seen,
            "n_mistakes": self.n_mistakes,
            "max_norm": self.max_norm,
            "model": self.model.get_state(),
            "scaler": None if self._scaler is None else self._scaler.get_state(),
            "hasher": None if self._hasher is None else self._hasher.get_state(),
            **({} if self._rff is None else {"rff": self._rff.get_state()}),
        }

    def _load_payload(self, state: dict[str, Any]) -> None:
        inner = state["model"]
        if isinstance(inner, dict) and inner.get("learner") == type(self).__name__:
            raise StateError("a Preprocessed state cannot hold another one")
        self.model = StreamClassifier.from_state(inner)
        if self._scaler is not None:
            self._scaler = Standardizer.from_state(state["scaler"])
        if self._hasher is not None:
            self._hasher.load_state(state["hasher"])
        if self._rff is not None:
            rff = RandomFourierFeatures.from_state(state["rff"])
            if rff.get_state() != self._rff.get_state():
                raise StateError("the random Fourier features state does not match its params")
            self._rff = rff
