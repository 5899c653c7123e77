"""The per-mix costs behind benchmarks/README.md's 100-worker arithmetic.

``python -m benchmarks.shared_model_costs``: publication and partition-record sizes, the time to
mix 3 and 100 averaged-perceptron states and to decode 100 publications, at 10 and 1,000
features (50 per record).
"""

from __future__ import annotations

import random
import time

from stream_perceptron import Perceptron
from stream_perceptron.sharing import PartitionState, Publication, mix_states
from stream_perceptron.sharing.records import decode


def _states(d: int, workers: int = 100) -> list[dict]:
    states = []
    for w in range(workers):
        model, rng = Perceptron(averaged=True), random.Random(w)
        for _ in range(300):
            if d <= 10:
                x = {f"f{j}": rng.gauss(0, 1) for j in range(d)}
            else:
                x = {f"f{rng.randrange(d)}": rng.gauss(0, 1) for _ in range(50)}
            model.learn_one(x, rng.random() < 0.5)
        states.append(model.get_state())
    return states


def main() -> None:
    for d in (10, 1000):
        states = _states(d)
        publication = Publication("w", 1, 1, 100, states[0]).encode()
        t = time.perf_counter()
        mix_states(states, [100] * 100, n_seen=30_000)
        mix100 = time.perf_counter() - t
        t = time.perf_counter()
        mix_states(states[:3], [100] * 3, n_seen=900)
        mix3 = time.perf_counter() - t
        t = time.perf_counter()
        for _ in range(100):
            decode(publication)
        decoding = time.perf_counter() - t
        print(
            f"{d} features: publication {len(publication):,} B; mixing 3 states "
            f"{mix3 * 1e3:.2f} ms, 100 states {mix100 * 1e3:.1f} ms; decoding 100 publications "
            f"{decoding * 1e3:.1f} ms"
        )
    record = PartitionState("examples", 17, 123_456_789, 123_456_789, 1_234_567, "worker-42")
    print(f"partition record {len(record.encode())} B")


if __name__ == "__main__":
    main()
