"""--scale standard and --hash-bits keep the tiers bit-identical: the C block path (the block
hashed, standardised by ``_features.scale_block``, then the learner's kernel) against the
pure-Python reference (``Preprocessed.predict_learn_one``: ``Standardizer.transform`` and
``FeatureHasher.transform`` per record, the learner's own Python code)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from fast_helpers import REFUSED, bits, needs_c, per_record, reference
from test_tiers_equal import BINARY_STREAMS, MULTICLASS_STREAMS, _blocks

from stream_perceptron import MulticlassPerceptron, Perceptron, Preprocessed
from stream_perceptron.errors import LabelError, ValueTooLargeError
from stream_perceptron.learners.binary_blocks import encode_labels
from stream_perceptron.learners.labels import predicted_label

pytestmark = needs_c

PREP = [dict(scale="standard"), dict(scale="standard", hash_bits=3), dict(hash_bits=2)]
PREP_IDS = ["scale", "scale-hash3", "hash2"]
MODES = list(itertools.product(("learned", "r2", "none"), (False, True)))
MODE_IDS = [f"{b}-{'avg' if a else 'plain'}" for b, a in MODES]


def _dense(model: Preprocessed, features: list, X: np.ndarray, labels: list) -> list:
    """learn_dense block by block; a refused block (the model as it was): the rows before it
    densely, that row per record, the rest densely."""
    out: list = []
    for a, b in _blocks(len(X)):
        out += _dense_rows(model, features, X[a:b], labels[a:b])
    return out


def _dense_rows(model: Preprocessed, features: list, X: np.ndarray, labels: list) -> list:
    if not len(X):
        return []
    before = model.get_state()  # compared as bits() on a refusal only (see per_record)
    binary = isinstance(model.model, Perceptron)
    if binary:
        encoding = model.label_encoding
        signs, encodings, errors = encode_labels(model.model, labels)
        assert not errors
    try:
        if binary:
            preds = model.learn_dense(features, X, signs)
            return [predicted_label(e, p > 0) for p, e in zip(preds.tolist(), encodings)]
        return list(model.learn_dense(features, X, labels))
    except (ValueTooLargeError, LabelError) as e:
        if binary:
            model.label_encoding = encoding
        assert bits(model.get_state()) == bits(before)
        i = e.row  # type: ignore[union-attr]
        before_it = _dense_rows(model, features, X[:i], labels[:i])  # in stream order
        refused = per_record(model, features, X[i : i + 1], labels[i : i + 1])
        # a labelled row is refused by the record path too; an unlabelled one only predicted
        # there (its non-finite values are not the kernel's input)
        assert (refused == [REFUSED]) == (labels[i] is not None)
        return before_it + refused + _dense_rows(model, features, X[i + 1 :], labels[i + 1 :])


def _check(make: Any, stream: tuple) -> Preprocessed:
    features, X, labels = stream
    pure = make()
    want = reference(pure, features, X, labels)
    helped = make()
    assert per_record(helped, features, X, labels) == want
    assert bits(helped.get_state()) == bits(pure.get_state())
    model = make()
    assert model.dense_capable
    got = _dense(model, features, X, labels)
    assert got == want and [type(p) for p in got] == [type(p) for p in want]
    assert bits(model.get_state()) == bits(pure.get_state())
    assert list(model.model._w) == list(pure.model._w)  # key order too
    return pure


@pytest.mark.parametrize("stream", ["gaussian", "gaussian-unlabelled", "phishing", "extreme"])
@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("prep", PREP, ids=PREP_IDS)
def test_binary_preprocessed_tiers_equal(prep, mode, stream):
    bias, averaged = mode
    pure = _check(
        lambda: Preprocessed(Perceptron(bias=bias, averaged=averaged), **prep),
        BINARY_STREAMS[stream],
    )
    if stream != "extreme":
        assert pure.n_mistakes > 10
    if "scale" in prep:
        assert len(pure.scaler) > 0


@pytest.mark.parametrize("stream", list(MULTICLASS_STREAMS))
@pytest.mark.parametrize("bias", ["learned", "r2", "none"])
@pytest.mark.parametrize("prep", PREP, ids=PREP_IDS)
def test_multiclass_preprocessed_tiers_equal(prep, bias, stream):
    pure = _check(
        lambda: Preprocessed(MulticlassPerceptron(bias=bias), **prep), MULTICLASS_STREAMS[stream]
    )
    assert pure.n_mistakes > 10


def test_hashed_block_with_colliding_columns_adds_them_up():
    """Two columns in one bucket: the block path adds them left to right, as the dict path."""
    model = Preprocessed(Perceptron(), hash_bits=1)
    features = ["a", "b", "c", "d"]
    buckets = [model.hasher.bucket(k) for k in features]
    assert len(set(buckets)) < len(features)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    labels = [int(v) for v in rng.choice([-1, 1], size=200)]
    _check(lambda: Preprocessed(Perceptron(), hash_bits=1, scale="standard"),
           (features, X, labels))  # fmt: skip
    assert model.hasher.merged == 0
