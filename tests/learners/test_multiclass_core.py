"""``_speedups.MulticlassCore``: the multi-class perceptron's ``predict_one``, ``learn_one`` and
``predict_learn_one`` in C (issue 25).

As for the binary core (test_binary_core.py): the C methods must give what the learner's
Python methods give with the C helpers off, to the bit (predictions, exceptions, the whole
state, key order included); they must really run (``_fast_steps``), use ``predict_one``'s fold
only for that very dict unchanged (``_memo_hits``), keep no reference to it afterwards, and
leave what they do not handle (labels other than str and int, a class that is a bool, a value
too large) to the Python methods, having changed nothing.
"""

from __future__ import annotations

import copy
import random
import sys
from typing import Any

import pytest
from core_helpers import (
    MEMO_CHANGES,
    bits,
    check_copies_carry_the_fields,
    check_memo_serves,
    needs_speedups,
    pure_run,
    run,
)

import stream_perceptron.learners._multiclass_model as multiclass_model_module
from stream_perceptron import MulticlassPerceptron
from stream_perceptron.errors import LabelError, ValueTooLargeError
from stream_perceptron.learners._core import MULTICLASS_FIELDS

pytestmark = needs_speedups


def stream(n: int, classes: list[Any], seed: int = 5) -> list[tuple[dict, Any]]:
    """Noisy examples of len(classes) clusters: str keys, float and small-int values, features
    that appear over time; classes appear one after another."""
    rng = random.Random(seed)
    names = [f"f{i}" for i in range(10)]
    out = []
    for i in range(n):
        c = rng.randrange(min(len(classes), 1 + i // 20))
        keys = rng.sample(names[: 3 + i % 8], rng.randint(1, 3 + i % 8))
        x: dict[str, float | int] = {}
        for k in keys:
            v = rng.uniform(-1.0, 1.0) + (1.5 if int(k[1:]) % len(classes) == c else 0.0)
            x[k] = rng.randint(-2, 2) if rng.random() < 0.15 else v
        out.append((x, classes[c]))
    return out


@pytest.mark.parametrize("api", ["split", "fused"])
@pytest.mark.parametrize("bias", ["learned", "r2", "none"])
@pytest.mark.parametrize(
    ("averaged", "lr", "half_life"),
    [(False, 1.0, None), (False, 0.5, None), (False, 3, None), (True, 1.0, None),
     (True, 0.5, None), (True, 2, None), (True, 1.0, 0.5), (True, 0.5, 40.0)],
)  # fmt: skip
@pytest.mark.parametrize("classes", [["red", "green", "blue", "cyan"], [3, 1, -7, 10**20]])
def test_the_c_methods_are_the_python_reference(
    api, bias, averaged, lr, half_life, classes, monkeypatch
):
    data = stream(500, classes)

    def make() -> MulticlassPerceptron:
        return MulticlassPerceptron(
            lr=lr, bias=bias, averaged=averaged, average_half_life=half_life
        )

    fast = make()
    got = run(fast, data, api)
    pure, want = pure_run(multiclass_model_module, make, data, api, monkeypatch)
    assert got == want
    assert bits(fast.get_state()) == bits(pure.get_state())
    assert pure._fast_steps == 0
    # every example in C but the first (the store taken), those after which the forgetting
    # average's accumulators are rescaled (every 128 with a half-life of 0.5) too: the rule in
    # C rescales the store
    rescalings = int(len(data) / (256 * half_life)) if half_life else 0
    assert fast._avg_ref > 0 or not rescalings
    assert fast._fast_steps >= len(data) - 1, fast._fast_steps
    if api == "split":
        assert fast._memo_hits >= fast._fast_steps - 1  # the first: Python's


@pytest.mark.parametrize(
    "classes",
    [[True, False], [1.5, 2.5, 3.5], [("t", 1), ("t", 2)], [None, "a", "b"]],
    ids=["bool", "float", "tuple", "none"],
)
def test_other_labels_are_left_to_python(classes, monkeypatch):
    data = stream(200, classes)
    fast = MulticlassPerceptron(averaged=True)
    got = run(fast, data, "split")
    pure, want = pure_run(
        multiclass_model_module, lambda: MulticlassPerceptron(averaged=True), data, "split",
        monkeypatch,
    )  # fmt: skip
    assert got == want
    model = (fast.weights, fast.bias, fast.average_weights, fast.n_mistakes, fast.max_norm)
    assert bits(model) == bits(
        (pure.weights, pure.bias, pure.average_weights, pure.n_mistakes, pure.max_norm)
    )
    if classes[0] is not None:  # None first: the str classes after it are C's
        assert fast._fast_steps == 0


def test_an_int_label_after_a_bool_class_is_checked_in_python():
    model = MulticlassPerceptron()
    for x, y in stream(50, ["a", "b"]):
        model.learn_one(x, y)
    model.learn_one({"f0": 1.0}, True)  # a bool class: ints now clash with it (True == 1)
    steps = model._fast_steps
    with pytest.raises(LabelError):
        model.learn_one({"f0": 1.0}, 1)
    assert model._fast_steps == steps


def trained() -> MulticlassPerceptron:
    model = MulticlassPerceptron()
    for x, y in stream(80, ["r", "g", "b"]):
        model.learn_one(x, y)
    assert model._store is not None
    return model


@MEMO_CHANGES
def test_the_memo_serves_only_the_same_unchanged_dict(change, monkeypatch):
    model = trained()
    pure = copy.deepcopy(model)
    pure._store_retry_at = float("inf")  # the reference stays in its dicts

    def learn_pure(x: dict, y: str) -> None:
        monkeypatch.setattr(multiclass_model_module, "_speedups", None)
        pure.learn_one(x, y)

    check_memo_serves(model, "g", change, learn_pure)
    assert bits(model.get_state()) == bits(pure.get_state())


def test_x_is_not_kept():
    model = trained()
    x = {"f0": -1.5, "f1": 0.25}
    before = sys.getrefcount(x)
    model.predict_one(x)
    assert sys.getrefcount(x) == before + 1
    model.learn_one(x, "r")
    assert sys.getrefcount(x) == before
    model.predict_learn_one(x, "b")
    assert sys.getrefcount(x) == before


@pytest.mark.parametrize("api", ["learn", "fused"])
@pytest.mark.parametrize(
    ("x", "error"),
    [({"f0": float("inf")}, ValueTooLargeError), ({"f0": 1e300, "f1": 1e300}, ValueTooLargeError)],
)
def test_what_would_raise_raises_as_in_python_and_changes_nothing(api, x, error):
    model = MulticlassPerceptron(bias="r2")
    for xi, yi in stream(50, ["r", "g"]):
        model.learn_one(xi, yi)
    before = bits(model.get_state())
    reference = copy.deepcopy(model)
    with pytest.raises(error) as raised:
        (model.learn_one if api == "learn" else model.predict_learn_one)(x, "b")
    with pytest.raises(error) as expected:
        (reference._learn_one_py if api == "learn" else reference._predict_learn_one_py)(x, "b")
    assert str(raised.value) == str(expected.value)
    assert bits(model.get_state()) == before
    model.learn_one({"f0": 1.0}, "r")
    assert model.n_seen == 51


def fields(model: MulticlassPerceptron) -> dict[str, Any]:
    return {name: bits(getattr(model, name)) for name in MULTICLASS_FIELDS if name != "_store"}


def test_copies_pickles_and_replacements_carry_the_fields():
    other = MulticlassPerceptron(lr=0.5, averaged=True)
    check_copies_carry_the_fields(trained(), stream(100, ["r", "g", "b"], seed=9), fields, other)


def test_a_subclass_replacing_the_learning_code_is_not_run_in_c():
    class Logged(MulticlassPerceptron):
        def _update(self, *args: Any) -> None:
            super()._update(*args)

    model = Logged()
    for x, y in stream(100, ["r", "g"]):
        model.predict_one(x)
        model.learn_one(x, y)
    assert model._fast_steps == 0 and model._store is None


def tied_stream(n: int, n_classes: int, seed: int = 9) -> list[tuple[dict, Any]]:
    """Small-integer features and dense rows: many classes score the same, so the argmax's
    ties (the first class seen wins) decide many predictions."""
    rng = random.Random(seed)
    return [
        ({f"f{j}": float(rng.randint(-1, 1)) for j in range(6)}, f"c{rng.randrange(n_classes)}")
        for _ in range(n)
    ]


@pytest.mark.parametrize("n_classes", [1, 2, 3, 4, 5, 7, 10, 12, 13, 19])
@pytest.mark.parametrize("averaged", [False, True])
@pytest.mark.parametrize("api", ["split", "fused"])
def test_ties_and_class_counts_are_the_reference(n_classes, averaged, api, monkeypatch):
    # the store's fold has a form for each class count up to 12 and one past it; its argmax
    # picks without a branch when no class is None
    data = tied_stream(600, n_classes)
    fast = MulticlassPerceptron(averaged=averaged)
    got = run(fast, data, api)
    pure, want = pure_run(
        multiclass_model_module, lambda: MulticlassPerceptron(averaged=averaged), data, api,
        monkeypatch,
    )  # fmt: skip
    assert got == want
    assert bits(fast.get_state()) == bits(pure.get_state())
    assert fast._fast_steps > 500
