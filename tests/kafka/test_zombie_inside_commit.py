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

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from kafka import KafkaAdminClient, KafkaConsumer
from paused_commit_worker import AT, CLAIM
from shared_model_helpers import (
    PARTITIONS,
    make_topics,
    produce,
    read_committed,
    sparse_examples,
    start_worker,
    streaming_workers,
)
from test_shared_model import _check_exact, _drain
from test_shared_model_guards import _mixture_versions

WORKER = Path(__file__).with_name("paused_commit_worker.py")
#: a member stopped at the start of a commit is held past its session timeout (6 s)
HOLD_S = 7.5
#: the landed case's transaction timeout, each client's own name (--producer-option)
TXN_TIMEOUT_OPTION = {"kafka-python": "transaction_timeout_ms=60000",
                      "confluent-kafka": "transaction.timeout.ms=60000"}


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] == "T"


def test_a_leader_stopped_inside_a_mixtures_commit_is_refused(
    kafka_bootstrap, tmp_path, kafka_client
):
    _stop_one_then_check(kafka_bootstrap, tmp_path, kafka_client, seed=19, at="end", static=True)


def test_a_leader_continued_before_the_rollback_commits_and_the_chain_only_moves_on(
    kafka_bootstrap, tmp_path, kafka_client
):
    """The same leader continued while its transaction is still open (its timeout raised to
    60 s, so the broker cannot roll it back first), once the group dropped it: the broker takes
    its EndTxn (it checked the generation when the offsets joined the transaction), so its
    commit lands. Where its mixture lands depends on whether its messages went out before it
    stopped: first in the log (then the others could read nothing committed after it, and made
    no mixture meanwhile), or behind the new leader's newer mixture, where every other worker
    refuses it as stale and the head is written again after it (both seen in 6 runs here).
    Either way its next commit is refused (exit 1), the chain read only moves forward, and
    every record is learned and predicted exactly once."""
    _stop_one_then_check(kafka_bootstrap, tmp_path, kafka_client, seed=29, at="end", static=True,
                         landed=True)  # fmt: skip


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
    bootstrap: str, tmp_path: Path, client: str, *, seed: int, at: str, static: bool,
    landed: bool = False,
) -> None:
    """Three workers (``static``: with ``--instance-id``); the one that gets to the stopping
    point ``at`` first stops itself there (at the start of a commit for HOLD_S; inside one until
    the broker rolled its transaction back), then must exit 1 and is restarted; then
    the chain only moved forward and every record was learned and predicted once. ``landed``:
    continued inside its commit before the broker could roll it back, so that its commit
    lands."""
    data = sparse_examples(30_000, seed=seed, noise=0.05)
    topic, predictions = make_topics(bootstrap, PARTITIONS, 3)
    args, model_topic, group = streaming_workers(bootstrap, topic, predictions, client,
                                                 mix_every=500)  # fmt: skip
    produce(bootstrap, topic, data[:10_000])
    ids = ["w0", "w1", "w2"]
    if landed:  # the user's flag: a transaction the broker rolls back after 60 s, not 10-20
        args = [*args, "--producer-option", TXN_TIMEOUT_OPTION[client]]
    member = {i: [*args, "--instance-id", i] if static else args for i in ids}
    logs = {i: tmp_path / f"{i}.log" for i in ids}
    env = {**os.environ, "PYTHONUNBUFFERED": "1", CLAIM: str(tmp_path / "claim"), AT: at}
    procs = {i: subprocess.Popen([sys.executable, str(WORKER), *member[i]],
                                 stdout=subprocess.DEVNULL, stderr=logs[i].open("ab"), env=env)
             for i in ids}  # fmt: skip
    try:
        stopped = _stopped_worker(procs, logs)
        produce(bootstrap, topic, data[10_000:20_000], start=10_000)
        if landed:
            late = _wait_moved_on(bootstrap, group, model_topic, stopped)
        elif at == "end":  # inside the commit: held until the broker rolled it back (10-20 s)
            _wait_rolled_back(bootstrap, f"stream-perceptron-{group}-{stopped}")
        else:
            time.sleep(HOLD_S)
        procs[stopped].send_signal(signal.SIGCONT)
        _refused(procs[stopped], logs[stopped], landed)
        produce(bootstrap, topic, data[20_000:], start=20_000)
        procs[stopped] = start_worker(member[stopped], logs[stopped])
        _drain(bootstrap, group, topic, len(data), list(procs.values()))
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
    if landed:
        _late_mixture_refused(bootstrap, model_topic, stopped, late, logs)
    else:
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


