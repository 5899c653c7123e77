"""Increments, folding and moving onto a mixture, against references computed here from the
learners' public properties (weights, biases, averages) and a hand-kept sum of the weights
after each step."""

from __future__ import annotations

import json
import math
import random

import pytest

from stream_perceptron import MulticlassPerceptron, Perceptron
from stream_perceptron.sharing import MixError
from stream_perceptron.sharing.increments import (
    Form,
    fold,
    form,
    increment,
    to_state,
    translate,
)


def _stream(seed: int, n: int) -> list[tuple[dict, bool]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        x = {f"f{j}": rng.uniform(-1, 1) for j in range(rng.randint(1, 4))}
        out.append((x, sum(x.values()) + rng.uniform(-0.3, 0.3) > 0))
    return out


def _learn(model: Perceptron, data) -> tuple[dict, float]:
    """Learn ``data``; the sum over the steps of the weights and bias after each step."""
    sums: dict = {}
    sum_b = 0.0
    for x, y in data:
        model.learn_one(x, y)
        for k, v in model.weights.items():
            sums[k] = sums.get(k, 0.0) + v
        sum_b += model.bias
    return sums, sum_b


def _add(*dicts: dict, coefs: tuple = ()) -> dict:
    coefs = coefs or (1.0,) * len(dicts)
    keys = {k for d in dicts for k in d}
    return {k: sum(c * d.get(k, 0.0) for c, d in zip(coefs, dicts)) for k in keys}


def test_fold_averages_the_changes_and_adds_the_sums() -> None:
    base = Perceptron(averaged=True)
    base_sum, base_b = _learn(base, _stream(1, 50))
    workers, local = [], []
    for seed, n in ((2, 30), (3, 10)):
        w = Perceptron.from_state(base.get_state())
        local.append(_learn(w, _stream(seed, n)))
        workers.append(w)
    steps = [(w.get_state(), [increment(w.get_state(), form(base.get_state()))])
             for w in workers]  # fmt: skip
    mixed = Perceptron.from_state(fold(base.get_state(), steps))
    assert mixed.n_seen == 90
    # weights: the base plus 1/N of each worker's change (N = 2 workers)
    changes = [_add(w.weights, base.weights, coefs=(1, -1)) for w in workers]
    expected = _add(base.weights, *changes, coefs=(1, 0.5, 0.5))
    assert mixed.weights == pytest.approx(expected)
    assert mixed.bias == pytest.approx(base.bias + 0.5 * (workers[0].bias - base.bias)
                                       + 0.5 * (workers[1].bias - base.bias))  # fmt: skip
    # the running average: every step's weights, summed, over the 90 examples (each worker
    # began on the base: exact)
    total = _add(base_sum, local[0][0], local[1][0])
    assert mixed.average_weights == pytest.approx({k: v / 90 for k, v in total.items()})
    assert math.isclose(mixed.average_bias, (base_b + local[0][1] + local[1][1]) / 90)


def test_an_increment_made_on_an_older_mixture_is_placed_with_the_mixtures_step() -> None:
    """Two workers begin on the base; the first one's increment is folded into mixture 1, the
    second one's (made on the base) into mixture 2: with mixture 1's step as its lag the
    result is the same as folding both at once (the sum over every example exact); without
    it, the second worker's examples would count mixture 1's weights."""
    from stream_perceptron.sharing.increments import fold_step

    base = Perceptron(averaged=True)
    base_sum, _ = _learn(base, _stream(21, 10))
    states, steps, sums = [], [], []
    for seed in (22, 23):
        w = Perceptron.from_state(base.get_state())
        sums.append(_learn(w, _stream(seed, 60))[0])
        states.append(w.get_state())
        steps.append(increment(w.get_state(), form(base.get_state())))
    at_once = Perceptron.from_state(
        fold(base.get_state(), [(states[0], [steps[0]]), (states[1], [steps[1]])])
    )
    mixture1 = fold(base.get_state(), [(states[0], [steps[0]])], workers=2)
    lag = fold_step([[steps[0]]], 0.5)
    assert next(iter(lag.parts.values()))["w"]  # the first worker's mistakes moved mixture 1
    mixture2 = Perceptron.from_state(
        fold(mixture1, [(states[1], [steps[1]])], workers=2, lags=[[lag]])
    )
    assert mixture2.weights == pytest.approx(at_once.weights)
    total = _add(base_sum, *sums)
    assert mixture2.average_weights == pytest.approx({k: v / 130 for k, v in total.items()})
    unplaced = Perceptron.from_state(fold(mixture1, [(states[1], [steps[1]])], workers=2))
    assert unplaced.average_weights != pytest.approx(mixture2.average_weights)


def test_one_worker_folds_into_the_sequential_learner_exactly() -> None:
    """N = 1: the mixture of one worker's increments is the learner it would be alone."""
    base = Perceptron(averaged=True)
    _learn(base, _stream(11, 40))
    worker = Perceptron.from_state(base.get_state())
    _learn(worker, _stream(12, 25))
    step = increment(worker.get_state(), form(base.get_state()))
    mixed = Perceptron.from_state(fold(base.get_state(), [(worker.get_state(), [step])]))
    assert mixed.weights == pytest.approx(worker.weights)
    assert mixed.average_weights == pytest.approx(worker.average_weights)
    assert math.isclose(mixed.average_bias, worker.average_bias)


def test_an_earlier_releases_increment_is_refused_clearly() -> None:
    old = {"n": 1, "classes": [{"label": None, "weights": [], "bias": 1.0, "sums": [],
                                "sum_bias": 1.0}]}  # fmt: skip
    with pytest.raises(MixError, match="earlier release"):
        Form.decode(old)


def test_increments_split_anywhere_fold_the_same() -> None:
    base = Perceptron(averaged=True)
    _learn(base, _stream(4, 20))
    w = Perceptron.from_state(base.get_state())
    _learn(w, _stream(5, 15))
    middle = w.get_state()
    _learn(w, _stream(6, 15))
    whole = fold(base.get_state(), [(w.get_state(), [increment(w.get_state(),
                                                               form(base.get_state()))])])
    first = increment(middle, form(base.get_state()))
    # the second began where the first ended, the first not in the base: pending
    parts = [first, increment(w.get_state(), form(middle), [first])]
    split = fold(base.get_state(), [(w.get_state(), parts)])
    a, b = Perceptron.from_state(whole), Perceptron.from_state(split)
    assert a.weights == pytest.approx(b.weights)
    assert a.average_weights == pytest.approx(b.average_weights)
    assert a.n_seen == b.n_seen == 50


def test_moving_onto_a_newer_mixture_keeps_what_it_does_not_hold() -> None:
    old = Perceptron(averaged=True)
    _learn(old, _stream(7, 40))
    new = Perceptron.from_state(old.get_state())
    _learn(new, _stream(8, 25))  # what the others added meanwhile
    worker = Perceptron.from_state(old.get_state())
    _learn(worker, _stream(9, 12))
    moved = Perceptron.from_state(
        translate(worker.get_state(), [(1.0, form(new.get_state())),
                                       (-1.0, form(old.get_state()))])  # fmt: skip
    )
    assert moved.n_seen == 40 + 25 + 12
    assert moved.weights == pytest.approx(
        _add(new.weights, worker.weights, old.weights, coefs=(1, 1, -1))
    )
    # and it goes on learning from there like any learner
    before = moved.n_seen
    moved.learn_one({"f0": 1.0}, True)
    assert moved.n_seen == before + 1


def test_multiclass_folds_per_class_and_a_new_class_joins() -> None:
    base = MulticlassPerceptron(averaged=True)
    for x, y in _stream(10, 20):
        base.learn_one(x, "a" if y else "b")
    w = MulticlassPerceptron.from_state(base.get_state())
    w.learn_one({"f0": 1.0}, "c")  # a class the base never saw
    step = increment(w.get_state(), form(base.get_state()))
    mixed = MulticlassPerceptron.from_state(fold(base.get_state(), [(w.get_state(), [step])]))
    assert mixed.predict_one({"f0": 1.0}) == w.predict_one({"f0": 1.0})
    assert mixed.n_seen == 21


def test_other_hyperparameters_are_refused() -> None:
    base, other = Perceptron().get_state(), Perceptron(lr=0.5)
    other.learn_one({"x": 1.0}, True)
    with pytest.raises(MixError, match="same model"):
        fold(base, [(other.get_state(), [increment(other.get_state(), form(base))])])


def test_a_malformed_increment_is_refused() -> None:
    with pytest.raises(MixError, match="malformed"):
        Form.decode({"n": 1, "classes": [{"label": None}]})


@pytest.mark.parametrize("averaged", [False, True], ids=["plain", "averaged"])
def test_an_increment_holds_only_the_features_its_mistakes_touched(averaged) -> None:
    """Two examples on a 20,000-feature model: the increment names those examples' features,
    not the model's (a plain one was 652 KiB when every key was copied; an averaged one held
    the weight sums of every non-zero weight), its accumulators too."""
    model = Perceptron(averaged=averaged)
    for i in range(0, 20_000, 50):
        model.learn_one({f"f{j}": 1.0 for j in range(i, i + 50)}, i % 100 == 0)
    before = form(model.get_state())
    model.learn_one({"f1": -3.0, "f7": 2.0, "new": 1.0}, True)
    model.learn_one({"f1": 3.0, "f7": -2.0, "new": -1.0}, False)
    step = increment(model.get_state(), before)
    (part,) = step.parts.values()
    names = {name for _, name in part["w"]} | {name for _, name in part["u"]}
    assert names <= {"f1", "f7", "new"}
    assert (part["u"] != {}) == averaged and step.t == 2
    encoded = json.dumps(step.encode())
    assert len(encoded) < 500, len(encoded)
    # and it still moves a copy of the earlier model onto the later one exactly
    moved = Perceptron.from_state(translate(to_state(model.get_state(), before), [(1.0, step)]))
    assert moved.weights == pytest.approx(model.weights) and moved.bias == model.bias
    if averaged:
        assert moved.average_weights == pytest.approx(model.average_weights)
