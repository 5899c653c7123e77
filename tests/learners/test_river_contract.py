"""River's own estimator checks, run on every learner and bias mode."""

from __future__ import annotations

import pytest
from river import checks

from stream_perceptron import (
    CentroidClassifier,
    MulticlassPassiveAggressive,
    MulticlassPerceptron,
    PassiveAggressive,
    Perceptron,
    Preprocessed,
)

MODELS = [
    Perceptron(),
    Perceptron(bias="r2"),
    Perceptron(bias="none"),
    Perceptron(averaged=True),
    Perceptron(init="random", seed=3),
    MulticlassPerceptron(),
    MulticlassPerceptron(bias="r2", averaged=True),
    CentroidClassifier(),
    PassiveAggressive(),
    PassiveAggressive(C=0.01, variant="pa2", bias="none"),
    MulticlassPassiveAggressive(variant="pa"),
    Preprocessed(Perceptron(averaged=True), scale="standard"),
    Preprocessed(Perceptron(), hash_bits=4),
    Preprocessed(MulticlassPerceptron(averaged=True), scale="standard", hash_bits=8),
    Preprocessed(Perceptron(averaged=True), scale="standard", rff_components=16, rff_gamma=2.0),
    Preprocessed(MulticlassPerceptron(), rff_components=8, rff_seed=3),
]


def _cases():
    for model in MODELS:
        for check in checks.yield_checks(model):
            yield pytest.param(model, check, id=f"{model!r}-{check.__name__}")


@pytest.mark.parametrize(("model", "check"), list(_cases()))
def test_river_check(model, check):
    check(model.clone())


def test_river_checks_include_the_mini_batch_equivalence():
    """pandas is installed for the tests, so River checks learn_many against learn_one."""
    names = {check.__name__ for check in checks.yield_checks(Perceptron())}
    assert "check_learn_many_matches_learn_one" in names
    assert "check_predict_proba_one_binary" in names


def test_repr_round_trips():
    model = Perceptron(lr=0.5, bias="r2", init="random", seed=4, averaged=True)
    assert eval(repr(model)).get_state() == model.get_state()  # noqa: S307


def test_preprocessed_repr_round_trips():
    model = Preprocessed(MulticlassPerceptron(bias="r2"), scale="standard", hash_bits=6)
    for x, y in [({"a": 1.0, "b": 2.0}, "u"), ({"a": -1.0, "c": 0.5}, "v")] * 3:
        model.learn_one(x, y)
    again = eval(repr(model))  # noqa: S307
    assert repr(again) == repr(model)
    assert again.model.get_state()["params"] == model.model.get_state()["params"]
