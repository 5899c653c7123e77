"""The per-mix costs behind benchmarks/README.md's 100-worker arithmetic.

``python -m benchmarks.shared_model_costs``: increment and partition-record sizes, the time to
fold the increments of 3 and 100 averaged-perceptron workers into a mixture and to decode 100
increments, at 10 and 1,000 features (50 per record).
"""

from __future__ import annotations

import random
import time

from stream_perceptron import Perceptron
from stream_perceptron.sharing import Increment, PartitionState
from stream_perceptron.sharing.increments import fold, form, increment
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
        base = Perceptron(averaged=True).get_state()
        steps = [(s, [increment(s, form(base))]) for s in states]
        meta = {k: v for k, v in states[0].items() if k not in ("weights", "avg_weights_acc")}
        record = Increment("w", 1, 1, steps[0][1][0].encode(), meta).encode()
        t = time.perf_counter()
        fold(base, steps)
        mix100 = time.perf_counter() - t
        t = time.perf_counter()
        fold(base, steps[:3])
        mix3 = time.perf_counter() - t
        t = time.perf_counter()
        for _ in range(100):
            decode(record)
        decoding = time.perf_counter() - t
        print(
            f"{d} features: increment {len(record):,} B; folding 3 workers' increments "
            f"{mix3 * 1e3:.2f} ms, 100 workers' {mix100 * 1e3:.1f} ms; decoding 100 increments "
            f"{decoding * 1e3:.1f} ms"
        )
    record = PartitionState("examples", 17, 123_456_789, 123_456_789, 1_234_567, "worker-42")
    print(f"partition record {len(record.encode())} B")


if __name__ == "__main__":
    main()
