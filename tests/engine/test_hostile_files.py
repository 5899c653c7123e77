"""Careless paths and flags: no file is destroyed, no flag crashes late, no checkpoint is trusted
blindly (issue 16, classes 2-5)."""

from __future__ import annotations

import json
import os
import subprocess
import threading

import pytest
from cli_helpers import CLI, binary_examples, model_of, run_cli, to_csv

from stream_perceptron.errors import StateError
from stream_perceptron.state import read_json

DATA = to_csv(binary_examples(400, seed=9))


def _run_in(cwd, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, *args], input=stdin, capture_output=True, cwd=cwd, timeout=120, check=False
    )


def _no_traceback(proc: subprocess.CompletedProcess) -> None:
    assert b"Traceback" not in proc.stderr, proc.stderr.decode()


# -- class 2: one file, two roles ------------------------------------------------------------------
def test_resume_matches_outputs_by_file_not_by_spelling(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "data.csv").write_bytes(DATA)
    common = ["run", "--input", "data.csv", "--checkpoint", "ck.json"]
    first = _run_in(tmp_path, *common, "--predictions", "out/p.jsonl")
    assert first.returncode == 0, first.stderr.decode()
    before = (tmp_path / "out" / "p.jsonl").read_bytes()
    assert before.count(b"\n") == 400
    again = _run_in(tmp_path, *common, "--predictions", "./out/../out/p.jsonl", "--resume")
    assert again.returncode == 0, again.stderr.decode()
    assert (tmp_path / "out" / "p.jsonl").read_bytes() == before  # nothing left to learn


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("--predictions", "--input"),
        ("--checkpoint", "--input"),
        ("--checkpoint", "--predictions"),
        ("--dead-letter", "--predictions"),
        ("--summary-json", "--checkpoint"),
    ],
)
def test_two_roles_on_one_file_are_refused_before_anything_is_written(tmp_path, first, second):
    data = tmp_path / "data.csv"
    data.write_bytes(DATA)
    target = data if "--input" in (first, second) else tmp_path / "shared"
    if target != data:
        target.write_bytes(b"keep me\n")
    link = tmp_path / "link"
    link.symlink_to(target)  # the second role names the file through a symlink
    args = ["run", "--format", "csv"]
    for flag, path in ((first, target), (second, link)):
        args += [flag, str(path)]
    if "--input" not in args:
        args += ["--input", str(data)]
    before = target.read_bytes()
    proc = run_cli(*args)
    assert proc.returncode == 2
    assert b"are the same file" in proc.stderr
    assert target.read_bytes() == before


def test_outputs_are_appended_not_truncated_without_resume(tmp_path):
    preds = tmp_path / "p.jsonl"
    preds.write_bytes(b'{"earlier": true}\n')
    proc = run_cli("run", "--format", "csv", "--predictions", str(preds), stdin=DATA)
    assert proc.returncode == 0
    assert preds.read_bytes().startswith(b'{"earlier": true}\n')
    assert preds.read_bytes().count(b"\n") == 401


# -- class 3: special files -----------------------------------------------------------------------
def _drain(path, into: list[bytes]) -> threading.Thread:
    def read() -> None:
        with open(path, "rb") as f:
            into.append(f.read())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def test_predictions_and_summary_stream_to_fifos(tmp_path):
    fifo, summary_fifo = tmp_path / "preds", tmp_path / "summary"
    os.mkfifo(fifo)
    os.mkfifo(summary_fifo)
    got: list[bytes] = []
    summary: list[bytes] = []
    readers = [_drain(fifo, got), _drain(summary_fifo, summary)]
    proc = run_cli(
        "run", "--format", "csv", "--predictions", str(fifo),
        "--summary-json", str(summary_fifo), stdin=DATA,
    )  # fmt: skip
    for reader in readers:
        reader.join(30)
    assert proc.returncode == 0, proc.stderr.decode()
    assert got[0].count(b"\n") == 400
    assert json.loads(summary[0])["learned"] == 400
    assert fifo.is_fifo() and summary_fifo.is_fifo()  # still FIFOs, not replaced


def test_predictions_to_dev_stdout(tmp_path):
    proc = run_cli("run", "--format", "csv", "-q", "--predictions", "/dev/stdout", stdin=DATA)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.count(b"\n") == 400


def test_checkpoint_through_a_symlink_replaces_the_target_not_the_link(tmp_path):
    target = tmp_path / "models" / "model.json"
    target.parent.mkdir()
    link = tmp_path / "model.json"
    link.symlink_to(target)
    proc = run_cli("run", "--format", "csv", "--checkpoint", str(link), "--fresh", stdin=DATA)
    assert proc.returncode == 0, proc.stderr.decode()
    assert link.is_symlink() and model_of(target).n_seen == 400


