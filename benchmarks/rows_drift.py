"""Row 13: abrupt drift. Two seeded streams with 3 abrupt switches (SEA: its 4 concepts, 10 %
noise; Hyperplane: 4 hyperplanes of 10 features, 5 % noise), 50k examples, 12.5k per concept.

Ours: ``stream-perceptron run`` (CSV on stdin) with our drift settings, each alone and with
``--drift-detector adwin --on-drift reset``; the summary gives the accuracy and the drifts seen
(detection delay = the drift's position minus the switch before it). River, in this process:
``StandardScaler | LogisticRegression``, alone and reset (a new pipeline) whenever River's
``drift.ADWIN`` fed each mistake detects a drift.
"""

from __future__ import annotations

import json
from typing import Any

from benchmarks.common import Context, Measure, Result, count
from benchmarks.procs import cli_command, run_command
from benchmarks.rows_quality import _take

__all__ = ["row_drift", "DRIFT_SETTINGS", "SWITCHES"]

SEGMENT = 12_500
SWITCHES = [SEGMENT, 2 * SEGMENT, 3 * SEGMENT]

#: Our settings for drifting streams (CLI flags), as in row 9.
DRIFT_SETTINGS: dict[str, list[str]] = {
    "PA-I C=0.01+scaled": ["--model", "pa", "--C", "0.01", "--scale", "standard"],
    "PA-I C=0.003+scaled": ["--model", "pa", "--C", "0.003", "--scale", "standard"],
    "averaged+scaled, half-life 500": ["--averaged", "--scale", "standard",
                                       "--average-half-life", "500"],
    "averaged+scaled": ["--averaged", "--scale", "standard"],
}  # fmt: skip
RESET = ["--drift-detector", "adwin", "--on-drift", "reset"]
FORGET = ["--drift-detector", "adwin", "--on-drift", "forget"]


def _streams(n: int) -> dict[str, list[tuple[dict, Any]]]:
    from river.datasets import synth

    seg = n // 4
    sea: list = []
    hyperplane: list = []
    for i in range(4):
        sea += _take(synth.SEA(variant=i, seed=42 + i, noise=0.1), seg)
        hyperplane += _take(
            synth.Hyperplane(seed=42 + i, n_features=10, noise_percentage=0.05), seg
        )
    return {"SEA, 4 concepts, 10% noise": sea, "Hyperplane, 4 concepts, 5% noise": hyperplane}


def _river(examples: list, reset: bool) -> tuple[float, int]:
    from river import drift, linear_model, preprocessing

    def make() -> Any:
        return preprocessing.StandardScaler() | linear_model.LogisticRegression()

    model, detector = make(), drift.ADWIN()
    right = resets = 0
    for x, y in examples:
        p = model.predict_one(x)
        model.learn_one(x, y)
        right += p == y
        if reset:
            detector.update(p != y)
            if detector.drift_detected:
                model, resets = make(), resets + 1
    return 100 * right / len(examples), resets


def _delays(positions: list[int], switches: list[int]) -> list[int | None]:
    """Per switch, the examples from it to the first drift seen after it (before the next)."""
    out: list[int | None] = []
    for i, s in enumerate(switches):
        end = switches[i + 1] if i + 1 < len(switches) else None
        seen = [p for p in positions if p > s and (end is None or p <= end)]
        out.append(seen[0] - s if seen else None)
    return out


def row_drift(ctx: Context) -> list[Result]:
    n = 4 * SEGMENT if ctx.sizes.quality >= 50_000 else 4 * (ctx.sizes.quality // 4)
    switches = [n // 4, n // 2, 3 * n // 4]
    results = []
    for letter, (name, examples) in zip("ab", _streams(n).items()):
        data = ctx.workdir / f"drift-{letter}.csv"
        names = list(examples[0][0])
        lines = [",".join([*map(str, names), "y"])]
        lines += [",".join([*(repr(float(x[k])) for k in names), str(int(y))]) for x, y in examples]
        data.write_text("\n".join(lines) + "\n")
        summary = ctx.workdir / "summary-drift.json"
        ours: dict[str, tuple[float, list[int]]] = {}
        for label, flags in DRIFT_SETTINGS.items():
            variants = [([], ""), (RESET, " + ADWIN reset")]
            if "--averaged" in flags:
                variants.append((FORGET, " + ADWIN forget"))
            for extra, tag in variants:
                cmd = [*cli_command(), "run", "--format", "csv", "--label", "y", *flags,
                       *extra, "--summary-json", str(summary)]  # fmt: skip
                run = run_command(cmd, input_path=data, summary_path=summary)
                s = run.summary or json.loads(summary.read_text())
                drift = s.get("drift") or {}
                ours[label + tag] = (100 * s["accuracy"], drift.get("positions", []))
        theirs = {"River S|LogReg": _river(examples, False),
                  "River S|LogReg + ADWIN reset": _river(examples, True)}  # fmt: skip
        best, (acc, _) = max(ours.items(), key=lambda kv: kv[1][0])
        rbest, (racc, _) = max(theirs.items(), key=lambda kv: kv[1][0])
        detected = {k: _delays(p, switches) for k, (_, p) in ours.items() if k.endswith("reset")}
        results.append(
            Result(
                f"13{letter}",
                f"abrupt drift: {name}, {count(n)} (switches at {', '.join(map(str, switches))}):"
                f" our best ({best}) vs River's best ({rbest})",
                Measure("ours", acc, "%"),
                Measure(rbest, racc, "%"),
                acc - racc,
                ratio_text=" points",
                goal="ours >= River S|LogReg and its ADWIN-reset version",
                met=acc >= racc,
                notes=[
                    "ours: " + "; ".join(f"{k} {a:.2f} %" for k, (a, _) in ours.items()),
                    "River: " + "; ".join(f"{k} {a:.2f} % ({r} resets)"
                                          for k, (a, r) in theirs.items()),  # fmt: skip
                    "our detector's delay after each switch (None: not seen before the next): "
                    + "; ".join(f"{k.removesuffix(' + ADWIN reset')} {d}"
                                for k, d in detected.items()),  # fmt: skip
                ],
            )
        )
    return results
