"""The dense kernels with the forgetting average (``average_half_life``).

``learn_dense`` (multi-class and binary) must leave the model bit for bit as the pure-Python
``predict_learn_one`` loop does, also when the accumulators are renormalised inside a block
(several times), when the model holds accumulators of features outside the block (learned per
record before: the glue rescales them by the kernel's factors, in order), and around
unlabelled rows and new classes.
"""

from __future__ import annotations

import numpy as np
import pytest
from fast_helpers import bits, needs_c, reference, run_fast

from stream_perceptron import MulticlassPerceptron, Perceptron
from stream_perceptron.learners._linear import RENORMALISE_HALF_LIVES

pytestmark = needs_c

FEATURES = ["a", "b", "c", "d"]


def _sparse_history(seed: int) -> list[tuple[dict, str]]:
    """Records over the block's features and others ("x", "y"), in varying key orders."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(60):
        keys = list(rng.permutation(["a", "x", "c", "y"])[: rng.integers(1, 5)])
        x = {str(k): float(rng.normal()) for k in keys}
        out.append((x, ["red", "blue", "green"][int(rng.integers(0, 3))]))
    return out


def _block(seed: int, n: int) -> tuple[np.ndarray, list]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, len(FEATURES)))
    centres = rng.normal(size=(4, len(FEATURES)))
    labels: list = []
    for i, row in enumerate(X):
        label = ["red", "blue", "green", 4][int(np.argmax(centres @ row))]
        if i < n // 2 and label == 4:
            label = "red"  # a new class half way through the block
        labels.append(None if rng.random() < 0.1 else label)
    return X, labels


def _ordered(d: dict) -> list:
    return [(k, _ordered(v) if isinstance(v, dict) else v) for k, v in d.items()]


def _state(model: MulticlassPerceptron | Perceptron) -> object:
    """Everything the learner holds, floats as bit patterns, dicts as ordered pairs."""
    b, ub = (model._b, model._ub) if isinstance(model, Perceptron) else (
        _ordered(model._b), _ordered(model._ub)
    )
    return bits(model.get_state()), bits(
        [model._n_seen, model._n_mistakes, model._max_norm, model._avg_ref,
         _ordered(model._w), b, _ordered(model._u), ub]
    )  # fmt: skip


@pytest.mark.parametrize("half_life", [0.7, 1.5, 4, 0.01])
@pytest.mark.parametrize("bias", ["learned", "r2", "none"])
@pytest.mark.parametrize("seed", [0, 1])
def test_dense_forgetting_average_is_the_per_record_loop(half_life, bias, seed):
    def make() -> MulticlassPerceptron:
        return MulticlassPerceptron(bias=bias, lr=0.5, averaged=True, average_half_life=half_life)

    history = _sparse_history(seed)
    X, labels = _block(seed + 10, 1200)
    want_model, got_model = make(), make()
    assert got_model.dense_capable
    for model in (want_model, got_model):  # the same history per record (C helpers on)
        for x, y in history:
            model.predict_learn_one(x, y)
    want = reference(want_model, FEATURES, X, labels)
    got: list = []
    for a, b in [(0, 1), (1, 500), (500, 1200)]:
        got += got_model.learn_dense(FEATURES, X[a:b], labels[a:b])
    assert got == want
    assert _state(got_model) == _state(want_model)
    # the block renormalised: the stream is longer than the interval
    assert want_model._avg_ref > 0 and 1200 > RENORMALISE_HALF_LIVES * half_life
    assert got_model._avg_ref == want_model._avg_ref
    assert {"x", "y"} & set(want_model._u["red"])  # accumulators outside the block


@pytest.mark.parametrize("half_life", [0.7, 1.5, 4, 0.01])
@pytest.mark.parametrize("bias", ["learned", "r2", "none"])
@pytest.mark.parametrize("seed", [0, 1])
def test_binary_dense_forgetting_average_is_the_per_record_loop(half_life, bias, seed):
    def make() -> Perceptron:
        return Perceptron(bias=bias, lr=0.5, averaged=True, average_half_life=half_life)

    rng = np.random.default_rng(seed)
    history = [(x, y == "red") for x, y in _sparse_history(seed)]
    X = rng.normal(size=(1200, len(FEATURES)))
    hidden = rng.normal(size=len(FEATURES))
    labels = [None if rng.random() < 0.1 else bool(v) for v in (X @ hidden + 0.2 > 0)]
    want_model, got_model = make(), make()
    assert got_model.dense_capable
    for model in (want_model, got_model):
        for x, y in history:
            model.predict_learn_one(x, y)
    want = reference(want_model, FEATURES, X, labels)
    got: list = []
    for a, b in [(0, 1), (1, 500), (500, 1200)]:
        got += run_fast(got_model, FEATURES, X[a:b], labels[a:b])
    assert got == want
    assert _state(got_model) == _state(want_model)
    assert want_model._avg_ref > 0 and got_model._avg_ref == want_model._avg_ref
    assert {"x", "y"} & set(want_model._u)  # accumulators outside the block


@pytest.mark.parametrize("make", [MulticlassPerceptron, Perceptron])
def test_too_short_a_half_life_is_left_to_the_per_record_path(make):
    """Below a half-life of 0.01 the block kernels are not used (the learner takes 1/256 on)."""
    assert not make(averaged=True, average_half_life=0.005).dense_capable
    assert make(averaged=True, average_half_life=0.01).dense_capable
