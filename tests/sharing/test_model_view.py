"""Hostile model-topic records, in one process: whatever a stranger writes to the model topic
is refused by reason, never folded, never a crash; the chain only moves forward."""

from __future__ import annotations

import math

import pytest
from model_topic_records import hostile_records
from test_shared_coordinator import MODEL_TOPIC, TOPIC, Cluster, PartitionSource, _data, _worker

from stream_perceptron import Perceptron
from stream_perceptron.sharing import Mixture, PartitionState
from stream_perceptron.sharing.pull import pull_model
from stream_perceptron.sharing.view import ModelView


def _run(cluster: Cluster, written: list[tuple[bytes, bytes | None, list]], signer=None) -> None:
    """Two workers (``a`` owns the leader partition; ``signer``: their group key) learn
    2 x 300 records; records ``(key, value, headers)`` someone else ``written`` land on the
    model topic after every fifth commit of ``b`` once a mixture exists (before the first
    one, a reader without a model of its own, as pull-model, takes the first well-formed
    mixture's settings as the group's)."""
    data = _data(2, 300)
    a, ca = _worker(cluster, "a", mix_every=60, signer=signer)
    b, cb = _worker(cluster, "b", mix_every=60, signer=signer)
    commits = 0
    save = cb.save

    def save_and_poison(background: bool = False) -> None:
        nonlocal commits
        save(background)
        commits += 1
        if commits % 5 == 0 and cb.version > 0:
            cluster.topics[MODEL_TOPIC].extend(written)

    cb.save = save_and_poison  # type: ignore[method-assign]
    halves = [{p: rows[:150] for p, rows in data.items()}, data]
    for part in halves:  # interleaved: each learns some, commits, and the leader mixes
        b.run(PartitionSource(cluster, part, [1], cb))
        a.run(PartitionSource(cluster, part, [0], ca))
        cb.mix()


def _unsigned(hostile: list[tuple[bytes, bytes | None, str]]) -> list:
    return [(k, v, []) for k, v, _ in hostile]


def test_hostile_records_are_refused_by_reason_and_change_nothing() -> None:
    fresh = Perceptron(averaged=True).get_state()
    hostile = hostile_records(fresh)
    clean, poisoned = Cluster(), Cluster()
    _run(clean, [])
    _run(poisoned, _unsigned(hostile))
    views = []
    for cluster in (clean, poisoned):
        view = ModelView()
        view.ingest([(k, v) for k, v, _ in cluster.topics[MODEL_TOPIC]])
        views.append(view)
    want, got = views[0].current(), views[1].current()
    assert want is not None and got is not None
    assert got[0]["n_seen"] == want[0]["n_seen"] == 600
    assert Perceptron.from_state(got[0]).weights == Perceptron.from_state(want[0]).weights
    assert got[0]["bias"] == want[0]["bias"] and got[1] == want[1]
    # every kind of hostile record was met and refused for its reason (increments are refused
    # when the leader reads them: those it saw are deleted with tombstones)
    assert set(views[1].rejected) == {reason for _, _, reason in hostile}
    assert views[0].bad_records == 0
    leftovers = [w for w, held in views[1].increments.items() if w not in ("a", "b") and held]
    assert not leftovers, leftovers  # the leader deleted every refused increment


def test_pull_model_skips_hostile_records() -> None:
    cluster = Cluster()
    _run(cluster, _unsigned(hostile_records(Perceptron(averaged=True).get_state())))

    class Log:
        def read_new(self):
            return [(k, v) for k, v, _ in cluster.topics[MODEL_TOPIC]]

    model, version, offsets, view = pull_model(Log())
    assert model.n_seen == 600 and version >= 1 and view.bad_records > 0
    assert offsets == {(TOPIC, 0): 300, (TOPIC, 1): 300}
    assert all(math.isfinite(w) for w in model.weights.values())


