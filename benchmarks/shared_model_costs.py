"""The per-mix costs behind benchmarks/README.md's 100-worker arithmetic.

``python -m benchmarks.shared_model_costs``: increment and partition-record sizes, the time to
fold the increments of 3 and 100 averaged-perceptron workers into a mixture and to decode 100
increments, at 10 and 1,000 features (50 per record); then with ``--hash-bits 20`` (a million
buckets, 50 tokens per record out of a million names): an increment of 1,000 records, the same
fold and decode times, and a mixture's bytes per bucket (what bounds the model: one Kafka
message of 16 MiB).
"""

from __future__ import annotations

import random
import time

from stream_perceptron import Perceptron
from stream_perceptron.sharing import Increment, Mixture, PartitionState
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


def _hashed(records: int, seed: int) -> Perceptron:
    """An averaged perceptron after ``records`` records of 50 hashed tokens (2**20 buckets)."""
    model, rng = Perceptron(averaged=True), random.Random(seed)
    for _ in range(records):
        y = rng.random() < 0.5
        x = {str(rng.randrange(1 << 20)): 1.0 for _ in range(50)}
        x[f"signal{int(y)}"] = 1.0
        model.learn_one(x, y)
    return model


def _costs(states: list[dict]) -> tuple[bytes, dict, float, float, float]:
    """One worker's increment record, the mixture of 100 workers' increments, and the seconds
    to fold 100 and 3 of them and to decode 100 records."""
    base = Perceptron(averaged=True).get_state()
    steps = [(s, [increment(s, form(base))]) for s in states]
    meta = {k: v for k, v in states[0].items() if k not in ("weights", "avg_weights_acc")}
    record = Increment("w", 1, 1, steps[0][1][0].encode(), meta).encode()
    t = time.perf_counter()
    mixed = fold(base, steps)
    mix100 = time.perf_counter() - t
    t = time.perf_counter()
    fold(base, steps[:3])
    mix3 = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(100):
        decode(record)
    return record, mixed, mix3, mix100, time.perf_counter() - t


def main() -> None:
    for d in (10, 1000):
        record, _, mix3, mix100, decoding = _costs(_states(d))
        print(
            f"{d} features: increment {len(record):,} B; folding 3 workers' increments "
            f"{mix3 * 1e3:.2f} ms, 100 workers' {mix100 * 1e3:.1f} ms; decoding 100 increments "
            f"{decoding * 1e3:.1f} ms"
        )
    state = PartitionState("examples", 17, 123_456_789, 123_456_789, 1_234_567, "worker-42")
    print(f"partition record {len(state.encode())} B")
    record, mixed, mix3, mix100, decoding = _costs(
        [_hashed(1000, seed).get_state() for seed in range(100)]
    )
    buckets = len(decode(record).delta["classes"][0]["weights"])  # type: ignore[union-attr]
    per_bucket = len(Mixture(1, mixed, "w").encode()) / len(mixed["weights"])
    print(
        f"hashed, 2**20 buckets: increment of 1,000 records {len(record):,} B ({buckets:,} "
        f"buckets); folding 3 workers' {mix3 * 1e3:.1f} ms, 100 workers' {mix100 * 1e3:.0f} ms; "
        f"decoding 100 {decoding * 1e3:.0f} ms; a mixture {per_bucket:.0f} B per bucket "
        f"({len(mixed['weights']):,} buckets): at most {(16 << 20) / per_bucket:,.0f} buckets "
        "in 16 MiB"
    )


if __name__ == "__main__":
    main()
