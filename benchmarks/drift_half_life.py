"""The forgetting average on a drifting stream, against River's best linear model.

Not a row of ``python -m benchmarks`` (accuracy, not speed; about a minute):
``.venv/bin/python -m benchmarks.drift_half_life [MAG_CHANGE]``. River's drifting
``synth.Hyperplane`` (seed 42, 15 features, 3 drifting by ``MAG_CHANGE`` per example, default
0.001 and 0.01, 5% label noise), 40k examples, prequential accuracy and examples/s of each
learner, one pass, as a Markdown table.
"""

from __future__ import annotations

import sys
import time
from typing import Any

N_EXAMPLES = 40_000
HALF_LIVES = (100, 350, 700, 2000, 5000)


def _prequential(model: Any, rows: list, fused: bool) -> tuple[float, float]:
    right = 0
    started = time.perf_counter()
    for x, y in rows:
        if fused:
            right += model.predict_learn_one(x, y) == y
        else:
            right += model.predict_one(x) == y
            model.learn_one(x, y)
    return 100 * right / len(rows), len(rows) / (time.perf_counter() - started)


def table(mag_change: float) -> str:
    from river import linear_model, preprocessing
    from river.datasets import synth

    from stream_perceptron import PassiveAggressive, Perceptron, Preprocessed

    stream = synth.Hyperplane(
        seed=42, n_features=15, n_drift_features=3, mag_change=mag_change, noise_percentage=0.05
    )
    rows = list(stream.take(N_EXAMPLES))
    models: dict[str, tuple[Any, bool]] = {
        "River StandardScaler \\| LogisticRegression": (
            preprocessing.StandardScaler() | linear_model.LogisticRegression(),
            False,
        ),
        "River PAClassifier(C=0.01, mode=1)": (linear_model.PAClassifier(C=0.01, mode=1), False),
        "River Perceptron": (linear_model.Perceptron(), False),
        "ours Perceptron()": (Perceptron(), True),
        "ours Perceptron(averaged=True)": (Perceptron(averaged=True), True),
        'ours PassiveAggressive(C=0.01, variant="pa1")': (PassiveAggressive(C=0.01), True),
    }
    for n in HALF_LIVES:
        models[f"ours Perceptron(averaged=True, average_half_life={n})"] = (
            Perceptron(averaged=True, average_half_life=n),
            True,
        )
    models['ours scaled (scale="standard") averaged'] = (
        Preprocessed(Perceptron(averaged=True), scale="standard"),
        True,
    )
    for n in (350, 700, 2000):
        models[f"ours scaled averaged, average_half_life={n}"] = (
            Preprocessed(Perceptron(averaged=True, average_half_life=n), scale="standard"),
            True,
        )
    lines = [
        f"Hyperplane(seed=42, 15 features, 3 drifting, mag_change={mag_change}, 5% noise),"
        f" {N_EXAMPLES // 1000}k examples, prequential",
        "",
        "| learner | accuracy % | examples/s |",
        "| --- | --- | --- |",
    ]
    for name, (model, fused) in models.items():
        accuracy, rate = _prequential(model, rows, fused)
        lines.append(f"| {name} | {accuracy:.2f} | {rate:,.0f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    for mag in [float(a) for a in sys.argv[1:]] or [0.001, 0.01]:
        print(table(mag), end="\n\n", flush=True)
