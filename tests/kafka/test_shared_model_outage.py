"""Shared-model mode rides out a broker outage: the broker stops for ~10 s mid-stream and
restarts; the workers' failed transactions are committed again once it is back (a worker the
restart left with an unusable client exits 1 and is restarted, as an orchestrator would), and
every record is still learned and predicted exactly once, by one model. The broker is
stopped gracefully (the workers ride it out in place) or killed (a crash)."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from kafka.errors import KafkaError
from kafka_broker import crash_broker, free_port, start_broker, stop_broker
from shared_model_helpers import (
    PARTITIONS,
    STEADY_SESSION_MS,
    committed,
    examples,
    make_topics,
    produce,
    sparse_examples,
    start_worker,
    streaming_workers,
    wait_for,
    wait_for_leaders,
)
from test_shared_model import _check_exact

from stream_perceptron.cli.run import STOP_BOUND_S

pytestmark = pytest.mark.kafka

#: the README's bound: a worker ends within STOP_BOUND_S (20 s) of SIGTERM in every state, its
#: watchdog exiting 2 s before (it was 30 s, then 20 s + 1 s: a fresh clone's suite beside a
#: soak once needed more than that 1 s to exit after the watchdog fired at 20 s)
STOP_WITHIN_S = STOP_BOUND_S

def test_workers_ride_out_a_broker_restart(tmp_path, kafka_client):
    _outage(tmp_path, kafka_client, crash=False)


def test_a_broker_crash_loses_nothing_and_learns_nothing_twice(tmp_path, kafka_client):
    """The broker is killed (SIGKILL) mid-stream and started again 10 s later: its transaction
    coordinator aborts, with a new producer epoch, the transactions its timeout (10 s) ran out
    on: a worker whose producer that fenced, or whose static membership the group dropped,
    exits 1 saying why and its restart reads from its last commit; every record is still
    learned and predicted exactly once. The workers are paused around the kill, as around the
    graceful stop: a one-broker Kafka 4.3.1 loses a commit it answered whose markers a crash
    left unwritten (the CI run of 519d174 lost 1,000 predictions so; see :func:`_outage`)."""
    _outage(tmp_path, kafka_client, crash=True)


def _outage(tmp_path, kafka_client: str, crash: bool) -> None:
    state, port = tmp_path / "kafka", free_port()
    bootstrap = start_broker(state_dir=state, port=port)
    procs = []
    try:
        data = sparse_examples(36_000, seed=21, noise=0.1)
        topic, predictions = make_topics(bootstrap, PARTITIONS, 3)
        # the steady session, not the failover tests' 6 s: no member is meant to leave the
        # group here, and the workers stand paused (SIGSTOP) through the broker's stop, so a
        # stall of a few seconds on top ended their sessions (soak 34b: the broker removed both
        # members 0.1 s before its shutdown began; kafka-python's retries were then refused,
        # UnknownMemberId, both exited 1 and none rode the outage out in place)
        args, model_topic, group = streaming_workers(
            bootstrap, topic, predictions, kafka_client, mix_every=1000,
            session_ms=STEADY_SESSION_MS,
        )
        logs = [tmp_path / f"w{i}.log" for i in range(2)]
        member = [[*args, "--instance-id", f"w{i}"] for i in range(2)]
        procs = [start_worker(member[i], log) for i, log in enumerate(logs)]
        for log in logs:  # both in the group, each with its partitions, before any record
            wait_for(log, f"assigned [('{topic}'", timeout=90)
        produce(bootstrap, topic, data[:30_000])
        for log in logs:
            wait_for(log, f" committed {topic}[", timeout=90)
        # mid-stream (the workers are learning what they fetched): commits fail from here.
        # The workers are paused while the broker shuts down: a one-broker cluster stopped
        # gracefully while a commit is between PrepareCommit and its markers completes it
        # without markers (its coordinator finds no leader for the partitions and takes them
        # as deleted, KAFKA-5202's rule), and the commit's records then read as aborted: a
        # loss of Kafka's, not the engine's (kept broker data, session 25; the shared-model
        # guide). Paused, no commit is in that window; resumed, they meet the broker gone in
        # whatever step they were (a commit sent and unanswered included). A broker that
        # crashes instead: the next test. A crash loses such a commit too: the restarted
        # broker cannot reach itself until the controller has fenced its former registration
        # (about 9 s, broker.session.timeout.ms), which leaves every partition without a
        # leader, and its coordinator, finishing the commit from its log, then skips the
        # markers by the same rule; the records of a commit the worker was told had landed
        # read as aborted, or never become readable (the CI run of 519d174: 1,000 predictions
        # missing, their offsets and increment committed). Reproduced without the engine, one
        # producer committing and the broker killed at once: 300 of 300 committed records
        # lost, the broker logging "Couldn't find leader endpoint for partitions ... can be
        # skipped" (session 34). So the workers are paused around the kill as well.
        _pause(procs)
        if crash:
            crash_broker(state)
        else:
            stop_broker(state_dir=state)
        _resume(procs)
        time.sleep(10)
        assert all(p.poll() is None for p in procs), "a worker died while the broker was away"
        start_broker(state_dir=state, port=port)
        # the test's own clients wait for the restarted broker to lead its partitions (the
        # workers do not: riding that out is what they are tested for)
        wait_for_leaders(bootstrap, [topic, predictions, model_topic])
        produce(bootstrap, topic, data[30_000:], start=30_000)
        want = {p: len(data) // PARTITIONS for p in range(PARTITIONS)}
        deadline = time.monotonic() + 180
        restarts = [0, 0]
        while (seen := _committed_or_none(bootstrap, group, topic)) != want:
            assert time.monotonic() < deadline, seen
            for i, p in enumerate(procs):
                if p.poll() is None:
                    continue
                # a worker whose group membership or producer the restart left unusable
                # (librdkafka cannot rejoin a static group: its open issue 3437; a commit whose
                # outcome stays unknown) exits 1 with a line saying why, for its orchestrator
                # to restart it, as done here, once per worker at most
                tail = logs[i].read_text()[-3000:]
                assert p.returncode == 1 and restarts[i] == 0, tail
                assert "stream-perceptron: error: " in tail, tail
                restarts[i] += 1
                procs[i] = start_worker(member[i], logs[i])
            time.sleep(1)
        stopping = time.monotonic()
        for p in procs:
            p.send_signal(signal.SIGTERM)
        codes = [_wait_or_dump(p, log, 60) for p, log in zip(procs, logs)]
        # every worker ends within the bound: 10 s plus one transaction timeout (the README)
        took = time.monotonic() - stopping
        assert took < STOP_WITHIN_S, f"ended {took:.1f} s after SIGTERM: {codes}"
        assert set(codes) <= {0, 1}, codes
        text = "".join(log.read_text() for log in logs)
        # the outage met the workers mid-stream, and was ridden out in place by a worker that
        # did not restart: a failed commit committed again once the broker was back (a
        # commit in doubt finished, never sent again), or a commit that waited for the broker
        # inside the client (kafka-python's retries) once the group found it again
        seen = ("ECONNREFUSED", "Connection refused", "lost the brokers", "_ALL_BROKERS_DOWN",
                "did not read the model topic", "transaction failed")  # fmt: skip
        assert any(words in text for words in seen), text[-3000:]
        ridden = re.findall(
            r"committed after [0-9.]+ s of broker outage|reached (?:its coordinator|the "
            r"brokers) again after|a commit took [0-9.]+ s", text
        )  # fmt: skip
        # kafka-python rides it out in place (a restart is allowed besides, not instead). A
        # librdkafka worker may end with exit 1 instead, for its orchestrator to restart it:
        # librdkafka cannot rejoin a static group after a broker restart (its issue 3437); a
        # soak beside two CPU hogs saw both confluent-kafka workers do so once in 13 runs
        riders_or_restarts = crash or bool(ridden) or (kafka_client == "confluent-kafka"
                                                       and sum(restarts) == 2)  # fmt: skip
        assert riders_or_restarts, (restarts, [log.read_text()[-4000:] for log in logs])
        try:
            _check_exact(bootstrap, tmp_path, topic, predictions, model_topic, data,
                         kafka_client, workers=2)
        except AssertionError as e:  # the broker's own account of markers it skipped
            raise AssertionError(f"{e}\n{_skipped_markers(state)}") from None
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        stop_broker(state_dir=state)


def _committed_or_none(bootstrap: str, group: str, topic: str) -> dict[int, int | None] | None:
    """The group's committed offsets, or None while the broker does not answer (a stall of the
    machine on top of the restart: soak 34c's reader gave up after 30 s, in a 52 s stall of
    every process here; the test's deadline, not one request's, is what bounds the wait)."""
    try:
        return committed(bootstrap, group, topic)
    except KafkaError:
        return None


def _skipped_markers(state: Path) -> str:
    """The broker's log lines (this run and the one before its restart) saying it completed a
    transaction without writing its markers to some partitions: a loss of Kafka's (see
    docs/shared-model.md, "A broker bug to know")."""
    lines = [line for log in sorted(state.glob("server.log*"))
             for line in log.read_text(errors="replace").splitlines()
             if "Couldn't find leader endpoint" in line]  # fmt: skip
    return "the broker skipped markers:\n" + "\n".join(lines) if lines else (
        "the broker's log names no skipped markers")


def _pause(procs: list[subprocess.Popen]) -> None:
    """SIGSTOP every worker, then wait for a commit each may have just sent to be finished by
    the broker (markers are written within milliseconds)."""
    for p in procs:
        p.send_signal(signal.SIGSTOP)
    time.sleep(1)


def _resume(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.send_signal(signal.SIGCONT)


def _wait_or_dump(proc, log, timeout: float) -> int:
    """The exit code; a worker still running after ``timeout`` s has its threads' stacks
    dumped into its log (SIGUSR1), shown in the failure."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGUSR1)
        time.sleep(2)
        raise AssertionError(f"still running {timeout} s after SIGTERM:\n"
                             + log.read_text()[-6000:]) from None


