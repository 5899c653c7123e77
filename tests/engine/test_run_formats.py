"""`stream-perceptron run` through a real pipe, for every format: exact models and counts."""

from __future__ import annotations

import json

import pytest
from cli_helpers import binary_examples, model_of, run_cli, to_csv, to_jsonl, to_libsvm

from stream_perceptron import (
    CentroidClassifier,
    MulticlassPassiveAggressive,
    MulticlassPerceptron,
    PassiveAggressive,
    Perceptron,
)
from stream_perceptron.synthetic import separable_multiclass

EXAMPLES = binary_examples(3000)


def _learn_directly(model, examples):
    mistakes = 0
    for x, y in examples:
        mistakes += model.predict_one(x) != y
        model.learn_one(x, y)
    return model, mistakes


@pytest.mark.parametrize(
    ("fmt", "data", "rename"),
    [
        ("csv", to_csv(EXAMPLES), lambda k: k),
        ("jsonl", to_jsonl(EXAMPLES), lambda k: k),
        ("libsvm", to_libsvm(EXAMPLES), lambda k: k[1:]),
    ],
)
def test_binary_model_through_a_pipe_equals_direct_learning(tmp_path, fmt, data, rename):
    ck, summary = tmp_path / "model.json", tmp_path / "summary.json"
    proc = run_cli(
        "run",
        "--format",
        fmt,
        "--averaged",
        "--checkpoint",
        str(ck),
        "--summary-json",
        str(summary),
        stdin=data,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    direct, mistakes = _learn_directly(
        Perceptron(averaged=True), [({rename(k): v for k, v in x.items()}, y) for x, y in EXAMPLES]
    )
    assert model_of(ck).get_state() == direct.get_state()
    s = json.loads(summary.read_text())
    assert (s["records"], s["learned"], s["unlabelled"], s["invalid"]) == (3000, 3000, 0, {})
    assert s["mistakes"] == mistakes
    assert s["accuracy"] == pytest.approx(1 - mistakes / 3000)
    assert s["elapsed_seconds"] > 0
    assert b"accuracy" in proc.stderr  # the human summary


@pytest.mark.parametrize("model", ["multiclass", "centroid"])
def test_multiclass_models_through_a_pipe(tmp_path, model):
    examples = list(separable_multiclass(2000, n_classes=4, n_features=6, gap=0.3, seed=3))
    ck = tmp_path / "m.json"
    proc = run_cli(
        "run",
        "--format",
        "jsonl",
        "--model",
        model,
        "--bias",
        "r2",
        "--checkpoint",
        str(ck),
        stdin=to_jsonl(examples),
    )
    assert proc.returncode == 0, proc.stderr.decode()
    direct = MulticlassPerceptron(bias="r2") if model == "multiclass" else CentroidClassifier()
    _learn_directly(direct, examples)
    assert model_of(ck).get_state() == direct.get_state()


def test_unlabelled_records_are_predicted_not_learned(tmp_path):
    train, serve = EXAMPLES[:500], EXAMPLES[500:520]
    data = to_csv(train) + b"".join(
        (",".join([*(repr(v) for v in x.values()), ""]) + "\n").encode() for x, _ in serve
    )
    preds, ck = tmp_path / "p.jsonl", tmp_path / "m.json"
    proc = run_cli(
        "run", "--format", "csv", "--predictions", str(preds), "--checkpoint", str(ck), stdin=data
    )
    assert proc.returncode == 0, proc.stderr.decode()
    lines = [json.loads(line) for line in preds.read_text().splitlines()]
    assert len(lines) == 520
    model, _ = _learn_directly(Perceptron(), train)
    for line, (x, _) in zip(lines[500:], serve):
        assert "label" not in line and "mistake" not in line
        assert line["prediction"] == model.predict_one(x)
    assert model_of(ck).n_seen == 500
    assert lines[0]["position"] == {"source": "stdin", "offset": 1}
    assert {"label", "mistake", "prediction"} <= set(lines[0])


def test_input_file_format_from_extension_crlf_bom_and_no_final_newline(tmp_path):
    path = tmp_path / "data.csv"
    path.write_bytes(b"\xef\xbb\xbf" + to_csv(EXAMPLES[:100]).replace(b"\n", b"\r\n").rstrip())
    ck = tmp_path / "m.json"
    proc = run_cli("run", "--input", str(path), "--checkpoint", str(ck))
    assert proc.returncode == 0, proc.stderr.decode()
    direct, _ = _learn_directly(Perceptron(), EXAMPLES[:100])
    assert model_of(ck).get_state() == direct.get_state()


def test_empty_input(tmp_path):
    summary = tmp_path / "s.json"
    proc = run_cli("run", "--format", "jsonl", "--summary-json", str(summary), stdin=b"")
    assert proc.returncode == 0
    s = json.loads(summary.read_text())
    assert (s["records"], s["learned"], s["accuracy"]) == (0, 0, None)


def test_usage_errors_exit_2_with_a_message():
    proc = run_cli("run", stdin=b"")
    assert proc.returncode == 2 and b"--format is required" in proc.stderr
    proc = run_cli("run", "--format", "xml", stdin=b"")
    assert proc.returncode == 2 and b"invalid choice" in proc.stderr
    proc = run_cli("run", "--format", "csv", "--resume", stdin=b"")
    assert proc.returncode == 2 and b"--resume needs --checkpoint" in proc.stderr
    help_text = run_cli("run", "--help").stdout
    assert b"every N records" in help_text and b"examples:" in help_text


def test_missing_label_column_is_a_clear_failure():
    proc = run_cli("run", "--format", "csv", "--label", "target", stdin=b"a,y\n1,0\n")
    assert proc.returncode == 1
    assert b"no label column 'target'" in proc.stderr


def test_inspect_prints_the_model(tmp_path):
    ck = tmp_path / "m.json"
    assert (
        run_cli(
            "run", "--format", "csv", "--checkpoint", str(ck), stdin=to_csv(EXAMPLES)
        ).returncode
        == 0
    )
    proc = run_cli("inspect", str(ck), "--top", "2")
    assert proc.returncode == 0
    out = proc.stdout.decode()
    model = model_of(ck)
    top = max(model.weights, key=lambda k: abs(model.weights[k]))
    assert "examples     3000" in out and f"  {top}" in out
    assert run_cli("inspect", str(tmp_path / "missing.json")).returncode == 1


@pytest.mark.parametrize(
    ("model", "variant", "C"),
    [("pa", "pa1", "0.01"), ("pa", "pa2", "0.5"), ("pa-multiclass", "pa", "1")],
)
def test_passive_aggressive_models_through_a_pipe(tmp_path, model, variant, C):
    """--model pa / pa-multiclass with --pa-variant and --C build the learner of the same
    hyperparameters, which learns what the Python API learns; --resume keeps it."""
    if model == "pa":
        examples = EXAMPLES
        direct = PassiveAggressive(C=float(C), variant=variant, bias="none")
    else:
        examples = list(separable_multiclass(2000, n_classes=4, n_features=6, gap=0.3, seed=3))
        direct = MulticlassPassiveAggressive(C=float(C), variant=variant, bias="none")
    ck = tmp_path / "m.json"
    flags = ["--model", model, "--pa-variant", variant, "--C", C, "--bias", "none"]
    proc = run_cli("run", "--format", "jsonl", *flags, "--checkpoint", str(ck),
                   stdin=to_jsonl(examples[:1000]))  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    proc = run_cli("run", "--format", "jsonl", *flags, "--checkpoint", str(ck), "--resume",
                   stdin=to_jsonl(examples[1000:]))  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    _learn_directly(direct, examples)
    assert model_of(ck).get_state() == direct.get_state()
    assert model_of(ck).n_mistakes > 10


def test_passive_aggressive_refuses_bias_r2():
    proc = run_cli("run", "--format", "csv", "--model", "pa", "--bias", "r2", stdin=b"")
    assert proc.returncode == 2 and b"--bias learned or none" in proc.stderr


def test_forgetting_average_through_a_pipe_with_resume(tmp_path):
    """--averaged --average-half-life N learns what Perceptron(averaged=True,
    average_half_life=N) learns, across a checkpoint and --resume (the accumulators are
    rescaled within the stream: N = 4 rescales every 1024 examples)."""
    ck = tmp_path / "m.json"
    flags = ["--averaged", "--average-half-life", "4", "--checkpoint", str(ck)]
    proc = run_cli("run", "--format", "csv", *flags, stdin=to_csv(EXAMPLES[:1500]))
    assert proc.returncode == 0, proc.stderr.decode()
    proc = run_cli("run", "--format", "csv", *flags, "--resume", stdin=to_csv(EXAMPLES[1500:]))
    assert proc.returncode == 0, proc.stderr.decode()
    direct, _ = _learn_directly(Perceptron(averaged=True, average_half_life=4), EXAMPLES)
    assert direct._avg_ref >= 2048
    assert model_of(ck).get_state() == direct.get_state()


def test_average_half_life_needs_averaged():
    proc = run_cli("run", "--format", "csv", "--average-half-life", "100", stdin=b"")
    assert proc.returncode == 2 and b"--average-half-life needs --averaged" in proc.stderr
