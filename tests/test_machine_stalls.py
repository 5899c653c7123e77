"""The evidence of a failed test says when the machine stood still (``tests/evidence.py``)."""

from __future__ import annotations

import os
import signal
import time

import evidence


def test_a_stall_of_the_sleeper_is_written_down_with_its_time(tmp_path):
    path = tmp_path / "stalls.txt"
    sleeper = evidence.watch_machine(path)
    try:
        time.sleep(0.5)
        stopped = time.time()
        os.kill(sleeper.pid, signal.SIGSTOP)  # the process stands still, as in a machine stall
        time.sleep(evidence.STALL_S + 1.0)
        os.kill(sleeper.pid, signal.SIGCONT)
        deadline = time.monotonic() + 10
        while not path.exists() or not path.read_text():
            assert time.monotonic() < deadline, "no stall written"
            time.sleep(0.1)
    finally:
        sleeper.kill()
        sleeper.wait()
    (line,) = evidence.stalls(path, stopped - 1, time.time())
    late = float(line.split("stood still ")[1].split(" s")[0])
    assert evidence.STALL_S < late < evidence.STALL_S + 3, line
    assert evidence.stalls(path, time.time() + 60, time.time() + 120) == []  # not another test's


def test_a_sleeper_that_is_never_late_writes_nothing(tmp_path):
    path = tmp_path / "stalls.txt"
    sleeper = evidence.watch_machine(path)
    try:
        time.sleep(1.0)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert not path.exists() or path.read_text() == ""
