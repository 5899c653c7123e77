"""``_speedups.BinaryCore``: the binary perceptron's ``predict_one``, ``learn_one`` and
``predict_learn_one`` in C (issue 25).

The C methods must give what the learner's Python methods give with the C helpers off (the
pure-Python reference), to the bit: predictions, exceptions, the whole state; they must really
run (``_fast_steps``), use ``predict_one``'s fold only for that very dict unchanged
(``_memo_hits``), keep no reference to it afterwards, and leave everything they do not handle
to the Python methods, having changed nothing. The scalars are fields of the C object: copies,
pickles and in-place replacements must carry them.
"""

from __future__ import annotations

import copy
import random
import sys
from typing import Any

import pytest
from core_helpers import (
    MEMO_CHANGES,
    _speedups,
    bits,
    check_copies_carry_the_fields,
    check_memo_serves,
    needs_speedups,
    pure_run,
    run,
)

import stream_perceptron.learners.perceptron as perceptron_module
from stream_perceptron import Perceptron
from stream_perceptron.errors import LabelError, ValueTooLargeError
from stream_perceptron.learners._core import BINARY_FIELDS

pytestmark = needs_speedups


def stream(n: int, labels: tuple[Any, Any], seed: int = 3) -> list[tuple[dict, Any]]:
    """Noisy, drifting examples: str keys, float and small-int values, features that appear
    over time, both labels."""
    rng = random.Random(seed)
    names = [f"f{i}" for i in range(12)]
    out = []
    for i in range(n):
        keys = rng.sample(names[: 4 + i % 9], rng.randint(1, 4 + i % 9))
        x: dict[str, float | int] = {}
        for k in keys:
            x[k] = rng.randint(-3, 3) if rng.random() < 0.2 else rng.uniform(-2.0, 2.0)
        y = labels[1] if sum(x.values()) + rng.gauss(0, 0.5) > 0 else labels[0]
        out.append((x, y))
    return out


@pytest.mark.parametrize("api", ["split", "fused"])
@pytest.mark.parametrize("bias", ["learned", "r2", "none"])
@pytest.mark.parametrize(("averaged", "lr"), [(False, 1.0), (False, 0.5), (False, 3),
                                              (True, 1.0), (True, 0.5), (True, 2)])  # fmt: skip
@pytest.mark.parametrize("labels", [(False, True), (0, 1), (-1, 1)])
def test_the_c_methods_are_the_python_reference(api, bias, averaged, lr, labels, monkeypatch):
    data = stream(400, labels)

    def make() -> Perceptron:
        return Perceptron(lr=lr, bias=bias, averaged=averaged)

    fast = make()
    got = run(fast, data, api)
    pure, want = pure_run(perceptron_module, make, data, api, monkeypatch)
    assert got == want
    assert bits(fast.get_state()) == bits(pure.get_state())
    assert pure._fast_steps == 0
    # every example but the first few (until the encoding settles and the store is taken) in C
    assert fast._fast_steps >= len(data) - 10, fast._fast_steps
    if api == "split":
        assert fast._memo_hits == fast._fast_steps  # each learn_one used predict_one's fold


@pytest.mark.parametrize("api", ["split", "fused"])
@pytest.mark.parametrize("half_life", [0.5, 3, 40.0])
def test_a_forgetting_average_and_its_rescaling_are_the_python_reference(
    api, half_life, monkeypatch
):
    """A half-life of 0.5 rescales the accumulators every 128 examples (Python's
    ``_renormalise``; the rule in C rescales the store too, so that example is learned in C
    like every other)."""
    data = stream(600, (False, True))

    def make() -> Perceptron:
        return Perceptron(averaged=True, average_half_life=half_life, bias="r2")

    fast = make()
    got = run(fast, data, api)
    pure, want = pure_run(perceptron_module, make, data, api, monkeypatch)
    assert got == want and bits(fast.get_state()) == bits(pure.get_state())
    rescalings = int(len(data) / (256 * half_life))
    assert fast._avg_ref > 0 or not rescalings
    # every example but the first (the encoding settles in Python), the rescaling ones too
    assert fast._fast_steps == len(data) - 1, fast._fast_steps


