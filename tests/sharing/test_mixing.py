"""Parameter mixing against a readable reference: the weighted average of what each learner
exposes (weights, biases, the averages it predicts with), computed here from the public
properties, never from the state format the mixing code reads."""

from __future__ import annotations

import math
import random

import pytest

from stream_perceptron import MulticlassPerceptron, Perceptron
from stream_perceptron.learners import CentroidClassifier, StreamClassifier
from stream_perceptron.sharing import (
    MixError,
    divergence,
    history_sums,
    mix_states,
    subtract_sums,
    sums_since,
)


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


def test_labels_encoded_differently_are_refused() -> None:
    a, b = Perceptron(), Perceptron()
    a.learn_one({"x": 1.0}, True)
    b.learn_one({"x": 1.0}, -1)  # settles -1/+1
    with pytest.raises(MixError, match="encode labels"):
        mix_states([a.get_state(), b.get_state()], [1, 1])


def _learn_recording(learner: Perceptron, data) -> tuple[dict, float]:
    """Learn ``data``; return the sum, over the steps, of the weights and bias after each step
    (what an averaged perceptron averages), kept here by hand."""
    sums: dict = {}
    sum_b = 0.0
    for x, y in data:
        learner.learn_one(x, y)
        for k, v in learner.weights.items():
            sums[k] = sums.get(k, 0.0) + v
        sum_b += learner.bias
    return sums, sum_b


def test_history_sums_are_the_sums_of_the_weights_after_each_step() -> None:
    learner = Perceptron(averaged=True)
    sums, sum_b = _learn_recording(learner, _stream(30, 50))
    got = history_sums(learner.get_state())
    assert got["n"] == 50
    (only,) = got["classes"]
    assert _close(dict(only["weights"]), sums)
    assert math.isclose(only["bias"], sum_b, abs_tol=1e-9)
    assert subtract_sums(got, got)["n"] == 0
    assert all(v == 0 for _, v in subtract_sums(got, got)["classes"][0]["weights"])


def _add(a: dict, b: dict) -> dict:
    return {k: a.get(k, 0.0) + b.get(k, 0.0) for k in a.keys() | b.keys()}


def test_with_a_base_the_averages_add_up_as_one_sequential_average() -> None:
    base = Perceptron(averaged=True)
    base_sum, base_b = _learn_recording(base, _stream(20, 60))
    # the reference: the average is the mean of the weights after each step
    assert _close(base.average_weights, {k: v / 60 for k, v in base_sum.items()})
    base_sums = history_sums(base.get_state())
    workers, local = [], []
    for seed, n in ((21, 40), (22, 25), (23, 10)):
        learner = Perceptron.from_state(base.get_state())
        local.append(_learn_recording(learner, _stream(seed, n)))
        workers.append(learner)
    counts = [40, 25, 10]
    t = 60 + sum(counts)
    states = [m.get_state() for m in workers]
    mixed = Perceptron.from_state(
        mix_states(states, counts, n_seen=t, base=base_sums,
                   local=[sums_since(s, base_sums) for s in states])  # fmt: skip
    )
    total = dict(base_sum)
    for sums, _ in local:
        total = _add(total, sums)
    assert _close(mixed.average_weights, {k: v / t for k, v in total.items()})
    expected_b = (base_b + sum(b for _, b in local)) / t
    assert math.isclose(mixed.average_bias, expected_b, abs_tol=1e-9)
    # the working weights are still the weighted average (IPM)
    lambdas = [c / sum(counts) for c in counts]
    assert _close(mixed.weights, _avg([m.weights for m in workers], lambdas))


def test_workers_on_different_bases_add_their_own_local_sums() -> None:
    """Workers mix at their own times, so each learned its local steps on its own base: the
    mixture's average is the mixing worker's base average for the examples before the local
    steps plus each worker's sum over its own local steps (taken against its own base), over
    ``t``. A worker whose base is far from the mixing worker's must not bend the average: the
    bug this guards against subtracted the mixing worker's base from everyone, and the pulled
    models of a 3-worker cluster ended 5-10 points behind one sequential model."""
    # two bases that differ: b learned 80 more examples, of another stream
    a_base = Perceptron(averaged=True)
    _learn_recording(a_base, _stream(40, 100))
    b_base = Perceptron.from_state(a_base.get_state())
    _learn_recording(b_base, [(x, not y) for x, y in _stream(41, 80)])
    a_sums, b_sums = history_sums(a_base.get_state()), history_sums(b_base.get_state())
    a, b = Perceptron.from_state(a_base.get_state()), Perceptron.from_state(b_base.get_state())
    (a_local, a_b), (b_local, b_b) = (
        _learn_recording(a, _stream(42, 30)), _learn_recording(b, _stream(43, 20))
    )
    t = 300  # cluster-wide
    states = [a.get_state(), b.get_state()]
    mixed = Perceptron.from_state(
        mix_states(states, [30, 20], n_seen=t, base=a_sums,
                   local=[sums_since(states[0], a_sums), sums_since(states[1], b_sums)])
    )  # fmt: skip
    rest = t - 50
    expected = _add(
        {k: rest * v for k, v in a_base.average_weights.items()}, _add(a_local, b_local)
    )
    assert _close(mixed.average_weights, {k: v / t for k, v in expected.items()})
    expected_b = (rest * a_base.average_bias + a_b + b_b) / t
    assert math.isclose(mixed.average_bias, expected_b, abs_tol=1e-9)


def test_without_local_sums_a_state_counts_its_own_average() -> None:
    """A publication of an earlier release carries no local sums: its running average stands
    for its local steps."""
    base = Perceptron(averaged=True)
    _learn_recording(base, _stream(50, 40))
    worker = Perceptron.from_state(base.get_state())
    _learn_recording(worker, _stream(51, 10))
    mixed = Perceptron.from_state(
        mix_states([worker.get_state()], [10], n_seen=100,
                   base=history_sums(base.get_state()), local=[None])  # fmt: skip
    )
    expected = _add(
        {k: 90 * v for k, v in base.average_weights.items()},
        {k: 10 * v for k, v in worker.average_weights.items()},
    )
    assert _close(mixed.average_weights, {k: v / 100 for k, v in expected.items()})


def test_a_forgetting_average_is_not_mixed():
    """The mixing rebuilds the plain average's accumulator (u = t (w - a)); a forgetting
    average keeps another one, so it is refused rather than mixed wrongly."""
    from stream_perceptron import Perceptron
    from stream_perceptron.sharing.mixing import MixError, mix_states

    a = Perceptron(averaged=True, average_half_life=10)
    a.learn_one({"x": 1.0}, True)
    with pytest.raises(MixError, match="average_half_life"):
        mix_states([a.get_state(), a.get_state()], [1, 1])
