"""Hostile input, round two (issue 29): files, locks, scaling, flags and text that is not text."""

from __future__ import annotations

import os
import stat
import subprocess

import pytest
from cli_helpers import binary_examples, run_cli, to_csv

from stream_perceptron.learners import Perceptron
from stream_perceptron.learners._base import MIN_HALF_LIFE

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
    assert proc.returncode == 2 and b"--output /dev/null is not a regular file" in proc.stderr
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
