"""The mixing leader stopped inside the commit of a mixture (its offsets sent to the
transaction, EndTxn not yet), past its session timeout (6 s) but within the transaction
timeout (10 s): the group moves its partitions on while its transaction is still open.

``test_a_leader_paused_past_its_session_cannot_fork_the_chain`` stops the leader at a random
point up to 200 ms after it logged a mixture, seldom inside that window; here the worker stops
itself exactly there (:mod:`paused_commit_worker`), so every run tries the worst case: when it
continues, its transaction must be refused (the group generation it carries is gone) and it
exits 1; the chain of mixtures only moves forward and every record is learned and predicted
exactly once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from paused_commit_worker import CLAIM
from shared_model_helpers import (
    PARTITIONS,
    make_topics,
    produce,
    sparse_examples,
    start_worker,
    streaming_workers,
)
from test_shared_model import _check_exact, _drain
from test_shared_model_guards import _mixture_versions

WORKER = Path(__file__).with_name("paused_commit_worker.py")
#: past the workers' session timeout (6 s), within the transaction timeout (10 s)
HOLD_S = 7.5


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] == "T"


def test_a_leader_stopped_inside_a_mixtures_commit_is_refused(
    kafka_bootstrap, tmp_path, kafka_client
):
    data = sparse_examples(30_000, seed=19, noise=0.05)
    topic, predictions = make_topics(kafka_bootstrap, PARTITIONS, 3)
    args, model_topic, group = streaming_workers(
        kafka_bootstrap, topic, predictions, kafka_client, mix_every=500
    )
    produce(kafka_bootstrap, topic, data[:10_000])
    ids = ["w0", "w1", "w2"]
    logs = {i: tmp_path / f"{i}.log" for i in ids}
    env = {**os.environ, "PYTHONUNBUFFERED": "1", CLAIM: str(tmp_path / "claim")}
    procs = {
        i: subprocess.Popen([sys.executable, str(WORKER), *args, "--instance-id", i],
                            stdout=subprocess.DEVNULL, stderr=logs[i].open("ab"), env=env)
        for i in ids
    }  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not (stopped := [i for i in ids if "PAUSED-COMMIT: stopping" in logs[i].read_text()]):
            assert time.monotonic() < deadline, "no worker mixed"
            time.sleep(0.05)
        zombie = stopped[0]
        while not _stopped(procs[zombie].pid):
            assert procs[zombie].poll() is None, logs[zombie].read_text()[-3000:]
            time.sleep(0.01)
        produce(kafka_bootstrap, topic, data[10_000:20_000], start=10_000)
        time.sleep(HOLD_S)
        procs[zombie].send_signal(signal.SIGCONT)
        try:
            code = procs[zombie].wait(timeout=60)
        except subprocess.TimeoutExpired:
            code = None  # still running: its transaction went through
        assert code == 1, (
            f"the stopped leader's transaction was not refused (exit code {code}):\n"
            + logs[zombie].read_text()[-3000:]
        )
        assert "PAUSED-COMMIT: continued" in logs[zombie].read_text()
        produce(kafka_bootstrap, topic, data[20_000:], start=20_000)
        procs[zombie] = start_worker([*args, "--instance-id", zombie], logs[zombie])
        _drain(kafka_bootstrap, group, topic, len(data), list(procs.values()))
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
    versions = _mixture_versions(kafka_bootstrap, model_topic)
    assert len(versions) >= 3 and versions == sorted(set(versions)), versions
    _check_exact(kafka_bootstrap, tmp_path, topic, predictions, model_topic, data, kafka_client)
