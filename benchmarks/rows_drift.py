"""Row 13: abrupt drift (13a, 13b), detection (13d), false alarms (13e) and what the drift
detector costs (13c).

Two seeded streams with 3 abrupt switches (SEA: its 4 concepts, 10 % noise; Hyperplane:
4 hyperplanes of 10 features, 5 % noise), 50k examples, 12.5k per concept.

Ours: ``stream-perceptron run`` (CSV on stdin) with our drift settings, each alone (the default
detector, ADWIN on the model's own mistakes), with ``--drift-detector adwin --on-drift reset``
(and ``forget`` for the averaged ones), and the same with ``--drift-detector reference`` (ADWIN
on a frozen copy's mistakes); the summary gives the accuracy and the drifts seen (detection
delay = the drift's position minus the switch before it). River, in this process:
``StandardScaler | LogisticRegression``, alone and reset (a new pipeline) whenever River's
``drift.ADWIN`` fed each mistake detects a drift.

13d: the slowest detection of the 6 switches by :data:`DETECTION` with the reference detector.
13e: the drifts each detector raises on 100k examples of one concept (SEA, Hyperplane).

13c: the fastest run (row 4a's CSV on stdin, the block path) with ``--drift-detector none`` and
``adwin`` (the default) alternated, at least 5 times each: the engine's own records per second
(its summary, without the interpreter's start-up) and the wall time; beside it the monitor alone
in this process (1M mistakes in blocks of 10k) and River's ``drift.ADWIN`` fed the same chunk
rates.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

from benchmarks.common import Context, Measure, Result, count, interleaved, median
from benchmarks.data import data_file
from benchmarks.procs import cli_command, run_command
from benchmarks.rows_quality import _take
from benchmarks.rows_stdin import _cli_run

__all__ = ["row_drift", "DETECTION", "DRIFT_SETTINGS", "SWITCHES"]

SEGMENT = 12_500
SWITCHES = [SEGMENT, 2 * SEGMENT, 3 * SEGMENT]

#: Our settings for drifting streams (CLI flags), as in row 9.
DRIFT_SETTINGS: dict[str, list[str]] = {
    "PA-I C=0.01+scaled": ["--model", "pa", "--C", "0.01", "--scale", "standard"],
    "PA-I C=0.003+scaled": ["--model", "pa", "--C", "0.003", "--scale", "standard"],
    "averaged+scaled, half-life 500": ["--averaged", "--scale", "standard",
                                       "--average-half-life", "500"],
    "averaged+scaled": ["--averaged", "--scale", "standard"],
    "averaged+scaled, bias r2": ["--averaged", "--scale", "standard", "--bias", "r2"],
}  # fmt: skip
RESET = ["--drift-detector", "adwin", "--on-drift", "reset"]
FORGET = ["--drift-detector", "adwin", "--on-drift", "forget"]
REFERENCE = ["--drift-detector", "reference"]
#: The setting whose detections rows 13d and 13e hold to the goal (the copy of PA-I, the
#: most accurate single model of a concept, sees the most).
DETECTION = "PA-I C=0.003+scaled"


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


def _ours(ctx: Context, data: Any, flags: list[str]) -> dict[str, Any]:
    summary = ctx.workdir / "summary-drift.json"
    cmd = [*cli_command(), "run", "--format", "csv", "--label", "y", *flags,
           "--summary-json", str(summary)]  # fmt: skip
    run = run_command(cmd, input_path=data, summary_path=summary)
    return run.summary or json.loads(summary.read_text())


def _write_csv(path: Any, examples: list[tuple[dict, Any]]) -> None:
    names = list(examples[0][0])
    lines = [",".join([*map(str, names), "y"])]
    lines += [",".join([*(repr(float(x[k])) for k in names), str(int(y))]) for x, y in examples]
    path.write_text("\n".join(lines) + "\n")


def row_drift(ctx: Context) -> list[Result]:
    n = 4 * SEGMENT if ctx.sizes.quality >= 50_000 else 4 * (ctx.sizes.quality // 4)
    switches = [n // 4, n // 2, 3 * n // 4]
    results = []
    detections: dict[str, list[int | None]] = {}
    for letter, (name, examples) in zip("ab", _streams(n).items()):
        data = ctx.workdir / f"drift-{letter}.csv"
        _write_csv(data, examples)
        ours: dict[str, tuple[float, list[int]]] = {}
        for label, flags in DRIFT_SETTINGS.items():
            variants = [([], ""), (RESET, " + ADWIN reset"), (REFERENCE, " + reference"),
                        ([*REFERENCE, "--on-drift", "reset"], " + reference reset")]  # fmt: skip
            if "--averaged" in flags:
                variants += [(FORGET, " + ADWIN forget"),
                             ([*REFERENCE, "--on-drift", "forget"], " + reference forget")]
            for extra, tag in variants:
                s = _ours(ctx, data, [*flags, *extra])
                drift = s.get("drift") or {}
                ours[label + tag] = (100 * s["accuracy"], drift.get("positions", []))
        theirs = {"River S|LogReg": _river(examples, False),
                  "River S|LogReg + ADWIN reset": _river(examples, True)}  # fmt: skip
        best, (acc, _) = max(ours.items(), key=lambda kv: kv[1][0])
        rbest, (racc, _) = max(theirs.items(), key=lambda kv: kv[1][0])
        detected = {k: _delays(p, switches) for k, (_, p) in ours.items()
                    if k.endswith(("ADWIN reset", " + reference"))}  # fmt: skip
        detections[name] = detected[f"{DETECTION} + reference"]
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
                    "the detectors' delay after each switch (None: not seen before the next; "
                    "ADWIN: the model's own mistakes, reference: its frozen copy's): "
                    + "; ".join(f"{k.removesuffix(' + ADWIN reset')} {d}"
                                for k, d in detected.items()),  # fmt: skip
                ],
            )
        )
    return [*results, _drift_cost(ctx), _detection(detections), _false_alarms(ctx)]


def _detection(detections: dict[str, list[int | None]]) -> Result:
    delays = [d for ds in detections.values() for d in ds]
    worst = None if None in delays else max(d for d in delays if d is not None)
    return Result(
        "13d",
        f"drift detection: {DETECTION} with `--drift-detector reference`, the examples from "
        f"each of the {len(delays)} switches of 13a and 13b to its first drift",
        Measure("slowest", -1.0 if worst is None else float(worst), "examples"),
        None,
        goal="each abrupt switch detected within 1,000 examples",
        met=worst is not None and worst <= 1_000,
        notes=[f"{name}: {d}" for name, d in detections.items()]
        + (["slowest -1: a switch not seen before the next"] if worst is None else []),
    )


def _false_alarms(ctx: Context) -> Result:
    """Row 13e: drifts raised in 100k examples of one concept, per stream and detector."""
    from river.datasets import synth

    n = min(100_000, 20 * ctx.sizes.quality)  # 10k at `--quick 100`
    streams = {
        "SEA concept 0": _take(synth.SEA(variant=0, seed=7, noise=0.1), n),
        "Hyperplane": _take(synth.Hyperplane(seed=7, n_features=10, noise_percentage=0.05), n),
    }
    alarms: dict[str, int] = {}
    for name, examples in streams.items():
        data = ctx.workdir / "drift-stationary.csv"
        _write_csv(data, examples)
        for detector in ("adwin", "reference"):
            s = _ours(ctx, data, [*DRIFT_SETTINGS[DETECTION], "--drift-detector", detector])
            alarms[f"{name}, {detector}"] = int(s["drift"]["drifts"])
    worst = max(alarms.values())
    return Result(
        "13e",
        f"false alarms: drifts raised in {count(n)} examples of one concept ({DETECTION}), "
        "the most of any stream and detector",
        Measure("most", float(worst), "drifts"),
        None,
        goal="<= 1 false alarm per 100k stationary examples",
        met=worst <= 1,
        notes=["; ".join(f"{k} {v}" for k, v in alarms.items())],
    )


def _drift_cost(ctx: Context) -> Result:
    from river import drift

    from stream_perceptron.drift import CHUNK, CLOCK, DriftMonitor

    n = ctx.sizes.stdin
    path = data_file(ctx, "csv", n)
    summary = ctx.workdir / "summary-drift-cost.json"
    got = interleaved(ctx.rounds(), {
        detector: _cli_run("csv", path, summary, "--drift-detector", detector)
        for detector in ("none", "adwin")
    })  # fmt: skip
    rate = {k: median([r.summary["records_per_second"] for r in runs if r.summary])
            for k, runs in got.items()}  # fmt: skip
    wall = {k: median([r.wall for r in runs]) for k, runs in got.items()}
    spread = {k: sorted(round(r.summary["records_per_second"]) for r in runs if r.summary)
              for k, runs in got.items()}  # fmt: skip
    cost = rate["none"] / rate["adwin"] - 1
    rng = random.Random(1)
    mistakes = [rng.random() < 0.1 for _ in range(1_000_000)]
    alone = []
    for _ in range(3):
        monitor = DriftMonitor()
        start = time.perf_counter()
        for i in range(0, len(mistakes), 10_000):
            monitor.observe(mistakes[i : i + 10_000])
        alone.append((time.perf_counter() - start) / len(mistakes) * 1e6)
    river = drift.ADWIN(delta=0.002, clock=CLOCK)
    rates = [sum(mistakes[i : i + CHUNK]) / CHUNK for i in range(0, len(mistakes), CHUNK)]
    start = time.perf_counter()
    for value in rates:
        river.update(value)
    river_us = (time.perf_counter() - start) / len(mistakes) * 1e6
    per_example = 1e6 / rate["none"]
    return Result(
        "13c",
        f"drift detector's cost on the fastest run (CSV on stdin, {count(n)} lines, block path):"
        " engine records/s with `--drift-detector adwin` (default) vs `none`",
        Measure("adwin", rate["adwin"], "records/s"),
        Measure("none", rate["none"], "records/s"),
        100 * cost,
        ratio_text=" % slower",
        goal="<= 2 % slower (on by default)",
        met=cost <= 0.02,
        notes=[
            f"engine records/s, every run: none {spread['none']}, adwin {spread['adwin']}",
            f"wall time of the whole command (median): none {wall['none']:.3f} s, adwin "
            f"{wall['adwin']:.3f} s ({100 * (wall['adwin'] / wall['none'] - 1):+.1f} %)",
            f"the monitor alone: {median(alone):.4f} us an example (1M mistakes in blocks of "
            f"10k; {100 * median(alone) / per_example:.1f} % of the engine's "
            f"{per_example:.3f} us an example); River's drift.ADWIN fed the same chunk rates "
            f"(chunks of {CHUNK}, clock {CLOCK}): {river_us:.4f} us an example",
        ],
    )
