"""Hostile input, round three (issue 42): the checkpoint is an input too.

A checkpoint made by a real ``run --checkpoint``, then edited, must be refused by ``inspect``
and ``run --resume`` alike: exit 1, one line naming the field, no traceback, the file left
byte for byte as it was. The unit tests inject every kind of wrong number into every numeric
field of every learner kind's state, and of the drift detectors' states.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import binary_examples, run_cli, to_csv

from stream_perceptron.drift import DriftMonitor
from stream_perceptron.engine.drift_reference import ReferenceWatch, reference_monitor
from stream_perceptron.errors import StateError
from stream_perceptron.learners import (
    CentroidClassifier,
    MulticlassPassiveAggressive,
    MulticlassPerceptron,
    PassiveAggressive,
    Perceptron,
    Preprocessed,
    StreamClassifier,
)
from stream_perceptron.state import read_json

EXAMPLES = binary_examples(600, seed=42)
DATA = to_csv(EXAMPLES)
REFERENCE = ("--drift-detector", "reference", "--drift-reference-after", "200")
MARK = "@@hostile@@"  # a string the edit puts where a JSON literal of its own goes


@pytest.fixture(scope="module")
def checkpoint_of(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., dict[str, Any]]:
    """The checkpoint a real ``run --checkpoint`` with ``flags`` writes (one run per flags)."""
    made: dict[tuple[str, ...], str] = {}

    def make(*flags: str) -> dict[str, Any]:
        if flags not in made:
            ck = tmp_path_factory.mktemp("ck") / "ck.json"
            proc = run_cli("run", "--format", "csv", "--checkpoint", str(ck), *flags, stdin=DATA)
            assert proc.returncode == 0, proc.stderr.decode()
            made[flags] = ck.read_text()
        return json.loads(made[flags])

    return make


def _write(path: Path, state: dict[str, Any], literal: str | None = None) -> None:
    text = json.dumps(state)
    if literal is not None:
        assert text.count(json.dumps(MARK)) == 1
        text = text.replace(json.dumps(MARK), literal)
    path.write_text(text)


def _refused(ck: Path, field: str, *flags: str) -> None:
    """``inspect`` and ``run --resume`` (with ``flags``) refuse ``ck`` in one line naming
    ``field``, without a traceback, and leave it byte for byte as it was."""
    before = ck.read_bytes()
    resume = ["run", "--format", "csv", "--checkpoint", str(ck), "--resume", *flags]
    for args in (["inspect", str(ck)], resume):
        proc = run_cli(*args, stdin=DATA)
        err = proc.stderr.decode()
        assert proc.returncode == 1, (args, err)
        assert "Traceback" not in err, err
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("stream-perceptron: error: "), err
        assert field in lines[0], err
        assert proc.stdout == b""
    assert ck.read_bytes() == before


# -- class 3: non-finite numbers, negative variances and counts, more mistakes than examples --
def _set(state: dict[str, Any], path: str, value: Any) -> None:
    *where, last = (int(p) if p.lstrip("-").isdigit() else p for p in path.split("/"))
    for p in where:
        state = state[p]
    state[last] = value


NON_FINITE = [  # flags, the field's path in the checkpoint, the literal, what the message names
    ((), "model/weights/0/1", "NaN", "model.weights[0][1] is NaN"),
    ((), "model/bias", "Infinity", "model.bias is Infinity"),
    (("--averaged",), "model/avg_weights_acc/1/1", "-Infinity", "model.avg_weights_acc[1][1]"),
    (("--averaged",), "model/avg_bias_acc", "1e400", "model.avg_bias_acc is 1e400"),
    (("--averaged",), "model/max_norm", "NaN", "model.max_norm is NaN"),
    (("--scale", "standard"), "model/scaler/stats/0/2", "NaN", "model.scaler.stats[0][2]"),
    (("--scale", "standard"), "model/scaler/stats/2/3", "1e999", "model.scaler.stats[2][3]"),
]


@pytest.mark.parametrize(("flags", "path", "literal", "named"), NON_FINITE)
def test_a_non_finite_number_in_a_checkpoint_is_refused_where_it_is_read(
    tmp_path, checkpoint_of, flags, path, literal, named
):
    state = checkpoint_of(*flags)
    _set(state, path, MARK)
    ck = tmp_path / "ck.json"
    _write(ck, state, literal)
    _refused(ck, named, *flags)


OUT_OF_RANGE = [  # flags, the field's path, the value, what the message names
    ((), "model/n_seen", -1, "n_seen is -1"),
    ((), "model/n_mistakes", 601, "n_mistakes is 601, not a count from 0 to 600 (n_seen)"),
    ((), "model/max_norm", -2.5, "max_norm is -2.5"),
    ((), "model/weights/0/1", "0.5", "weights['f0'] is '0.5', not a number"),
    (("--scale", "standard"), "model/scaler/stats/1/3", -0.25, "['f1'].variance is -0.25"),
    (("--scale", "standard"), "model/scaler/stats/1/1", -3, "['f1'].n is -3"),
    (("--scale", "standard"), "model/scaler/stats/1/2", 1e300, "['f1'].mean is 1e+300"),
    (("--averaged",), "model/avg_ref", 10**30, "avg_ref is 1000000000000000000000000000000"),
    (("--averaged",), "model/params/lr", "fast", "params.lr is 'fast'"),
]


@pytest.mark.parametrize(("flags", "path", "value", "named"), OUT_OF_RANGE)
def test_a_count_or_statistic_out_of_its_range_is_refused(
    tmp_path, checkpoint_of, flags, path, value, named
):
    state = checkpoint_of(*flags)
    _set(state, path, value)
    ck = tmp_path / "ck.json"
    _write(ck, state)
    _refused(ck, named, *flags)


# -- class 4: drift states that gave tracebacks, or a failed final save -----------------------
@pytest.mark.parametrize(
    ("path", "value", "named"),
    [
        ("stats/drift/seen", 10**30, "seen is 1000000000000000000000000000000"),
        ("stats/drift/open_sum", 10**30, "open_sum is"),
        ("stats/drift/drifts", "2", "drifts is '2'"),
        ("stats/drift/first_drift", "x", "first_drift is 'x'"),
        ("stats/drift/delta", "0.002", "delta is '0.002'"),
        ("stats/drift/window/total", -1e308, "total is -1e+308"),
        ("stats/drift/window/variance", 1e308, "variance is 1e+308"),
        ("stats/drift/window/tick", "1", "corrupt drift window"),
    ],
)
def test_a_drift_state_that_gave_a_traceback_is_refused_in_one_line(
    tmp_path, checkpoint_of, path, value, named
):
    state = checkpoint_of()
    _set(state, path, value)
    ck = tmp_path / "ck.json"
    _write(ck, state)
    _refused(ck, named)


# -- class 5: drift states accepted when wrong ------------------------------------------------
def _other_kind() -> dict[str, Any]:
    model = MulticlassPerceptron()
    for x, y in EXAMPLES[:50]:
        model.learn_one(x, y)
    return model.get_state()


def _scaled_copy(state: dict[str, Any]) -> dict[str, Any]:
    copy = Preprocessed(StreamClassifier.from_state(state), scale="standard")
    return copy.get_state()


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (lambda r: r.update(model=_other_kind()), "model is a copy of MulticlassPerceptron"),
        (lambda r: r.update(model=_scaled_copy(r["model"])), "model is a copy of Preprocessed"),
        (lambda r: r.update(model=None, taken_at=None, due=10**12), "due is 1000000000000"),
        (lambda r: r.update(taken_at="200"), "taken_at is '200'"),
        (lambda r: r.update(taken_at=10**6), "taken_at is 1000000"),
        (lambda r: r.update(after=0), "after is 0"),
    ],
)
def test_a_reference_copy_of_another_kind_or_due_too_late_is_refused(
    tmp_path, checkpoint_of, edit, named
):
    state = checkpoint_of(*REFERENCE)
    assert state["stats"]["drift_reference"]["taken_at"] == 200  # a copy held
    edit(state["stats"]["drift_reference"])
    ck = tmp_path / "ck.json"
    _write(ck, state)
    _refused(ck, named, *REFERENCE)


@pytest.mark.parametrize(
    ("path", "value", "named"),
    [
        ("stats/drift/drifts", 10**15, "drifts is 1000000000000000"),
        ("stats/drift/last_drift", 10**9, "last_drift is 1000000000"),
        ("stats/drift/seen", 601, "seen is 601, not a count from 0 to 600 (the examples learned)"),
        ("stats/drift/positions", [5, 6], "positions is [5, 6]"),
    ],
)
def test_absurd_drift_counts_are_refused_not_reported(tmp_path, checkpoint_of, path, value, named):
    state = checkpoint_of(*REFERENCE)
    _set(state, path, value)
    ck = tmp_path / "ck.json"
    _write(ck, state)
    _refused(ck, named, *REFERENCE)


# -- class 6: a changed detector setting is a warning, not corruption -------------------------
@pytest.mark.parametrize(("saved", "now"), [(REFERENCE, ()), ((), REFERENCE)])
def test_a_changed_drift_detector_warns_in_one_line_and_starts_afresh(
    tmp_path, checkpoint_of, saved, now
):
    ck = tmp_path / "ck.json"
    _write(ck, checkpoint_of(*saved))
    proc = run_cli("run", "--format", "csv", "--checkpoint", str(ck), "--resume", *now,
                   stdin=DATA)  # fmt: skip
    err = proc.stderr.decode()
    assert proc.returncode == 0, err
    assert "error" not in err and "Traceback" not in err
    warned = [line for line in err.splitlines() if "drift detector" in line]
    assert len(warned) == 1 and "starts afresh" in warned[0], err
    drift = json.loads(ck.read_text())["stats"]["drift"]
    assert drift["detector"] == ("reference" if now else "adwin")


# -- class 10 (part): a key twice -------------------------------------------------------------
def test_a_key_twice_in_the_checkpoint_json_is_refused_naming_it(tmp_path, checkpoint_of):
    ck = tmp_path / "ck.json"
    text = json.dumps(checkpoint_of())
    assert text.count('"n_seen": 600') == 1
    ck.write_text(text.replace('"n_seen": 600', '"n_seen": 600, "n_seen": 6'))
    _refused(ck, "the key 'n_seen' appears twice")


def test_a_feature_twice_among_the_weights_is_refused_naming_it(tmp_path, checkpoint_of):
    state = checkpoint_of()
    state["model"]["weights"].append(["f2", 0.5])
    ck = tmp_path / "ck.json"
    _write(ck, state)
    _refused(ck, "weights has the key 'f2' twice")


# -- every numeric field of every learner kind's state ----------------------------------------
def _learned(model: StreamClassifier, multiclass: bool) -> StreamClassifier:
    for i, (x, y) in enumerate(EXAMPLES[:200]):
        model.learn_one(x, "abc"[(i + y) % 3] if multiclass else y)
    return model


KINDS: dict[str, Callable[[], StreamClassifier]] = {
    "perceptron": lambda: _learned(Perceptron(), False),
    "averaged": lambda: _learned(Perceptron(averaged=True, average_half_life=300.0), False),
    "multiclass": lambda: _learned(MulticlassPerceptron(averaged=True), True),
    "pa": lambda: _learned(PassiveAggressive(C=0.5), False),
    "pa-multiclass": lambda: _learned(MulticlassPassiveAggressive(), True),
    "centroid": lambda: _learned(CentroidClassifier(), True),
    "scale": lambda: _learned(Preprocessed(Perceptron(averaged=True), scale="standard"), False),
    "hash-bits": lambda: _learned(Preprocessed(Perceptron(), hash_bits=6), False),
    "rff": lambda: _learned(Preprocessed(MulticlassPerceptron(), rff_components=4), True),
}
#: float fields that cannot be negative either
NON_NEGATIVE = {"max_norm", "sum_sq_norm", "lr", "C", "rff_gamma", "gamma"}
#: [key, value] pairs: the key (a feature's name, maybe a number) is not a number to check
PAIRS = {"weights", "avg_weights_acc", "sums"}


def _numeric_fields(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The paths of a state's numbers (the first of each list: every kind of field once)."""
    if isinstance(value, bool) or path[-1:] == ("rng",):  # numpy's own state: its own checks
        return
    if isinstance(value, (int, float)):
        yield path
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _numeric_fields(v, (*path, k))
    elif isinstance(value, list) and value:
        if len(path) >= 2 and path[-2] in PAIRS and len(value) == 2:  # a [key, value] pair
            yield from _numeric_fields(value[1], (*path, 1))
        elif path[-1:] == ("stats",):  # the scaler's rows: [feature, n, mean, variance]
            for i in (1, 2, 3):
                yield from _numeric_fields(value[0][i], (*path, 0, i))
        else:
            yield from _numeric_fields(value[0], (*path, 0))


