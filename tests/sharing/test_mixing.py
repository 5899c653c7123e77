"""Parameter mixing against a readable reference: the weighted average of what each learner
exposes (weights, biases, the averages it predicts with), computed here from the public
properties, never from the state format the mixing code reads."""

from __future__ import annotations

import math
import random

import pytest

from stream_perceptron import MulticlassPerceptron, Perceptron
from stream_perceptron.learners import CentroidClassifier, StreamClassifier
from stream_perceptron.sharing import MixError, divergence, mix_states


def _stream(seed: int, n: int, classes: int = 2) -> list[tuple[dict, object]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        x = {f"f{j}": rng.uniform(-1, 1) for j in range(rng.randint(1, 5))}
        score = sum(x.values())
        y = (score > 0) if classes == 2 else int((score + 5) * classes / 10) % classes
        out.append((x, y))
    return out


def _trained(klass: type, seed: int, n: int, **params: object) -> StreamClassifier:
    learner = klass(**params)
    for x, y in _stream(seed, n, 2 if klass is Perceptron else 3):
        learner.learn_one(x, y)
    return learner


def _avg(dicts: list[dict], lambdas: list[float]) -> dict:
    keys = {k for d in dicts for k in d}
    return {k: sum(lam * d.get(k, 0.0) for d, lam in zip(dicts, lambdas)) for k in keys}


def _close(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(math.isclose(a[k], b[k], abs_tol=1e-9) for k in a)


@pytest.mark.parametrize("averaged", [False, True])
def test_binary_mixture_is_the_weighted_average(averaged: bool) -> None:
    sizes = ((1, 50), (2, 80), (3, 9))
    learners = [_trained(Perceptron, s, n, averaged=averaged) for s, n in sizes]
    counts = [50, 80, 9]
    lambdas = [c / sum(counts) for c in counts]
    mixed = Perceptron.from_state(
        mix_states([m.get_state() for m in learners], counts, n_seen=139, n_mistakes=7)
    )
    assert _close(mixed.weights, _avg([m.weights for m in learners], lambdas))
    assert math.isclose(mixed.bias, sum(lam * m.bias for m, lam in zip(learners, lambdas)))
    # the average the mixture predicts with is the average of the learners' averages
    assert _close(mixed.average_weights, _avg([m.average_weights for m in learners], lambdas))
    expected_ab = sum(lam * m.average_bias for m, lam in zip(learners, lambdas))
    assert math.isclose(mixed.average_bias, expected_ab, abs_tol=1e-9)
    assert (mixed.n_seen, mixed.n_mistakes) == (139, 7)
    assert mixed.max_norm == max(m.max_norm for m in learners)


def test_multiclass_mixture_counts_an_unseen_class_as_zero() -> None:
    a = MulticlassPerceptron(averaged=True)
    b = MulticlassPerceptron(averaged=True)
    for x, y in _stream(5, 60, 3):
        a.learn_one(x, y)
    for x, y in _stream(6, 40, 3):
        b.learn_one(x, y if y != 2 else 0)  # b never sees class 2
    b.learn_one({"new": 1.0}, "other")
    mixed = MulticlassPerceptron.from_state(mix_states([a.get_state(), b.get_state()], [3, 1]))
    lam = [0.75, 0.25]
    for c in set(a.weights) | set(b.weights):
        wa, wb = a.weights.get(c, {}), b.weights.get(c, {})
        assert _close(mixed.weights[c], _avg([wa, wb], lam))
        aa, ab = a.average_weights.get(c, {}), b.average_weights.get(c, {})
        assert _close(mixed.average_weights[c], _avg([aa, ab], lam))
    # classes in the order of first appearance: a's, then those only b has
    assert list(mixed.weights) == [*a.weights, *(c for c in b.weights if c not in a.weights)]


def test_hand_worked_example() -> None:
    # w1 = {x: 1}, b1 = 1; w2 = {x: -2, z: 1}, b2 = 1; weights 1 and 3
    # mixed w = {x: 0.25 * 1 + 0.75 * -2, z: 0.75} = {x: -1.25, z: 0.75}, b = 1
    a, b = Perceptron(), Perceptron()
    a.learn_one({"x": 1.0}, True)
    b.learn_one({"x": -2.0, "z": 1.0}, True)
    mixed = Perceptron.from_state(mix_states([a.get_state(), b.get_state()], [1, 3]))
    assert mixed.weights == {"x": -1.25, "z": 0.75}
    assert mixed.bias == 1.0 and mixed.n_seen == 1


def test_one_state_mixes_to_itself_and_keeps_learning_the_same() -> None:
    learner = _trained(Perceptron, 7, 100, averaged=True)
    mixed = Perceptron.from_state(mix_states([learner.get_state()], [5]))
    assert _close(mixed.weights, learner.weights)
    assert _close(mixed.average_weights, learner.average_weights)
    tail = _stream(8, 50)
    assert [mixed.predict_learn_one(x, y) for x, y in tail] == [
        learner.predict_learn_one(x, y) for x, y in tail
    ]
    assert divergence(mixed.get_state(), learner.get_state()) < 1e-9


def test_true_and_one_stay_distinct_features() -> None:
    a, b = Perceptron(), Perceptron()
    a.learn_one({True: 1.0}, True)
    b.learn_one({1: 2.0}, True)
    mixed = mix_states([a.get_state(), b.get_state()], [1, 1])
    assert sorted(map(repr, (k for k, _ in mixed["weights"]))) == ["1", "True"]


def test_divergence_is_the_norm_of_the_difference() -> None:
    a, b = _trained(Perceptron, 1, 30), _trained(Perceptron, 2, 30)
    diff = [a.weights.get(k, 0.0) - b.weights.get(k, 0.0) for k in a.weights.keys() | b.weights]
    expected = math.sqrt(sum(d * d for d in diff) + (a.bias - b.bias) ** 2)
    assert math.isclose(divergence(a.get_state(), b.get_state()), expected)


@pytest.mark.parametrize(
    ("states", "weights", "message"),
    [
        ([Perceptron().get_state(), Perceptron(lr=2.0).get_state()], [1, 1], "same model"),
        ([CentroidClassifier().get_state()], [1], "cannot be mixed"),
        ([Perceptron().get_state()], [0], "sum to 0"),
        ([Perceptron().get_state()], [1, 2], "one weight per state"),
        ([Perceptron().get_state()], [math.nan], "finite"),
        ([Perceptron().get_state(), MulticlassPerceptron().get_state()], [1, 1], "same model"),
    ],
)
def test_what_cannot_be_mixed(states: list, weights: list, message: str) -> None:
    with pytest.raises(MixError, match=message):
        mix_states(states, weights)


def test_labels_spelled_differently_mix_as_signs() -> None:
    """True/False on one worker and -1/+1 on another are one model: both learn in signs; the
    mixture prints the first state's labels."""
    a, b = Perceptron(), Perceptron()
    a.learn_one({"x": 1.0}, True)
    b.learn_one({"x": 1.0}, -1)  # settles -1/+1
    mixed = Perceptron.from_state(mix_states([a.get_state(), b.get_state()], [1, 1]))
    assert mixed.weights == {"x": 0.0} and mixed.bias == 0.0  # +x and -x, averaged
    assert type(mixed.predict_one({"x": 1.0})) is bool  # a's spelling
    other = Perceptron.from_state(mix_states([b.get_state(), a.get_state()], [1, 1]))
    assert type(other.predict_one({"x": 1.0})) is int  # b's


def test_a_forgetting_average_is_not_mixed():
    """The mixing rebuilds the plain average's accumulator (u = t (w - a)); a forgetting
    average keeps another one, so it is refused rather than mixed wrongly."""
    from stream_perceptron import Perceptron
    from stream_perceptron.sharing.mixing import MixError, mix_states

    a = Perceptron(averaged=True, average_half_life=10)
    a.learn_one({"x": 1.0}, True)
    with pytest.raises(MixError, match="average_half_life"):
        mix_states([a.get_state(), a.get_state()], [1, 1])
