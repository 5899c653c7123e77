"""--scale standard and --hash-bits through the engine: the block path and the record path
learn what the Python API learns, the checkpoint keeps the statistics, inspect shows them."""

from __future__ import annotations

import json

import pytest
from cli_helpers import binary_examples, model_of, run_cli, to_csv, to_jsonl

from stream_perceptron import MulticlassPerceptron, Perceptron, Preprocessed


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
@pytest.mark.parametrize("flags", [
    ["--scale", "standard"], ["--scale", "standard", "--hash-bits", "2"],
    ["--scale", "standard", "--rff-components", "40", "--rff-gamma", "0.5", "--seed", "4"],
    ["--scale", "standard", "--hash-bits", "2", "--rff-components", "40"],
])  # fmt: skip
def test_cli_learns_what_the_python_api_learns(tmp_path, fmt, flags):
    examples = binary_examples(20_000, d=6, seed=3)
    examples = [({k: v * 100 + 7 for k, v in x.items()}, y) for x, y in examples]
    data = (to_csv if fmt == "csv" else to_jsonl)(examples)
    ck = tmp_path / "ck.json"
    proc = run_cli("run", "--format", fmt, "--averaged", *flags, "--checkpoint", str(ck),
                   "--summary-json", str(tmp_path / "s.json"), stdin=data)  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    def flag(name, default=None, kind=int):
        return kind(flags[flags.index(name) + 1]) if name in flags else default

    hash_bits = flag("--hash-bits")
    rff = {}
    if "--rff-components" in flags:
        rff = {"rff_components": flag("--rff-components"), "rff_seed": flag("--seed", 0),
               "rff_gamma": flag("--rff-gamma", 1.0, float)}  # fmt: skip
    want = Preprocessed(Perceptron(averaged=True, seed=flag("--seed")), scale="standard",
                        hash_bits=hash_bits, **rff)  # fmt: skip
    mistakes = 0
    for x, y in examples:
        mistakes += want.predict_learn_one(x, y) != y
    got = model_of(ck)
    assert got.get_state() == want.get_state()
    assert json.loads((tmp_path / "s.json").read_text())["mistakes"] == mistakes
    shown = run_cli("inspect", str(ck)).stdout.decode()
    assert "scaling      standard, statistics of" in shown
    assert ("hashing      2^2 buckets" in shown) == (hash_bits is not None)
    if rff:
        assert "fourier      40 random Fourier features" in shown
    else:
        assert "mean 7" in shown  # the features' running means (values * 100 + 7)


def test_image_segments_from_the_cli_reaches_87_percent(tmp_path):
    data = run_cli("example-data", "image-segments", "--format", "csv").stdout
    proc = run_cli(
        "run", "--format", "csv", "--label", "y", "--model", "multiclass", "--averaged",
        "--scale", "standard", "--summary-json", str(tmp_path / "s.json"), stdin=data,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["accuracy"] >= 0.87
    assert summary["model"] == "Preprocessed"
    want = Preprocessed(MulticlassPerceptron(averaged=True), scale="standard")
    assert want.model.averaged


def test_resume_warns_about_differing_preprocessing(tmp_path):
    data = to_csv(binary_examples(500))
    ck = tmp_path / "ck.json"
    assert run_cli("run", "--format", "csv", "--scale", "standard", "--checkpoint", str(ck),
                   stdin=data).returncode == 0  # fmt: skip
    proc = run_cli("run", "--format", "csv", "--checkpoint", str(ck), "--resume", stdin=data)
    assert proc.returncode == 0
    assert b"--scale None is ignored" in proc.stderr


def test_bananas_from_the_cli_with_random_fourier_features(tmp_path):
    data = run_cli("example-data", "bananas", "--format", "csv").stdout
    accuracy = {}
    for name, flags in (("linear", []), ("rff", ["--rff-components", "100", "--rff-gamma", "2"])):
        proc = run_cli("run", "--format", "csv", "--averaged", "--scale", "standard", *flags,
                       "--summary-json", str(tmp_path / "s.json"), stdin=data)  # fmt: skip
        assert proc.returncode == 0, proc.stderr.decode()
        accuracy[name] = json.loads((tmp_path / "s.json").read_text())["accuracy"]
    assert accuracy["linear"] < 0.60
    assert accuracy["rff"] >= 0.85


def test_rff_gamma_needs_rff_components():
    proc = run_cli("run", "--format", "csv", "--rff-gamma", "2", stdin=b"")
    assert proc.returncode == 2
    assert b"--rff-gamma needs --rff-components" in proc.stderr


def test_resume_keeps_the_checkpoints_map_and_warns_about_other_flags(tmp_path):
    data = to_csv(binary_examples(500))
    ck = tmp_path / "ck.json"
    assert run_cli("run", "--format", "csv", "--rff-components", "16", "--rff-gamma", "0.5",
                   "--checkpoint", str(ck), stdin=data).returncode == 0  # fmt: skip
    proc = run_cli("run", "--format", "csv", "--rff-components", "32", "--checkpoint", str(ck),
                   "--resume", stdin=data)  # fmt: skip
    assert proc.returncode == 0
    assert b"--rff-components 32 is ignored: the checkpoint's model has rff_components=16" in (
        proc.stderr
    )
    assert b"--rff-gamma 1.0 is ignored: the checkpoint's model has rff_gamma=0.5" in proc.stderr
    assert model_of(ck).rff.get_state() == {"n_components": 16, "gamma": 0.5, "seed": 0}
