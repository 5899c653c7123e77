"""The mixing rule's quality, in one process: three workers take turns a batch at a time on a
noisy stream (10 % of the labels flipped) while the leader folds their increments; over 10
runs the pulled model is as good as one sequential perceptron on held-out data on average, and
the averaged one in every run. A plain perceptron's last weights swing by several points with
its last few mistakes, the sequential one's as much as the pulled one's (20 runs here: pulled
4.8 points better on average, worst 7.7 below; the former example-share rule 4.4 better, worst
6.8 below), so its worst run is held to a looser bound."""

from __future__ import annotations

import json
import random

import pytest
from test_shared_coordinator import MODEL_TOPIC, TOPIC, Cluster, _noisy, _Stepper

from stream_perceptron import Perceptron
from stream_perceptron.sharing.view import ModelView


def _accuracy(model: Perceptron, held_out: list[tuple[dict, int]]) -> float:
    return sum(model.predict_one(x) == y for x, y in held_out) / len(held_out)


def _gap(seed: int, averaged: bool, mix_every: int) -> tuple[float, int, int]:
    """Sequential minus pulled held-out accuracy, the mixtures made, and the mistakes the
    workers made during the run (predicting each example before learning it)."""
    rng = random.Random(seed)
    n, parts = 12_000, 6
    stream = _noisy(n, seed=100 + seed)
    data: dict[int, list[bytes]] = {p: [] for p in range(parts)}
    for i, (x, y) in enumerate(stream):
        data[i % parts].append(json.dumps({**x, "y": y}).encode())
    cluster = Cluster()
    workers = [
        _Stepper(cluster, f"w{i}", [2 * i, 2 * i + 1], mix_every=mix_every,
                 learner=Perceptron(averaged=averaged))
        for i in range(3)
    ]  # fmt: skip
    available = dict.fromkeys(range(parts), 0)
    while not all(available[p] == len(data[p]) for p in range(parts)) or not all(
        w.done(data) for w in workers
    ):
        for p in range(parts):
            available[p] = min(len(data[p]), available[p] + rng.randint(0, 12))
        rng.choice(workers).step(data, available, rng)
    for w in workers:
        w.coordinator.finish()
    view = ModelView()
    view.ingest([(k, v) for k, v, _ in cluster.topics[MODEL_TOPIC]])
    current = view.current()
    assert current is not None and current[0]["n_seen"] == n
    assert {p: s.n_seen for (t, p), s in view.partitions.items() if t == TOPIC} == {
        p: len(data[p]) for p in range(parts)
    }
    sequential = Perceptron(averaged=averaged)
    for x, y in stream:
        sequential.learn_one(x, y)
    held_out = _noisy(3000, seed=99)
    pulled = Perceptron.from_state(current[0])
    assert view.mixture is not None
    gap = _accuracy(sequential, held_out) - _accuracy(pulled, held_out)
    return gap, view.mixture.version, view.counts()[1]


@pytest.mark.parametrize("averaged", [False, True], ids=["plain", "averaged"])
def test_pulled_model_is_as_good_as_one_sequential_model_over_10_seeds(averaged) -> None:
    runs = [_gap(seed, averaged, mix_every) for seed in range(5) for mix_every in (500, 1000)]
    gaps = [g for g, _, _ in runs]
    mean = sum(gaps) / len(gaps)
    print(f"{'averaged' if averaged else 'plain'}: mean gap {mean:.4f}, worst {max(gaps):.4f}, "
          f"mixtures {[v for _, v, _ in runs]}")  # fmt: skip
    # --mix-every holds within a factor of 2: 12,000 records mixed every 500 or 1,000
    assert all(v >= 12_000 / mix / 2 for (_, v, _), mix in zip(runs, [500, 1000] * 5)), runs
    assert mean <= 0.01, gaps  # the bar: at most 1 point below on average
    assert max(gaps) <= (0.005 if averaged else 0.10), gaps  # and never far below


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_averaged_workers_that_mix_make_fewer_mistakes_than_workers_that_never_mix(seed) -> None:
    """What mixing is for: each worker predicts with what the whole group learned. An averaged
    worker that moves onto a mixture keeps a right running average (the mixture's history
    plus its own examples not folded yet, each with the weights it had); when its accumulators
    were shifted like its weights instead, its average was off after every move and the mixed
    workers made more mistakes than workers that never mix (1,588-1,921 against 1,476-1,545
    here; 1,378-1,454 since)."""
    _, _, mixed = _gap(seed, True, 1000)
    _, _, alone = _gap(seed, True, 10**12)
    print(f"seed {seed}: {mixed} mistakes mixing every 1000, {alone} never mixing")
    assert mixed < alone
