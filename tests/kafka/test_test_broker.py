"""The test broker (``kafka/kafka-up.sh``) stands for a cluster on machines of its own: it runs
before the tests' processes when the CPU is short (``KAFKA_NICE``, default -10), so a soak's
load falls on the workers under test, not on the broker; and a fresh broker whose port was
taken as it bound it starts again on other ports."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest
from kafka_broker import DEFAULT_STATE_DIR, start_broker, stop_broker


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


@pytest.mark.kafka
def test_a_port_taken_as_the_broker_binds_it_is_picked_again(tmp_path):
    """Another process takes the controller port kafka-up.sh picked, after its check and
    before the JVM binds it (two brokers starting at once, soak 34): the script starts the
    fresh broker again on other ports instead of failing every test that needed it."""
    state = tmp_path / "kafka"
    taken: list[int] = []
    holder = socket.socket()
    stop = threading.Event()

    def take_the_controller_port() -> None:
        while not stop.is_set():
            ports = state / "ports"
            text = ports.read_text() if ports.exists() else ""
            found = [line.split("=", 1)[1] for line in text.splitlines()
                     if line.startswith("CONTROLLER_PORT=")]  # fmt: skip
            if found and found[0]:
                holder.bind(("127.0.0.1", int(found[0])))
                holder.listen()
                taken.append(int(found[0]))
                return
            time.sleep(0.01)

    thread = threading.Thread(target=take_the_controller_port, daemon=True)
    thread.start()
    try:
        bootstrap = start_broker(state_dir=state)
        assert taken, "the controller port was never taken"
        ports = dict(line.split("=", 1) for line in (state / "ports").read_text().splitlines())
        assert int(ports["CONTROLLER_PORT"]) != taken[0]
        assert bootstrap == f"127.0.0.1:{ports['PORT']}"
        first = "".join(
            (state / name).read_text(errors="replace")
            for name in ("server.log.prev", "kafka.out.prev") if (state / name).exists()
        )  # the first start's logs, one generation back
        assert f"127.0.0.1:{taken[0]}: Address already in use" in first
    finally:
        stop.set()
        thread.join(5)
        holder.close()
        stop_broker(state_dir=state, clean=True)
