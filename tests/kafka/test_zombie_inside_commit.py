"""The mixing leader stopped inside the commit of a mixture (its offsets sent to the
transaction, EndTxn not yet), past its session timeout (6 s): the group moves its partitions on
while its transaction is still open.

``test_a_leader_paused_past_its_session_cannot_fork_the_chain`` stops the leader at a random
point up to 200 ms after it logged a mixture, seldom inside that window; here the worker stops
itself exactly there (:mod:`paused_commit_worker`), so every run tries the worst case. It is
continued once the broker has rolled its transaction back (the transaction timeout, 10 s, is
checked by the broker every 10 s: a transaction lives 10-20 s). Its commit must then be refused
and exit 1 (the retried transaction carries the group generation, which is gone); the chain of
mixtures only moves forward and every record is learned and predicted exactly once. (Continued
before the rollback, its EndTxn would land: the broker checks the generation when the offsets
join the transaction, not at its end. Soak run of 2026-11-29: the commit landed after 9.1 s and
its mixture 1 after the new leader's mixture 8; the workers refused it as stale.)

The second test stops a dynamic member (no ``--instance-id``) at the start of a commit: once
continued, kafka-python's heartbeat has learnt that the group dropped it and its membership
snapshot says "no generation", which the broker does not check in a transaction's offsets (its
commit landed: the group learned those records twice, before
``connectors.kafka.kafka_python.KafkaSource._group_metadata`` refused such a snapshot).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from kafka import KafkaAdminClient
from paused_commit_worker import AT, CLAIM
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
#: a member stopped at the start of a commit is held past its session timeout (6 s)
HOLD_S = 7.5


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] == "T"


def test_a_leader_stopped_inside_a_mixtures_commit_is_refused(
    kafka_bootstrap, tmp_path, kafka_client
):
    _stop_one_then_check(kafka_bootstrap, tmp_path, kafka_client, seed=19, at="end", static=True)


def test_a_dynamic_member_stopped_past_its_session_commits_nothing(
    kafka_bootstrap, tmp_path, kafka_client
):
    """Without ``--instance-id`` (dynamic members): a worker stopped at the start of a commit,
    past its session timeout and within the transaction timeout, comes back with its
    transaction open and its membership lost; its client, told so by a heartbeat, then says
    "no generation", which the broker does not check in a transaction's offsets. It must commit
    nothing (exit 1); every record learned and predicted exactly once."""
    _stop_one_then_check(kafka_bootstrap, tmp_path, kafka_client, seed=23, at="save", static=False)


def _stop_one_then_check(
    bootstrap: str, tmp_path: Path, client: str, *, seed: int, at: str, static: bool
) -> None:
    """Three workers (``static``: with ``--instance-id``); the one that gets to the stopping
    point ``at`` first stops itself there (at the start of a commit for HOLD_S; inside one until
    the broker rolled its transaction back), then must exit 1 and is restarted; then
    the chain only moved forward and every record was learned and predicted once."""
    data = sparse_examples(30_000, seed=seed, noise=0.05)
    topic, predictions = make_topics(bootstrap, PARTITIONS, 3)
    args, model_topic, group = streaming_workers(bootstrap, topic, predictions, client,
                                                 mix_every=500)  # fmt: skip
    produce(bootstrap, topic, data[:10_000])
    ids = ["w0", "w1", "w2"]
    member = {i: [*args, "--instance-id", i] if static else args for i in ids}
    logs = {i: tmp_path / f"{i}.log" for i in ids}
    env = {**os.environ, "PYTHONUNBUFFERED": "1", CLAIM: str(tmp_path / "claim"), AT: at}
    procs = {i: subprocess.Popen([sys.executable, str(WORKER), *member[i]],
                                 stdout=subprocess.DEVNULL, stderr=logs[i].open("ab"), env=env)
             for i in ids}  # fmt: skip
    try:
        stopped = _stopped_worker(procs, logs)
        produce(bootstrap, topic, data[10_000:20_000], start=10_000)
        if at == "end":  # inside the commit: held until the broker rolled it back (10-20 s)
            _wait_rolled_back(bootstrap, f"stream-perceptron-{group}-{stopped}")
        else:
            time.sleep(HOLD_S)
        procs[stopped].send_signal(signal.SIGCONT)
        _refused(procs[stopped], logs[stopped])
        produce(bootstrap, topic, data[20_000:], start=20_000)
        procs[stopped] = start_worker(member[stopped], logs[stopped])
        _drain(bootstrap, group, topic, len(data), list(procs.values()))
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
    versions = _mixture_versions(bootstrap, model_topic)
    assert len(versions) >= 3 and versions == sorted(set(versions)), versions
    _check_exact(bootstrap, tmp_path, topic, predictions, model_topic, data, client)


def _stopped_worker(procs: dict[str, subprocess.Popen], logs: dict[str, Path]) -> str:
    """The worker that stopped itself (once it is stopped)."""
    deadline = time.monotonic() + 120
    while not (stopped := [i for i in procs if "PAUSED-COMMIT: stopping" in logs[i].read_text()]):
        assert time.monotonic() < deadline, "no worker got to its stopping point"
        time.sleep(0.05)
    while not _stopped(procs[stopped[0]].pid):
        assert procs[stopped[0]].poll() is None, logs[stopped[0]].read_text()[-3000:]
        time.sleep(0.01)
    return stopped[0]


def _wait_rolled_back(bootstrap: str, transactional_id: str) -> None:
    """Until the broker has rolled back the open transaction of ``transactional_id`` (its
    producer stopped inside it: nothing else can end it)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        first = admin.describe_transactions([transactional_id])[transactional_id]
        assert first.state.value == "Ongoing", first
        deadline = time.monotonic() + 60
        while (now := admin.describe_transactions([transactional_id])[transactional_id]).state \
                .value == "Ongoing":  # fmt: skip
            assert time.monotonic() < deadline, f"not rolled back in 60 s: {now}"
            time.sleep(0.2)
        assert now.state.value in ("PrepareAbort", "CompleteAbort"), now
    finally:
        admin.close()


def _refused(proc: subprocess.Popen, log: Path) -> None:
    """The continued worker's transaction was refused: it exits 1."""
    try:
        code = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        code = None  # still running: its transaction went through
    assert code == 1, (
        f"the stopped worker's transaction was not refused (exit code {code}):\n"
        + log.read_text()[-3000:]
    )
    assert "PAUSED-COMMIT: continued" in log.read_text()