def _name(path: tuple[Any, ...]) -> str:
    return [p for p in path if isinstance(p, str)][-1]


def _with(state: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    copy = json.loads(json.dumps(state))
    holder = copy
    for p in path[:-1]:
        holder = holder[p]
    holder[path[-1]] = value
    return copy


INJECTED = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "10**400": 10**400,
            "string": "7", "negative": -1}  # fmt: skip


@pytest.mark.parametrize("injected", list(INJECTED))
@pytest.mark.parametrize("kind", list(KINDS))
def test_every_numeric_field_of_every_learner_state_is_checked(kind, injected):
    state = json.loads(json.dumps(KINDS[kind]().get_state()))
    assert type(StreamClassifier.from_state(state)).__name__ == state["learner"]
    fields = list(_numeric_fields(state))
    assert len(fields) >= 5, fields
    accepted, unnamed = [], []
    for path in fields:
        holder: Any = state
        for p in path:
            holder = holder[p]
        if injected == "negative" and not (type(holder) is int or _name(path) in NON_NEGATIVE):
            continue  # a negative weight, bias or mean is a number like any
        try:
            StreamClassifier.from_state(_with(state, path, INJECTED[injected]))
        except StateError as e:
            # Preprocessed's rff_* are its map's n_components, gamma and seed
            if _name(path).removeprefix("rff_") not in str(e):
                unnamed.append((path, str(e)))
        else:
            accepted.append(path)
    assert accepted == [] and unnamed == []


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400", "-1e999"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_every_numeric_field_refuses_a_non_finite_literal_at_parse_time(tmp_path, kind, literal):
    state = json.loads(json.dumps(KINDS[kind]().get_state()))
    path_of = tmp_path / "state.json"
    for path in _numeric_fields(state):
        _write(path_of, _with(state, path, MARK), literal)
        with pytest.raises(StateError, match=f"is {literal}, not a finite number") as e:
            StreamClassifier.from_state(read_json(path_of))
        assert _name(path) in str(e.value)