def test_the_chain_only_moves_forward() -> None:
    """A mixture not newer than the head is refused (a stale or forked one), except the head
    itself read again; the head stays. While a refused one is the log's last mixture record
    (what compaction keeps), the view says so, until the head is read again or a newer one."""
    state = Perceptron().get_state()
    view = ModelView()
    head = Mixture(3, state, "a")
    older = Mixture(2, state, "b")
    fork = Mixture(3, state, "zombie")
    view.ingest([(b"mixture", head.encode()), (b"mixture", older.encode()),
                 (b"mixture", fork.encode())])  # fmt: skip
    assert view.mixture == head and view.stale_after_head
    view.ingest([(b"mixture", head.encode())])  # the leader wrote the head again
    assert view.mixture == head and not view.stale_after_head
    assert view.rejected == {"stale": 2}
    view.ingest([(b"mixture", fork.encode()), (b"mixture", Mixture(4, state, "a").encode())])
    assert view.mixture.version == 4 and not view.stale_after_head


def test_former_heads_read_again_are_copies() -> None:
    """The log is read once, in order: a former head read again is an older record written
    again (``replayed``); a mixture of that version from another writer is ``stale``. Both
    leave a record older than the head last in the log, so the leader writes the head again."""
    state = Perceptron().get_state()
    view = ModelView()
    first, second = Mixture(1, state, "a"), Mixture(2, state, "a")
    view.advance(first)
    view.advance(second)
    forged = Mixture(1, state, "a", mixed_at=first.mixed_at + 1)
    view.ingest([(b"mixture", first.encode()), (b"mixture", second.encode()),
                 (b"mixture", forged.encode())])  # fmt: skip
    assert view.mixture == second and view.stale_after_head
    assert view.rejected == {"replayed": 1, "stale": 1}


def test_a_partition_record_under_another_key_is_refused() -> None:
    record = PartitionState(TOPIC, 0, 10, 10, 1, "a")
    view = ModelView()
    view.ingest([(b"partition:events:1", record.encode()), (b"mixture", record.encode())])
    assert view.partitions == {} and view.rejected == {"malformed": 2}


@pytest.mark.parametrize("bias", ["learned", "r2"])
def test_the_weight_bound_holds_for_a_real_learner_and_refuses_more(bias: str) -> None:
    """Every state a perceptron reaches passes the ``lr R n`` bound; twice its weights after
    as many examples do not."""
    model = Perceptron(lr=0.5, bias=bias)
    for i in range(200):
        x = {"a": math.sin(i), "b": math.cos(3 * i) * 2}
        model.learn_one(x, x["a"] + 0.3 * x["b"] > 0.1)
    state = model.get_state()
    counts = PartitionState(TOPIC, 0, 200, 200, 0, "a")
    view = ModelView()
    view.ingest([(counts.key.encode(), counts.encode()),
                 (b"mixture", Mixture(1, state, "a").encode())])  # fmt: skip
    assert view.mixture is not None and view.rejected == {}
    limit = 0.5 * state["max_norm"] * 200
    inflated = dict(state, weights=[["a", 1.01 * limit]])
    view.ingest([(b"mixture", Mixture(2, inflated, "a").encode())])
    assert view.mixture.version == 1 and view.rejected == {"implausible": 1}


def test_partitions_that_spell_labels_differently_learn_one_model() -> None:
    """Partition 0 labels true/false, partition 1 labels 1/0: both workers learn, the leader
    mixes both (nothing refused), and each worker prints its own spelling."""
    import json

    cluster = Cluster()
    data = _data(2, 300)
    data[0] = [json.dumps({**(r := json.loads(v)), "y": bool(r["y"])}).encode() for v in data[0]]
    a, ca = _worker(cluster, "a", mix_every=60)
    b, cb = _worker(cluster, "b", mix_every=60)
    for part in ({p: rows[:150] for p, rows in data.items()}, data):
        b.run(PartitionSource(cluster, part, [1], cb))
        a.run(PartitionSource(cluster, part, [0], ca))
        cb.mix()
    view = ModelView()
    view.ingest([(k, v) for k, v, _ in cluster.topics[MODEL_TOPIC]])
    current = view.current()
    assert current is not None and current[0]["n_seen"] == 600
    assert view.rejected == {} and ca.version >= 2 and cb.version >= 2
    assert type(a.learner.predict_one({"x": 1.0, "z": 0.0})) is bool
    assert type(b.learner.predict_one({"x": 1.0, "z": 0.0})) is int
