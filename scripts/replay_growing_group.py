"""The held-out gap of a shared model whose group grows mid-stream, replayed in one process.

The setting of ``tests/kafka/test_shared_model.py::test_workers_of_both_clients_learn_one_model``
(12,000 sparse-name records with 10 % noise over 6 partitions, 2 averaged workers mixing every
1,000, held out: 4,000 records of another seed), driven by the in-process harness of
``tests/sharing/test_shared_coordinator.py`` (the workers' engines and coordinators on an
in-memory log; batches in a random order while records arrive). ``--alone N``: one worker
holds all 6 partitions for the first N batches (about 6 N records), then the second joins and
each holds 3; 0: both from the start. ``--mix-at-join``: the first worker folds everything it
learned alone into a mixture at its revoke, before the second starts. Prints, per seed, one
sequential averaged perceptron's held-out accuracy less the pulled model's
(docs/shared-model.md cites these figures).

Usage: .venv/bin/python scripts/replay_growing_group.py [--alone N] [--seeds K] [--mix-at-join]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / d) for d in ("tests/sharing", "tests/kafka", "tests", ".")]

from shared_model_helpers import accuracy, sparse_examples  # noqa: E402
from test_shared_coordinator import MODEL_TOPIC, Cluster, _Stepper  # noqa: E402

from stream_perceptron import Perceptron  # noqa: E402
from stream_perceptron.sharing.view import ModelView  # noqa: E402

PARTITIONS = 6


def gap(
    seed: int, alone: int, data: list, held_out: list, sequential: float, mix_at_join: bool
) -> float:
    """Sequential minus pulled held-out accuracy for one random schedule."""
    rng = random.Random(seed)
    shards: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for i, (x, y) in enumerate(data):
        shards[i % PARTITIONS].append(json.dumps({**x, "y": y}).encode())
    cluster = Cluster()

    def worker(name: str, partitions: list[int]) -> _Stepper:
        return _Stepper(cluster, name, partitions, mix_every=1000,
                        learner=Perceptron(averaged=True))  # fmt: skip

    first = worker("w1", list(range(PARTITIONS)) if alone else [3, 4, 5])
    second = None if alone else worker("w0", [0, 1, 2])
    available = dict.fromkeys(range(PARTITIONS), 0)
    steps = 0
    while True:
        workers = [w for w in (first, second) if w is not None]
        arrived = all(available[p] == len(shards[p]) for p in range(PARTITIONS))
        if arrived and all(w.done(shards) for w in workers):
            break
        for p in range(PARTITIONS):
            available[p] = min(len(shards[p]), available[p] + rng.randint(0, 12))
        rng.choice(workers).step(shards, available, rng)
        steps += 1
        if second is None and steps == alone:  # the second worker joins: 3 partitions each
            if mix_at_join:  # its commit at the revoke mixes whatever is unmixed
                due = first.coordinator.mix_due
                first.coordinator.mix_due = lambda fresh, now=None: bool(fresh)  # type: ignore[method-assign]
                first.revoke()
                first.coordinator.mix_due = due  # type: ignore[method-assign]
            else:
                first.revoke()
            second = worker("w0", [0, 1, 2])
            first.assign([3, 4, 5])
    for w in (first, second):
        assert w is not None
        w.coordinator.finish()
    view = ModelView()
    view.ingest([(k, v) for k, v, _ in cluster.topics[MODEL_TOPIC]])
    current = view.current()
    assert current is not None and current[0]["n_seen"] == len(data)
    return sequential - accuracy(Perceptron.from_state(current[0]), held_out)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--alone", type=int, default=100,
                        help="batches one worker learns alone before the other joins (0: none)")
    parser.add_argument("--seeds", type=int, default=20, help="schedules replayed")
    parser.add_argument("--mix-at-join", action="store_true",
                        help="the first worker mixes what it learned alone before the second "
                        "starts")
    args = parser.parse_args(argv)
    data = sparse_examples(12_000, seed=13, noise=0.1)
    held_out = sparse_examples(4000, seed=99)
    one = Perceptron(averaged=True)
    for x, y in data:
        one.learn_one(x, y)
    sequential = accuracy(one, held_out)
    gaps = []
    for seed in range(args.seeds):
        gaps.append(gap(seed, args.alone, data, held_out, sequential, args.mix_at_join))
        print(f"seed {seed}: gap {gaps[-1]:.4f}", flush=True)
    join = ", mixing at the join" if args.mix_at_join else ""
    print(f"alone {args.alone} batches{join}: sequential {sequential:.4f}; gap over "
          f"{len(gaps)} seeds: mean {sum(gaps) / len(gaps):.4f}, worst {max(gaps):.4f}, "
          f"over 3 points {sum(g > 0.03 for g in gaps)}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