def test_sigterm_ends_a_worker_within_the_bound_while_the_broker_is_down(tmp_path, kafka_client):
    """SIGTERM with the broker away (a commit failing, the model topic unreadable, the group
    lost) ends a worker within 10 s plus one transaction timeout; nothing it had not committed
    is visible afterwards (checked by the outage test above: exactness after restarts)."""
    state, port = tmp_path / "kafka", free_port()
    bootstrap = start_broker(state_dir=state, port=port)
    proc = None
    try:
        data = examples(6_000, seed=5, noise=0.1)
        topic, predictions = make_topics(bootstrap, PARTITIONS, 3)
        args, _model_topic, _group = streaming_workers(bootstrap, topic, predictions, kafka_client)
        produce(bootstrap, topic, data)
        log = tmp_path / "w.log"
        proc = start_worker([*args, "--instance-id", "w0"], log)
        wait_for(log, f" committed {topic}[", timeout=90)
        stop_broker(state_dir=state)
        time.sleep(4)  # commits fail, reads fail, the group is lost
        assert proc.poll() is None, log.read_text()[-3000:]
        stopping = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = _wait_or_dump(proc, log, 60)
        took = time.monotonic() - stopping
        assert took < STOP_WITHIN_S, f"ended {took:.1f} s after SIGTERM\n{log.read_text()[-3000:]}"
        assert code in (0, 1), log.read_text()[-3000:]
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
        stop_broker(state_dir=state)