def trained() -> Perceptron:
    model = Perceptron()
    for x, y in stream(50, (False, True)):
        model.learn_one(x, y)
    assert model._store is not None
    return model


@MEMO_CHANGES
def test_the_memo_serves_only_the_same_unchanged_dict(change, monkeypatch):
    model = trained()
    pure = copy.deepcopy(model)
    monkeypatch.setattr(perceptron_module, "_speedups", None)
    pure._store_retry_at = float("inf")  # the reference stays in its dicts
    monkeypatch.setattr(perceptron_module, "_speedups", _speedups)
    check_memo_serves(model, True, change, pure._learn_one_py)
    assert bits(model.get_state()) == bits(pure.get_state())


def test_another_dict_or_a_learned_example_in_between_is_not_served():
    model = trained()
    x = {"f0": -1.5, "f1": 0.25}
    model.predict_one(x)
    hits = model._memo_hits
    model.learn_one(dict(x), True)  # an equal dict: folded anew
    assert model._memo_hits == hits
    model.predict_one(x)
    model.learn_one({"f3": 1.0}, False)
    model.learn_one(x, True)  # the model moved on (n_seen, the store's version)
    assert model._memo_hits == hits


def test_x_is_not_kept():
    model = trained()
    x = {"f0": -1.5, "f1": 0.25}
    before = sys.getrefcount(x)
    model.predict_one(x)
    assert sys.getrefcount(x) == before + 1  # held for the learn_one that follows
    model.learn_one(x, True)
    assert sys.getrefcount(x) == before
    model.predict_learn_one(x, False)
    assert sys.getrefcount(x) == before


@pytest.mark.parametrize("api", ["learn", "fused"])
@pytest.mark.parametrize(
    ("x", "y", "error"),
    [
        ({"f0": float("inf")}, True, ValueTooLargeError),
        ({"f0": 1e200, "f1": 1e200}, False, ValueTooLargeError),  # R**2 or a weight: inf
        ({"f0": 1.0}, "yes", LabelError),
        ({"f0": 1.0}, 2, LabelError),
        ({"f0": 1.0}, [1], TypeError),  # unhashable: dict.get's own error
    ],
)
def test_what_would_raise_raises_as_in_python_and_changes_nothing(api, x, y, error):
    model = Perceptron(bias="r2")
    for xi, yi in stream(50, (False, True)):
        model.learn_one(xi, yi)
    model.learn_one({"f0": 1e150}, True)  # R = 1e150: r2's bias step is past a float
    before = bits(model.get_state())
    reference = copy.deepcopy(model)
    with pytest.raises(error) as raised:
        (model.learn_one if api == "learn" else model.predict_learn_one)(x, y)
    with pytest.raises(error) as expected:
        (reference._learn_one_py if api == "learn" else reference._predict_learn_one_py)(x, y)
    assert str(raised.value) == str(expected.value)
    assert bits(model.get_state()) == before
    model.learn_one({"f0": 1.0}, True)  # and the next example is learned
    assert model.n_seen == 52


def test_keyword_arguments_and_other_dicts_go_to_python():
    model = trained()
    steps = model._fast_steps
    assert model.predict_one({"f0": 1.0}, extra=1) == model.predict_one({"f0": 1.0})
    model.learn_one({1.5: 1.0}, True)  # a key the store does not take: the model to dicts
    assert model._fast_steps == steps and model._store is None


def fields(model: Perceptron) -> dict[str, Any]:
    """BinaryCore's fields but the store (a copy holds dicts), the encoding by its state."""
    got = {name: bits(getattr(model, name)) for name in BINARY_FIELDS if name != "_store"}
    got["_labels"] = model._labels.get_state()
    return got


def test_copies_pickles_and_replacements_carry_the_fields():
    check_copies_carry_the_fields(
        trained(), stream(100, (False, True), seed=9), fields, Perceptron(lr=0.5, averaged=True)
    )


def test_a_subclass_replacing_the_learning_code_is_not_run_in_c():
    class Logged(Perceptron):
        def _learn(self, x: dict, y: int, known: Any = None) -> float:
            return super()._learn(x, y, known)

    model = Logged()
    for x, y in stream(100, (False, True)):
        model.predict_one(x)
        model.learn_one(x, y)
    assert model._fast_steps == 0 and model._store is None
