"""The passive-aggressive learners' learn_dense (C kernels) against their loops, bit for bit."""

from __future__ import annotations

import copy
import random

import numpy as np
import pytest
from core_helpers import bits

from stream_perceptron import (
    MulticlassPassiveAggressive,
    MulticlassPerceptron,
    PassiveAggressive,
    native,
)
from stream_perceptron.errors import LabelError, ValueTooLargeError

pytestmark = pytest.mark.skipif(not native.has_dense(), reason="the C extension is not built")

FEATURES = ["a", "b", "c", "d"]


def block(seed: int, n: int = 400) -> tuple[np.ndarray, np.ndarray]:
    """Rows with noise, ties (exact zeros), tiny and large values; signs with unlabelled rows."""
    rng = random.Random(seed)
    X = np.array(
        [
            [rng.choice([0.0, 0.0, 1.0, -1.0, 1e-300, 3e150]) if rng.random() < 0.1
             else rng.gauss(0, 2) for _ in FEATURES]
            for _ in range(n)
        ]
    )  # fmt: skip
    signs = np.array([rng.choice([1, -1, 1, -1, 0]) for _ in range(n)], dtype=np.int8)
    return X, signs


def loop(
    model: PassiveAggressive, X: np.ndarray, signs: np.ndarray, features: list[str] = FEATURES
) -> list[int]:
    """The reference: predict_one for an unlabelled row, predict_learn_one for the others."""
    out = []
    for row, s in zip(X.tolist(), signs.tolist(), strict=True):
        x = dict(zip(features, row))
        if s == 0:
            out.append(1 if model.predict_one(x) else -1)
        else:
            out.append(1 if model.predict_learn_one(x, s > 0) else -1)
    return out


def state(model: PassiveAggressive) -> object:
    return bits((model.weights, model.bias, model.n_seen, model.n_mistakes, model.max_norm))


def settled(**params: object) -> PassiveAggressive:
    model = PassiveAggressive(**params)  # type: ignore[arg-type]
    model.learn_one({"z": 0.5}, False)  # the encoding False -> -1, True -> +1, and a weight
    model.learn_one({"z": -0.25}, True)  # outside the blocks' features
    return model


@pytest.mark.parametrize("variant", ["pa", "pa1", "pa2"])
@pytest.mark.parametrize("bias", ["learned", "none"])
@pytest.mark.parametrize("C", [0.01, 1.0, 3])
@pytest.mark.parametrize("seed", range(3))
def test_learn_dense_is_the_loop(variant, bias, C, seed):
    X, signs = block(seed)
    fast, slow = settled(C=C, variant=variant, bias=bias), settled(C=C, variant=variant, bias=bias)
    got = fast.learn_dense(FEATURES, X, signs).tolist()
    want = loop(slow, X, signs)
    assert got == want
    assert state(fast) == state(slow)
    assert list(fast.weights) == list(slow.weights)  # the key order too


def test_blocks_in_pieces_and_columns_in_another_order():
    X, signs = block(7)
    whole, pieces, slow = settled(), settled(), settled()
    whole.learn_dense(FEATURES, X, signs)
    for lo in range(0, len(X), 37):
        pieces.learn_dense(FEATURES, X[lo : lo + 37], signs[lo : lo + 37])
    loop(slow, X, signs)
    assert state(whole) == state(slow) == state(pieces)
    backwards, slow_backwards = settled(), settled()
    backwards.learn_dense(FEATURES[::-1], X[:, ::-1], signs)
    loop(slow_backwards, X[:, ::-1], signs, FEATURES[::-1])  # other sums: the folds' order
    assert state(backwards) == state(slow_backwards)


@pytest.mark.parametrize("huge", [1e200, 1e155])
def test_a_row_the_loop_refuses_refuses_the_block(huge):
    # 1e200: its squared norm overflows (R); 1e155: the norm is finite, a weight is not
    X, signs = block(3, 50)
    X[20] = [huge, huge, 0.0, 0.0]
    signs[20] = 1
    model = settled(variant="pa")
    before = copy.deepcopy(model)
    with pytest.raises(ValueTooLargeError) as refused:
        model.learn_dense(FEATURES, X, signs)
    assert refused.value.row == 20  # type: ignore[attr-defined]
    assert state(model) == state(before)
    reference = copy.deepcopy(before)
    loop(reference, X[:20], signs[:20])
    with pytest.raises(ValueTooLargeError):
        loop(reference, X[20:21], signs[20:21])


def test_values_not_finite_are_refused_and_nothing_changes():
    X, signs = block(4, 30)
    X[10, 2] = float("nan")
    model = settled()
    before = state(model)
    with pytest.raises(ValueError, match="non-finite"):
        model.learn_dense(FEATURES, X, signs)
    assert state(model) == before


