"""``/api/state``'s ``shared_model`` object, in one process over the in-memory cluster: what
one worker's page says of the group (the browser test with three workers on the real broker
is tests/ui/test_shared_model_page.py)."""

from __future__ import annotations

import json

from test_shared_coordinator import TOPIC, Cluster, PartitionSource, _data, _worker

from stream_perceptron.metrics.live import LiveState


def test_the_group_as_one_worker_sees_it() -> None:
    cluster = Cluster()
    data = _data(3, 200)
    a, ca = _worker(cluster, "a", mix_every=60)
    b, cb = _worker(cluster, "b", mix_every=60)
    live = LiveState(a)
    a.run(PartitionSource(cluster, data, [0, 2], ca))  # revokes at the end: take them back
    b.run(PartitionSource(cluster, data, [1], cb))
    cb.mix()
    ca.assigned([(TOPIC, 0), (TOPIC, 2)])
    ca.mix()
    live.observe_batch(0.0)
    state = json.loads(live.state_json())
    shared = state["shared_model"]
    assert shared["worker"] == "a" and shared["version"] == ca.version >= 1
    assert shared["mixes"] == ca.mixes and shared["divergence"] == ca.divergence
    assert shared["owned"] == [[TOPIC, 0], [TOPIC, 2]]
    assert shared["group_size"] == 2
    workers = {w["worker"]: w["partitions"] for w in shared["workers"]}
    assert sorted(workers) == ["a", "b"]
    assert [p for _, p, _, _ in workers["a"]] == [0, 2]
    assert workers["b"] == [[TOPIC, 1, 200, None]]  # next offset from its partition record
    assert shared["versions"][-1][1] == ca.version
    assert shared["last_mix_age_seconds"] is not None and shared["rejected"] == {}


def test_no_group_outside_shared_mode(tmp_path) -> None:
    from stream_perceptron import Perceptron
    from stream_perceptron.engine import Engine, Outputs
    from stream_perceptron.formats import make_parser

    engine = Engine(Perceptron(), make_parser("jsonl"), Outputs())
    assert LiveState(engine).state()["shared_model"] is None
