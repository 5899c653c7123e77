"""A record whose update would make the model non-finite is dead-lettered as value_too_large,
never stored: the checkpoint stays writable, a resumed run does not crash-loop, and the block
path (dense kernels) dead-letters exactly what the per-record path does."""

from __future__ import annotations

import io
import json

import pytest
from cli_helpers import model_of, run_cli

from connectors import LineSource, MemorySink
from stream_perceptron import MulticlassPerceptron, Perceptron, native
from stream_perceptron.engine import Engine, Outputs
from stream_perceptron.formats import make_parser


def _finite_json(path) -> dict:
    return json.loads(path.read_text(), parse_constant=lambda name: pytest.fail(name))


def test_run_checkpoint_every_record_then_resume(tmp_path):
    rows = [f"{i % 5 - 2}.5,{(i * 7) % 3 - 1},{i % 2}" for i in range(40)]
    rows[7] = "0.0,1e200,0"  # R would be inf
    rows[23] = "1e154,1e154,1"  # its squares overflow
    data = ("a,b,y\n" + "\n".join(rows) + "\n").encode()
    ck, dead, source = tmp_path / "ck.json", tmp_path / "dead.jsonl", tmp_path / "in.csv"
    source.write_bytes(data[: data.index(b"1e154")])  # up to the second bad row
    first = run_cli(
        "run", "--format", "csv", "--input", str(source), "--checkpoint", str(ck),
        "--checkpoint-every", "1", "--fresh", "--dead-letter", str(dead),
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert model_of(ck).n_seen == 22
    _finite_json(ck)
    source.write_bytes(data)  # the file grew: --resume skips what was learned
    again = run_cli(
        "run", "--format", "csv", "--input", str(source), "--checkpoint", str(ck),
        "--checkpoint-every", "1", "--resume", "--dead-letter", str(dead),
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    letters = [json.loads(line) for line in dead.read_text().splitlines()]
    assert [(d["reason"], d["record"]) for d in letters] == [
        ("value_too_large", "0.0,1e200,0"),
        ("value_too_large", "1e154,1e154,1"),
    ]
    assert model_of(ck).n_seen == 38
    _finite_json(ck)
    # and once more: nothing left to learn, no crash
    third = run_cli("run", "--format", "csv", "--input", str(source), "--checkpoint", str(ck),
                    "--resume")  # fmt: skip
    assert third.returncode == 0, third.stderr
    assert model_of(ck).n_seen == 38


def _run(learner, fmt: str, data: bytes, dense: bool):
    predictions, dead = MemorySink(), MemorySink()
    engine = Engine(learner, make_parser(fmt), Outputs(predictions, dead), dense=dense)
    engine.run(LineSource(io.BytesIO(data), chunk_size=512))
    return engine, predictions.lines, dead.lines


@pytest.mark.skipif(native.dense is None, reason="the C extension is not built")
@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
@pytest.mark.parametrize(
    "make",
    [
        lambda: Perceptron(),
        lambda: Perceptron(bias="r2", averaged=True),
        lambda: Perceptron(lr=1e6),
        lambda: MulticlassPerceptron(),
        lambda: MulticlassPerceptron(bias="r2"),
    ],
    ids=["binary", "binary-r2-averaged", "binary-lr1e6", "multiclass", "multiclass-r2"],
)
def test_block_path_dead_letters_as_the_per_record_path(fmt, make, monkeypatch):
    values = ["0.5", "-1.5", "2", "1e200", "1e303", "-1e303", "1e154", "3", "-0.25", "1.3e154"]
    rows = []
    for i in range(600):
        a = values[i % len(values)] if i % 7 == 3 else str((i % 9) - 4)
        b = str((i * 5) % 11 - 5)
        rows.append((a, b, "" if i % 13 == 5 else str(i % 2 if i % 3 else (i % 3) + 1)))
    if fmt == "csv":
        data = ("a,b,y\n" + "".join(f"{a},{b},{y}\n" for a, b, y in rows)).encode()
    else:
        data = "".join(f'{{"a": {a}, "b": {b}, "y": {y or "null"}}}\n' for a, b, y in rows).encode()
    calls = []
    model = make()
    original = type(model).learn_dense
    monkeypatch.setattr(type(model), "learn_dense", lambda *a: calls.append(1) or original(*a))
    a, preds_a, dead_a = _run(model, fmt, data, True)
    monkeypatch.setattr(type(model), "learn_dense", original)
    b, preds_b, dead_b = _run(make(), fmt, data, False)
    assert calls
    assert a.learner.get_state() == b.learner.get_state()
    assert a.stats.get_state() == b.stats.get_state()
    assert preds_a == preds_b and dead_a == dead_b
    assert a.stats.invalid.get("value_too_large", 0) > 0
    state = json.dumps(a.learner.get_state(), allow_nan=False)
    assert "Infinity" not in state and "NaN" not in state