def test_a_subclass_that_changes_the_rule_learns_row_by_row():
    class Cautious(PassiveAggressive):
        def _learn(self, x: dict, y: int) -> float:
            return super()._learn(x, y)

    assert PassiveAggressive().dense_capable
    assert not Cautious().dense_capable
    with pytest.raises(ValueError, match="does not support"):
        Cautious().learn_dense(FEATURES, np.zeros((1, 4)), np.array([1]))


def test_bad_blocks_are_refused():
    model = PassiveAggressive()
    with pytest.raises(ValueError, match="shape"):
        model.learn_dense(["a"], np.zeros((2, 2)), np.array([1, 1]))
    with pytest.raises(ValueError, match="duplicate"):
        model.learn_dense(["a", "a"], np.zeros((2, 2)), np.array([1, 1]))
    with pytest.raises(ValueError, match="signs"):
        model.learn_dense(["a"], np.zeros((2, 1)), np.array([2, 1]))


def mc_block(seed: int, n: int, classes: list) -> tuple[np.ndarray, list]:
    """Rows near a class's corner, with exact ties (zero rows), and labels with None (only
    predicted) and classes that first come mid-block."""
    rng = random.Random(seed)
    X, labels = [], []
    for i in range(n):
        k = rng.randrange(min(len(classes), 1 + i // 15))
        row = [rng.gauss(0, 1) + (2.0 if j % len(classes) == k else 0.0) for j in range(4)]
        if rng.random() < 0.05:
            row = [0.0] * 4
        X.append(row)
        labels.append(None if rng.random() < 0.1 else classes[k])
    return np.array(X), labels


def mc_loop(model: MulticlassPassiveAggressive, X: np.ndarray, labels: list) -> list:
    out = []
    for row, y in zip(X.tolist(), labels, strict=True):
        x = dict(zip(FEATURES, row))
        out.append(model.predict_one(x) if y is None else model.predict_learn_one(x, y))
    return out


def mc_state(model: MulticlassPassiveAggressive) -> object:
    return bits(
        (model.weights, model.bias, model.classes, model.n_seen, model.n_mistakes,
         model.max_norm)
    )  # fmt: skip


@pytest.mark.parametrize("variant", ["pa", "pa1", "pa2"])
@pytest.mark.parametrize("bias", ["learned", "none"])
@pytest.mark.parametrize("C", [0.01, 1.0])
@pytest.mark.parametrize("seed", range(3))
def test_multiclass_learn_dense_is_the_loop(variant, bias, C, seed):
    classes = ["r", "g", "b", 7]
    fast, slow = (MulticlassPassiveAggressive(C=C, variant=variant, bias=bias) for _ in "ab")
    for model in (fast, slow):  # a class and a weight from before, outside the blocks
        model.learn_one({"z": 1.0}, "g")
    X, labels = mc_block(seed, 300, classes)
    got = []
    for lo in range(0, 300, 70):
        got += fast.learn_dense(FEATURES, X[lo : lo + 70], labels[lo : lo + 70])
    assert got == mc_loop(slow, X, labels)
    assert mc_state(fast) == mc_state(slow)
    assert [list(w) for w in fast.weights.values()] == [list(w) for w in slow.weights.values()]


def test_multiclass_refusals_leave_the_model_as_it_was():
    X, labels = mc_block(1, 60, ["a", "b"])
    model = MulticlassPassiveAggressive(variant="pa")
    model.learn_dense(FEATURES, X[:30], labels[:30])
    before = mc_state(model)
    X[40] = [1e200, 1e200, 0.0, 0.0]
    labels[40] = "a"
    with pytest.raises(ValueTooLargeError) as refused:
        model.learn_dense(FEATURES, X[30:], labels[30:])
    assert refused.value.row == 10  # type: ignore[attr-defined]
    assert mc_state(model) == before
    with pytest.raises(LabelError):  # True where 1 is a class: the loop raises it too
        MulticlassPassiveAggressive().learn_dense(FEATURES, X[:2], [1, True])
    assert MulticlassPassiveAggressive().learn_dense(FEATURES, X[:0], []) == []


@pytest.mark.parametrize("make", [MulticlassPassiveAggressive, MulticlassPerceptron])
def test_multiclass_blocks_of_other_shapes_are_refused(make):
    model = make()
    with pytest.raises(ValueError, match="shape"):
        model.learn_dense(["a"], np.zeros((2, 2)), ["x", "y"])
    with pytest.raises(ValueError, match="shape"):
        model.learn_dense(["a", "b"], np.zeros((2, 2)), ["x"])
    with pytest.raises(ValueError, match="duplicate"):  # a dict would keep one of them
        model.learn_dense(["a", "a"], np.zeros((2, 2)), ["x", "y"])
    assert model.n_seen == 0
