"""The test broker (``kafka/kafka-up.sh``) stands for a cluster on machines of its own: it runs
before the tests' processes when the CPU is short (``KAFKA_NICE``, default -10), so a soak's
load falls on the workers under test, not on the broker."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kafka_broker import DEFAULT_STATE_DIR


def _niceness(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    return int(fields[16])  # the 19th field of stat, counted from the pid


def test_the_broker_runs_before_the_tests_processes(kafka_bootstrap):
    if os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        pytest.skip("a broker given by KAFKA_BOOTSTRAP_SERVERS, not started here")
    state_dir = Path(os.environ.get("KAFKA_STATE_DIR") or DEFAULT_STATE_DIR)
    pid = int((state_dir / "kafka.pid").read_text().strip())
    ours = os.nice(0)
    expected = max(-20, ours - 10) if os.geteuid() == 0 else ours
    assert _niceness(pid) == expected