# -- the drift detectors' states, field by field ----------------------------------------------
def _monitor_state() -> dict[str, Any]:
    monitor = DriftMonitor()
    monitor.observe([i % 7 == 0 or 3_000 <= i < 3_400 for i in range(5_000)])
    assert monitor.drifts >= 1
    return json.loads(json.dumps(monitor.get_state()))


@pytest.mark.parametrize("injected", list(INJECTED))
def test_every_numeric_field_of_a_drift_state_is_checked(injected):
    state = _monitor_state()
    DriftMonitor().load_state(state)
    accepted = []
    for path in _numeric_fields(state):  # none of them negative: counts, sums of rates, delta
        try:
            DriftMonitor().load_state(_with(state, path, INJECTED[injected]))
        except StateError as e:
            assert "\n" not in str(e)
        else:
            accepted.append(path)
    assert accepted == []


def test_a_reference_state_is_checked_against_the_model_it_watches():
    model = Perceptron()
    for x, y in EXAMPLES[:100]:
        model.learn_one(x, y)
    good = {"version": 1, "after": 50, "due": None, "taken_at": 80, "model": model.get_state()}
    watch = ReferenceWatch(model, reference_monitor(), after=50)
    watch.load_state(good)
    assert watch.taken_at == 80
    averaged = Perceptron(averaged=True)
    for bad, named in [
        ({**good, "model": _other_kind()}, "MulticlassPerceptron"),
        ({**good, "model": averaged.get_state()}, "averaged=True"),
        ({**good, "model": _scaled_copy(good["model"])}, "Preprocessed"),
        ({**good, "taken_at": "80"}, "taken_at"),
        ({**good, "model": None, "taken_at": None, "due": 10**30}, "due"),
        ({**good, "after": math.nan}, "after"),
        ({**good, "version": True}, "version"),
    ]:
        with pytest.raises(StateError, match="corrupt drift reference state") as e:
            ReferenceWatch(model, reference_monitor(), after=50).load_state(bad)
        assert named in str(e.value)
    for bad, named in [  # against the examples the run learned (a checkpoint's 100)
        ({**good, "taken_at": 101}, "taken_at is 101"),
        ({**good, "model": None, "taken_at": None, "due": 151}, "due is 151"),
    ]:
        with pytest.raises(StateError, match=named):
            ReferenceWatch(model, reference_monitor(), after=50).load_state(bad, 100)
