"""``python -m stream_perceptron.demo``: River's Phishing stream through the binary perceptron."""

from __future__ import annotations

import sys
import time

from river import datasets

from stream_perceptron import Perceptron


def main() -> int:
    model = Perceptron()
    start = time.perf_counter()
    right = 0
    for n, (x, y) in enumerate(datasets.Phishing(), start=1):
        right += model.predict_one(x) == y
        model.learn_one(x, y)
        if n % 250 == 0:
            print(
                f"{n:>6} examples  mistakes {n - right:>5}  accuracy {right / n:.4f}",
                file=sys.stderr,
            )
    elapsed = time.perf_counter() - start
    print(
        f"done: {n} examples, {n - right} mistakes, prequential accuracy {right / n:.4f}, "
        f"{elapsed:.3f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
