"""A test that hangs fails, with its stack, and the run goes on (pyproject.toml's ``timeout``):
a hung test would otherwise use up CI's 90 minutes and print nothing."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

HANGS = """
import threading


def test_waits_for_what_never_comes():
    threading.Event().wait()  # as a producer's flush() whose batch never completes


def test_after_it():
    pass
"""


def test_the_suite_stops_a_hung_test_and_goes_on(tmp_path):
    test_file = tmp_path / "test_hangs.py"
    test_file.write_text(HANGS)
    started = time.monotonic()
    # the project's own configuration, its timeout made 2 s
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(REPO / "pyproject.toml"),
         f"--rootdir={tmp_path}", "-p", "no:cacheprovider", "-o", "timeout=2", "-q",
         str(test_file)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "1 failed, 1 passed" in out, out
    assert "Timeout" in out and "test_waits_for_what_never_comes" in out, out
    assert time.monotonic() - started < 60


def test_the_timeout_is_set(pytestconfig):
    assert float(pytestconfig.getini("timeout")) == 900
    assert pytestconfig.getini("timeout_method") == "signal"
