"""Hostile input, round two (issue 29): files, locks, scaling, flags and text that is not text."""

from __future__ import annotations

import json
import math
import os
import stat
import subprocess
import time

import pytest
from cli_helpers import CLI, binary_examples, run_cli, to_csv

from stream_perceptron.learners import Perceptron

DATA = to_csv(binary_examples(300, seed=29))


def _no_traceback(proc: subprocess.CompletedProcess) -> None:
    assert b"Traceback" not in proc.stderr, proc.stderr.decode()


# -- class 7: a numeric flag's domain is the one the code needs ------------------------------------
@pytest.mark.parametrize("half_life", ["1e-20", "0.0009", "0", "-1", "1e13", "nan"])
def test_a_half_life_the_average_cannot_use_is_a_usage_error(half_life):
    proc = run_cli(
        "run", "--format", "csv", "--averaged", "--average-half-life", half_life, stdin=DATA
    )
    assert proc.returncode == 2, proc.stderr.decode()
    assert b"error: argument --average-half-life" in proc.stderr
    _no_traceback(proc)
    if float(half_life) < 1e12:  # the flag's own ceiling; the learner takes any finite one
        with pytest.raises(ValueError, match="average_half_life"):
            Perceptron(averaged=True, average_half_life=float(half_life))


def test_the_shortest_half_life_allowed_runs_to_the_end():
    from stream_perceptron.learners._linear import MIN_HALF_LIFE

    proc = run_cli(
        "run", "--format", "csv", "--averaged", "--average-half-life", repr(MIN_HALF_LIFE),
        stdin=DATA,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"value_too_large" not in proc.stderr


# -- class 1: every command that writes a state file checks it the same way -----------------------
PULL = ["pull-model", "--bootstrap-servers", "127.0.0.1:1", "--model-topic", "models"]


def test_pull_model_never_replaces_a_device_or_an_existing_file(tmp_path):
    proc = run_cli(*PULL, "--output", "/dev/null", "--force", timeout=30)
    assert proc.returncode == 2
    assert b"--output /dev/null: is a character device, not a regular file" in proc.stderr
    assert os.path.exists("/dev/null") and stat.S_ISCHR(os.stat("/dev/null").st_mode)
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    proc = run_cli(*PULL, "--output", str(notes), timeout=30)
    assert proc.returncode == 2 and b"exists: give --force" in proc.stderr
    assert notes.read_text() == "my notes\n"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    proc = run_cli(*PULL, "--output", str(fifo), "--force", timeout=30)
    assert proc.returncode == 2 and b"not a regular file" in proc.stderr and fifo.is_fifo()
    _no_traceback(proc)


# -- class 6: text that is not text (a lone surrogate) --------------------------------------------
SURROGATES = [
    rb'{"x": {"\ud800": 1.0}, "y": 1}',
    rb'{"a\udfff": 2, "y": 0}',
    rb'{"colour": "\ud800", "y": 1}',
    rb'{"a": 1, "y": "\udbff"}',
]


def test_a_lone_surrogate_is_refused_as_invalid_utf8_and_every_exporter_stays_up(tmp_path):
    from prometheus_client import CollectorRegistry, generate_latest

    from connectors import MemorySink, MemorySource
    from stream_perceptron.engine import Engine, Outputs
    from stream_perceptron.formats import make_parser
    from stream_perceptron.metrics import MetricsExporter

    good = [b'{"a": 1.0, "y": 1}', b'{"a": -1.0, "y": 0}', rb'{"\ud83d\ude00": 1, "y": 1}']
    dead = MemorySink()
    engine = Engine(Perceptron(), make_parser("jsonl"), Outputs(None, dead), keep_recent=8)
    registry = CollectorRegistry()
    exporter = MetricsExporter(engine, registry=registry)
    engine.run(MemorySource(good + SURROGATES))
    assert engine.stats.invalid == {"invalid_utf8": len(SURROGATES)}
    assert len(dead.lines) == len(SURROGATES)
    assert all(b"invalid_utf8" in line for line in dead.lines)
    assert "\U0001f600" in engine.learner.weights  # a pair of escapes is one character
    generate_latest(registry).decode("utf-8")
    exporter.live.state_json().decode("utf-8")


def test_inspect_refuses_a_checkpoint_holding_a_lone_surrogate(tmp_path):
    ck = tmp_path / "ck.json"
    data = b"".join(line + b"\n" for line in [b'{"a": 1.0, "y": 1}', *SURROGATES])
    proc = run_cli("run", "--format", "jsonl", "--checkpoint", str(ck), "-q", stdin=data)
    assert proc.returncode == 0, proc.stderr.decode()
    shown = run_cli("inspect", str(ck))
    assert shown.returncode == 0, shown.stderr.decode()
    assert b"invalid_utf8" in shown.stdout
    state = json.loads(ck.read_text())
    state["model"]["weights"].append(["\ud800", 1.0])  # written by an older release
    ck.write_text(json.dumps(state))
    proc = run_cli("inspect", str(ck))
    assert proc.returncode == 1 and b"lone surrogate" in proc.stderr
    _no_traceback(proc)


# -- class 4: one huge value does not disable a scaled feature for good ----------------------------
@pytest.mark.parametrize("nested", [False, True])  # the block path (flat rows) and the dict path
@pytest.mark.parametrize("pure", ["0", "1"])
def test_scaling_refuses_the_value_that_would_poison_its_statistics(tmp_path, nested, pure):
    examples = binary_examples(400, d=3, seed=4)
    rows = [({"f0": 1e200, "f1": 0.5, "f2": 0.1}, 1), *examples]
    lines = [json.dumps({"x": x, "y": y} if nested else {**x, "y": y}) for x, y in rows]
    summary = tmp_path / "summary.json"
    proc = subprocess.run(
        [*CLI, "run", "--format", "jsonl", "--scale", "standard", "--averaged", "-q",
         "--summary-json", str(summary), "--dead-letter", str(tmp_path / "dead.jsonl")],
        input="\n".join(lines).encode() + b"\n", capture_output=True, timeout=120, check=False,
        env={**os.environ, "STREAM_PERCEPTRON_PURE_PYTHON": pure},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    got = json.loads(summary.read_text())
    assert got["invalid"] == {"value_too_large": 1}
    assert got["learned"] == 400
    assert got["accuracy"] > 0.8
    assert (tmp_path / "dead.jsonl").read_text().count("value_too_large") == 1


def test_the_scaler_keeps_every_statistic_finite_for_values_up_to_its_limit():
    from stream_perceptron.errors import ValueTooLargeError
    from stream_perceptron.learners.scaling import SCALE_LIMIT, Standardizer

    scaler = Standardizer()
    for v in [SCALE_LIMIT, -SCALE_LIMIT, SCALE_LIMIT, 0.5, -SCALE_LIMIT]:
        _, pending = scaler.transform({"a": v})
        scaler.commit(pending)
    n, mean, var = scaler.stats("a")
    assert n == 5 and math.isfinite(mean) and math.isfinite(var)
    with pytest.raises(ValueTooLargeError):
        scaler.transform({"a": SCALE_LIMIT * 2})
    assert scaler.stats("a") == (n, mean, var)


# -- class 2: one run per checkpoint ---------------------------------------------------------------
def test_a_second_run_on_a_checkpoint_in_use_exits_2_naming_the_holder(tmp_path):
    ck, predictions = tmp_path / "c.json", tmp_path / "p.jsonl"
    args = ["run", "--format", "csv", "--checkpoint", str(ck), "--predictions", str(predictions),
            "--checkpoint-every", "50"]  # fmt: skip
    first = subprocess.Popen([*CLI, *args], stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert first.stdin is not None
        first.stdin.write(DATA)
        first.stdin.flush()
        lock = tmp_path / "c.json.lock"
        deadline = time.monotonic() + 60
        while not (ck.exists() and str(first.pid) in _text(lock)):
            assert time.monotonic() < deadline and first.poll() is None
            time.sleep(0.05)
        written = predictions.read_bytes()
        link = tmp_path / "link.json"
        link.symlink_to(ck)  # another spelling of the same checkpoint
        for spelling in (str(ck), str(link)):
            second = run_cli("run", "--format", "csv", "--checkpoint", spelling, "--resume",
                             "--predictions", str(predictions), stdin=DATA)  # fmt: skip
            assert second.returncode == 2, second.stderr.decode()
            assert f"in use by another run (pid {first.pid} on".encode() in second.stderr
            _no_traceback(second)
        assert predictions.read_bytes()[: len(written)] == written  # not cut back
        first.stdin.close()
        assert first.wait(timeout=60) == 0
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert predictions.read_bytes().count(b"\n") == DATA.count(b"\n") - 1
    again = run_cli("run", "--format", "csv", "--checkpoint", str(ck), "--resume", stdin=DATA)
    assert again.returncode == 0, again.stderr.decode()  # the lock went with its holder


def _text(path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


# -- class 3: an input is known by what it is and what it holds, not by its spelling ---------------
def _cli_in(cwd, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, cwd=cwd, timeout=120, check=False)


def _seen(ck) -> int:
    return json.loads(ck.read_text())["model"]["n_seen"]


def test_resume_finds_the_input_under_any_spelling(tmp_path):
    (tmp_path / "sub").mkdir()
    data = tmp_path / "ph.csv"
    data.write_bytes(DATA)
    ck, p = tmp_path / "ck.json", tmp_path / "p.jsonl"
    first = _cli_in(tmp_path, "run", "--input", "ph.csv", "--checkpoint", "ck.json",
                    "--predictions", "p.jsonl")  # fmt: skip
    assert first.returncode == 0, first.stderr.decode()
    for cwd, spelling in [(tmp_path, "./ph.csv"), (tmp_path, str(data)),
                          (tmp_path / "sub", "../ph.csv")]:  # fmt: skip
        proc = _cli_in(cwd, "run", "--input", spelling, "--checkpoint", str(ck),
                       "--predictions", str(p), "--resume")  # fmt: skip
        assert proc.returncode == 0, proc.stderr.decode()
        assert b"skipping the first 301 lines" in proc.stderr  # the header too
        assert _seen(ck) == 300 and p.read_bytes().count(b"\n") == 300  # nothing learned twice
    with data.open("ab") as f:  # appended to: only the new lines are learned
        f.write(to_csv(binary_examples(50, seed=3)).split(b"\n", 1)[1])
    proc = _cli_in(tmp_path, "run", "--input", "./ph.csv", "--checkpoint", "ck.json", "--resume")
    assert proc.returncode == 0, proc.stderr.decode()
    assert _seen(ck) == 350


@pytest.mark.parametrize("how", ["rotated", "shorter"])
def test_resume_refuses_an_input_that_changed_behind_its_name(tmp_path, how):
    data, ck = tmp_path / "in.csv", tmp_path / "ck.json"
    data.write_bytes(DATA)
    assert _cli_in(tmp_path, "run", "--input", "in.csv", "--checkpoint", "ck.json").returncode == 0
    data.unlink()  # a new file under the same name
    if how == "rotated":
        data.write_bytes(to_csv(binary_examples(120, seed=77)))
    else:
        data.write_bytes(b"\n".join(DATA.split(b"\n")[:101]) + b"\n")  # its first 100 records
    proc = _cli_in(tmp_path, "run", "--input", "in.csv", "--checkpoint", "ck.json", "--resume")
    assert proc.returncode == 2, proc.stderr.decode()
    assert b"is not what the checkpoint read (301 lines of it)" in proc.stderr
    assert b"--input-changed restart" in proc.stderr and b"--fresh" in proc.stderr
    assert (b"shorter" if how == "shorter" else b"first") in proc.stderr
    _no_traceback(proc)
    assert _seen(ck) == 300  # left as it was
    proc = _cli_in(tmp_path, "run", "--input", "in.csv", "--checkpoint", "ck.json", "--resume",
                   "--input-changed", "restart")  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    assert _seen(ck) == 300 + (120 if how == "rotated" else 100)


def test_a_version_1_checkpoint_still_resumes_by_file(tmp_path):
    data, ck = tmp_path / "in.csv", tmp_path / "ck.json"
    data.write_bytes(DATA)
    assert _cli_in(tmp_path, "run", "--input", "in.csv", "--checkpoint", "ck.json").returncode == 0
    state = json.loads(ck.read_text())
    assert state["schema_version"] == 2 and state["inputs"]["in.csv"]["head_bytes"] > 0
    del state["inputs"]
    state["schema_version"] = 1
    ck.write_text(json.dumps(state))
    proc = _cli_in(tmp_path, "run", "--input", "./in.csv", "--checkpoint", "ck.json", "--resume")
    assert proc.returncode == 0, proc.stderr.decode()
    assert _seen(ck) == 300
    assert json.loads(ck.read_text())["schema_version"] == 2


# -- class 10: an interval checkpoint while stdin is idle ------------------------------------------
def test_the_checkpoint_interval_fires_while_stdin_is_idle(tmp_path):
    ck, predictions = tmp_path / "c.json", tmp_path / "p.jsonl"
    proc = subprocess.Popen(
        [*CLI, "run", "--format", "csv", "--checkpoint", str(ck), "--checkpoint-interval", "0.5",
         "--predictions", str(predictions), "-q"],
        stdin=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdin is not None
        proc.stdin.write(DATA)
        proc.stdin.flush()  # then nothing more, the pipe left open
        deadline = time.monotonic() + 30
        while not ck.exists():
            assert time.monotonic() < deadline, "no checkpoint while stdin was idle"
            assert proc.poll() is None
            time.sleep(0.1)
        state = json.loads(ck.read_text())
        assert state["model"]["n_seen"] == 300
        assert predictions.read_bytes().count(b"\n") == 300  # flushed before the save
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("flag", ["--run-name", "--topic", "--group"])
def test_names_that_reach_an_exporter_must_be_utf8_text(flag):
    proc = run_cli("run", "--format", "csv", flag, "bad\udcff", stdin=DATA)  # argv byte 0xff
    assert proc.returncode == 2 and f"error: argument {flag}".encode() in proc.stderr
    assert b"is not UTF-8 text" in proc.stderr
    _no_traceback(proc)