def _wait_moved_on(bootstrap: str, group: str, model_topic: str, stopped: str) -> int:
    """Until the group dropped ``stopped`` (its session expired), then up to 10 s
    for a mixture of another worker in the model topic (read uncommitted: whether one comes
    depends on whether the stopped one's messages went out before it stopped, holding back
    what may be read committed); that mixture's version, else 0."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    deadline = time.monotonic() + 60
    try:
        while True:
            described = admin.describe_groups([group])[group]
            members = [m.get("group_instance_id") for m in described.get("members", [])]
            if stopped not in members:  # its session expired (the others may still wait
                break  # on its open transaction's offsets: librdkafka in its assign)
            assert time.monotonic() < deadline, f"the group did not move on in 60 s: {described}"
            time.sleep(0.2)
    finally:
        admin.close()
    consumer = KafkaConsumer(model_topic, bootstrap_servers=bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest")  # fmt: skip
    deadline, newest = time.monotonic() + 10, 0
    try:
        while not newest and time.monotonic() < deadline:
            for messages in consumer.poll(timeout_ms=200).values():
                for m in messages:
                    if m.key == b"mixture" and m.value is not None:
                        record = json.loads(m.value)
                        if record["worker"] != stopped:
                            newest = max(newest, record["version"])
    finally:
        consumer.close()
    return newest


def _late_mixture_refused(
    bootstrap: str, model_topic: str, stopped: str, newer: int, logs: dict[str, Path]
) -> None:
    """The stopped leader's mixture landed; every mixture record that is not newer than the
    ones before it is either the stopped leader's, refused as stale by every other worker, or
    the head written again; the last is the newest of all."""
    records = [json.loads(m.value) for m in read_committed(bootstrap, model_topic, 1)
               if m.key == b"mixture" and m.value is not None]  # fmt: skip
    assert any(r["worker"] == stopped for r in records), f"its commit did not land: {records}"
    # before the first record: a leader's first commit writes mixture 0 (the fresh model)
    # when no mix is due yet, and that record is the head, not a stale one
    head: dict = {"version": -1}
    behind = []
    for r in records:
        if r["version"] > head["version"]:
            head = r
        elif r["worker"] == stopped:
            behind.append(r["version"])
        else:
            assert (r["version"], r["mixed_at"]) == (head["version"], head["mixed_at"]), (r, head)
    for version in behind:
        for i, log in logs.items():
            said = f"mixture {version} of {stopped!r} is not newer than the head"
            assert i == stopped or said in log.read_text(), f"{i} did not refuse it as stale"
    assert records[-1]["version"] == head["version"], records[-1]
    if newer and not behind:  # its messages went out before it stopped: first in the log
        first = next(i for i, r in enumerate(records) if r["worker"] == stopped)
        assert all(r["worker"] == stopped or r["version"] != newer for r in records[:first])
    print(f"the stopped leader's mixture: {'behind' if behind else 'first'} (newer {newer})")


def _refused(proc: subprocess.Popen, log: Path, landed: bool = False) -> None:
    """The continued worker's transaction was refused: it exits 1 (``landed``: its commit
    went through, the next one is refused)."""
    try:
        code = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        code = None  # still running: its transaction went through
    assert code == 1, (
        f"the stopped worker's transaction was not refused (exit code {code}):\n"
        + log.read_text()[-3000:]
    )
    text = log.read_text()
    assert "PAUSED-COMMIT: continued" in text
    if landed:
        assert "committed" in text.split("PAUSED-COMMIT: continued", 1)[1], text[-3000:]
