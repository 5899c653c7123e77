"""Signed model-topic records written again (issue #45): an older copy of a record the group
signed keeps a good signature, so what refuses it is what the record says, which only moves
forward; a replayed partition record, former head or held increment is refused (``replayed``)
and changes nothing, and the group writes its newest records again so that compaction keeps
them, not the replay."""

from __future__ import annotations

import json
import random

from test_model_view import _run
from test_shared_coordinator import MODEL_TOPIC, TOPIC, Cluster, _data, _Stepper, _worker

from connectors.kafka.model_log import LogRecord
from stream_perceptron import Perceptron
from stream_perceptron.sharing import Mixture, PartitionState
from stream_perceptron.sharing.pull import pull_model
from stream_perceptron.sharing.records import increment_key
from stream_perceptron.sharing.signing import RecordSigner
from stream_perceptron.sharing.view import ModelView

KEY = b"k" * 32


class _Log:
    def __init__(self, records: list) -> None:
        self.records = records

    def read_new(self) -> list:
        return [LogRecord(k, v, h) for k, v, h in self.records]


def _older_copies(log: list) -> dict[str, tuple[bytes, bytes | None, list]]:
    """One record of each kind the workers wrote that a later one of its key superseded: a
    partition record, a mixture (a former head), an increment a mixture holds, a tombstone."""
    out: dict[str, tuple[bytes, bytes | None, list]] = {}
    for key, value, headers in log:
        if value is None:
            out.setdefault("tombstone", (key, value, headers))
            continue
        record = json.loads(value)
        if record["type"] == "partition" and record["partition"] == 1:
            out.setdefault("partition", (key, value, headers))
        elif record["type"] == "mixture" and record["version"] >= 1:
            out.setdefault("mixture", (key, value, headers))
        elif record["type"] == "increment":
            out.setdefault("increment", (key, value, headers))
    return out


def test_signed_records_written_again_are_refused_and_change_nothing() -> None:
    signer = RecordSigner(KEY)
    cluster = Cluster()
    _run(cluster, [], signer)
    log = cluster.topics[MODEL_TOPIC]
    want_model, want_version, want_offsets, clean = pull_model(_Log(log), signer)
    assert clean.rejected == {} and want_model.n_seen == 600
    copies = _older_copies(log)
    assert set(copies) == {"partition", "mixture", "increment", "tombstone"}, copies
    model, version, offsets, view = pull_model(_Log([*log, *copies.values()]), signer)
    assert offsets == want_offsets, "a partition record written again moved its offset back"
    assert model.get_state() == want_model.get_state() and version == want_version
    # each copy is refused by what it says; the tombstone names an increment already gone
    assert view.rejected == {"replayed": 3}, view.rejected
    assert view.replayed_partitions == {(TOPIC, 1)} and view.stale_after_head


def test_the_group_writes_again_what_a_replay_would_leave_last_for_compaction() -> None:
    """A copy written after the newest record of its key is what compaction would keep: the
    partition's owner writes its record again, the leader the head, at their next commit (an
    idle one too); the compacted log then holds the newest of each, and a restarted worker
    resumes where the partition was."""
    signer = RecordSigner(KEY)
    cluster, data = Cluster(), _data(2, 300)
    rng, available = random.Random(7), {0: 300, 1: 300}
    a = _Stepper(cluster, "a", [0], mix_every=60, signer=signer)
    b = _Stepper(cluster, "b", [1], mix_every=60, signer=signer)
    while not (a.done(data) and b.done(data)):
        a.step(data, available, rng)
        b.step(data, available, rng)
    a.coordinator.finish()
    b.coordinator.finish()
    head = a.coordinator.view.mixture
    assert head is not None and head.version >= 2
    copies = _older_copies(cluster.topics[MODEL_TOPIC])
    cluster.topics[MODEL_TOPIC].extend([copies["partition"], copies["mixture"]])
    for stepper in (b, a):  # nothing new to read: idle polls, a commit due at each
        stepper.coordinator.interval, stepper.coordinator.every = 0.0, None
    for _ in range(2):  # b reads the log at the first (it is no leader), commits at the next
        b.coordinator.idle()
        a.coordinator.idle()
    last = {k: i for i, (k, _, _) in enumerate(cluster.topics[MODEL_TOPIC])}
    compacted = [cluster.topics[MODEL_TOPIC][i] for i in sorted(last.values())]
    view = ModelView(signer=signer)
    view.ingest([LogRecord(k, v, h) for k, v, h in compacted])
    assert view.rejected == {}
    assert view.partitions[(TOPIC, 1)].next_offset == 300
    assert view.mixture is not None and view.mixture.version == head.version
    current = view.current()
    assert current is not None and current[0]["n_seen"] == view.examples() == 600
    restarted = _Stepper(cluster, "b", [1], mix_every=60, signer=signer)
    assert restarted.positions == {1: 300}  # not the copy's older offset
    for stepper in (a, b, restarted):  # each read both copies, refused them and counted them
        assert stepper.coordinator.view.rejected == {"replayed": 2}


def test_what_each_rule_takes_and_refuses() -> None:
    """Forward or equal is taken (a commit that learned nothing writes the same record), back
    is refused; the head read again is the leader's rewrite, a former head is a copy."""
    view = ModelView()
    at = [PartitionState(TOPIC, 0, o, n, m, "a") for o, n, m in
          ((10, 8, 2), (20, 18, 3), (20, 18, 3), (10, 8, 2), (20, 17, 3), (20, 18, 2))]  # fmt: skip
    view.ingest([(p.key.encode(), p.encode()) for p in at])
    assert view.partitions[(TOPIC, 0)] == at[1]
    assert view.rejected == {"replayed": 3} and view.replayed_partitions == {(TOPIC, 0)}
    view.ingest([(at[1].key.encode(), PartitionState(TOPIC, 0, 20, 18, 3, "b").encode())])
    assert view.partitions[(TOPIC, 0)].worker == "b" and not view.replayed_partitions
    state = Perceptron().get_state()
    first, second = Mixture(1, state, "a"), Mixture(2, state, "a")
    view.ingest([(b"mixture", first.encode()), (b"mixture", second.encode())])
    view.ingest([(b"mixture", second.encode())])  # the head again: known
    assert view.rejected["replayed"] == 3 and not view.stale_after_head
    view.ingest([(b"mixture", first.encode())])  # a former head again: a copy
    assert view.rejected["replayed"] == 4 and view.stale_after_head
    assert view.mixture == second


def test_a_restarted_worker_numbers_on_past_its_tombstones() -> None:
    """A worker's increment deleted before any mixture held it (refused, so tombstoned) is
    still numbered past on a restart: its tombstone, written again, names no live increment."""
    cluster = Cluster()
    head = Mixture(0, Perceptron(averaged=True).get_state(), "a", included={"w": 3})
    cluster.topics[MODEL_TOPIC] = [
        (b"mixture", head.encode(), []),
        (increment_key("w", 5).encode(), None, []),  # the leader deleted w's increment 5
    ]
    _, coordinator = _worker(cluster, "w")
    assert coordinator._seq == 5  # its next increment is 6