def test_a_checkpoint_that_is_not_a_regular_file_is_refused(tmp_path):
    fifo = tmp_path / "ck"
    os.mkfifo(fifo)
    proc = run_cli("run", "--format", "csv", "--checkpoint", str(fifo), "--resume", stdin=DATA)
    assert proc.returncode == 2 and b"not a regular file" in proc.stderr
    assert fifo.is_fifo()


# -- class 4: flags -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "flags",
    [
        ["--metrics-port", "99999"],
        ["--rolling-window", "12345678901234567890123"],
        ["--init", "random", "--seed", "-1"],
        ["--push-interval", "1e300"],
        ["--checkpoint-interval", "inf"],
        ["--pushgateway", "not a url"],
        ["--pushgateway", "http://host:notaport"],
        ["--lr", "1e308"],
        ["--lr", "nan"],
        ["--max-line-bytes", "0"],
        ["--metrics-max-weights", "-3"],
    ],
)
def test_bad_flag_values_are_usage_errors(flags):
    proc = run_cli("run", "--format", "csv", *flags, stdin=DATA)
    assert proc.returncode == 2
    assert b"error: argument" in proc.stderr
    _no_traceback(proc)


def test_resume_names_each_flag_the_checkpoint_overrides(tmp_path):
    ck = tmp_path / "ck.json"
    assert run_cli("run", "--format", "csv", "--checkpoint", str(ck), stdin=DATA).returncode == 0
    proc = run_cli(
        "run", "--format", "csv", "--checkpoint", str(ck), "--resume", "--lr", "0.5",
        "--averaged", "--bias", "r2", stdin=DATA,
    )  # fmt: skip
    assert proc.returncode == 0
    message = proc.stderr.decode()
    for flag in ("--lr 0.5 is ignored", "--averaged True is ignored", "--bias r2 is ignored"):
        assert flag in message
    assert "--init" not in message  # not given, same as the checkpoint's
    other = run_cli(
        "run", "--format", "csv", "--checkpoint", str(ck), "--resume", "--model", "multiclass",
        stdin=DATA,
    )  # fmt: skip
    assert "--model multiclass is ignored: the checkpoint holds a Perceptron" in (
        other.stderr.decode()
    )


# -- class 5: corrupt or huge checkpoints ---------------------------------------------------------
@pytest.mark.parametrize(
    "corrupt",
    [
        lambda s: s["stats"].update(learned="many"),
        lambda s: s["stats"].update(mistakes=10**9),
        lambda s: s["stats"].update(invalid={"x": -1}),
        lambda s: s["stats"].update(recent_mistakes=[2]),
        lambda s: s.update(stats="nope"),
        lambda s: s["positions"].append({"source": "x", "partition": "0", "next_offset": 1}),
        lambda s: s["positions"].append({"source": "x", "partition": None, "next_offset": -1}),
        lambda s: s.update(outputs={"p": "big"}),
        lambda s: s.update(model="not a model"),
    ],
)
def test_a_corrupt_checkpoint_is_refused_clearly_and_left_alone(tmp_path, corrupt):
    ck = tmp_path / "ck.json"
    assert run_cli("run", "--format", "csv", "--checkpoint", str(ck), stdin=DATA).returncode == 0
    state = json.loads(ck.read_text())
    corrupt(state)
    ck.write_text(json.dumps(state))
    before = ck.read_bytes()
    resume = ["run", "--format", "csv", "--checkpoint", str(ck), "--resume"]
    for args in (["inspect", str(ck)], resume):
        proc = run_cli(*args, stdin=DATA)
        assert proc.returncode == 1, (args, proc.stderr.decode())
        assert b"error:" in proc.stderr
        _no_traceback(proc)
    assert ck.read_bytes() == before


def test_inspect_of_a_device_or_fifo_is_refused_unread(tmp_path):
    proc = run_cli("inspect", "/dev/zero", timeout=20)
    assert proc.returncode == 1 and b"not a regular file" in proc.stderr
    _no_traceback(proc)


def test_state_files_over_the_limit_are_refused_unread(tmp_path):
    path = tmp_path / "big.json"
    path.write_bytes(b"[" + b"0," * 600 + b"0]")
    with pytest.raises(StateError, match="more than the 1000"):
        read_json(path, limit=1000)
    deep = tmp_path / "deep.json"
    deep.write_bytes(b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(StateError, match="nested too deeply"):
        read_json(deep)
