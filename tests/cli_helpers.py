"""Helpers for tests that drive `stream-perceptron` as a subprocess."""

from __future__ import annotations

import functools
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from stream_perceptron.learners import StreamClassifier

CLI = [sys.executable, "-m", "stream_perceptron.cli"]


def run_cli(
    *args: str, stdin: bytes | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        [*CLI, *args], input=stdin, capture_output=True, timeout=timeout, env=env, check=False
    )


def model_of(checkpoint: Path) -> StreamClassifier:
    return StreamClassifier.from_state(json.loads(checkpoint.read_text())["model"])


def binary_examples(n: int, d: int = 5, seed: int = 0) -> list[tuple[dict[str, float], int]]:
    return _examples(*binary_arrays(n, d, seed))


def binary_arrays(n: int, d: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The examples of :func:`binary_examples` as arrays: ``X`` (features f0, f1, ...), ``y``
    (0/1 ints); :func:`csv_of` writes them."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)
    X = rng.normal(size=(n, d))
    y = (X @ w + 0.2 * rng.normal(size=n) > 0).astype(int)
    return X, y


def switching_examples(n: int, switch_at: int | None, seed: int = 3) -> list[tuple[dict, int]]:
    """A noisy linear concept (5 features, 5 % label noise) whose labels are inverted from
    ``switch_at`` on: an abrupt switch for a model that learned the first concept."""
    return _examples(*switching_arrays(n, switch_at, seed))


def switching_arrays(
    n: int, switch_at: int | None, seed: int = 3
) -> tuple[np.ndarray, np.ndarray]:
    """The examples of :func:`switching_examples` as arrays (see :func:`binary_arrays`)."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=5)
    X = rng.normal(size=(n, 5))
    y = X @ w > 0
    y ^= rng.random(n) < 0.05
    if switch_at is not None:
        y[switch_at:] = ~y[switch_at:]
    return X, y.astype(int)


def _examples(X: np.ndarray, y: np.ndarray) -> list[tuple[dict[str, float], int]]:
    names = [f"f{j}" for j in range(X.shape[1])]
    return [(dict(zip(names, row)), label) for row, label in zip(X.tolist(), y.tolist())]


def csv_of(X: np.ndarray, y: np.ndarray, label: str = "y") -> bytes:
    """``to_csv`` of the examples of ``X`` and ``y`` (as :func:`binary_arrays` gives them), the
    same bytes without a dict a row."""
    lines = [",".join([*(f"f{j}" for j in range(X.shape[1])), label])]
    lines += [",".join(map(repr, row)) + f",{t}" for row, t in zip(X.tolist(), y.tolist())]
    return ("\n".join(lines) + "\n").encode()


# The kill -9 tests' files (200k-250k lines), made once a test process: making them was most
# of those tests' own CPU (1.7 s each), and the parameters of a test share one.


@functools.cache
def binary_csv(n: int, d: int = 5, seed: int = 0) -> bytes:
    """``to_csv(binary_examples(n, d, seed))``."""
    return csv_of(*binary_arrays(n, d, seed))


@functools.cache
def flipping_csv(n: int, every: int) -> bytes:
    """``to_csv`` of ``switching_examples(n, None)`` with the labels inverted in every other
    run of ``every`` examples (``every`` to ``2 * every``, ``3 * every`` to ...): a switch
    back and forth."""
    X, y = switching_arrays(n, None)
    flipped = (np.arange(n) // every) % 2 == 1
    return csv_of(X, np.where(flipped, 1 - y, y))


def sea_examples(concepts: list[int], n: int, seed: int = 42) -> list[tuple[dict, int]]:
    """River's SEA, ``n`` examples of each concept in turn (10 % label noise; concept ``i`` of
    the list seeded ``seed + i``), as benchmarks row 13 makes it: an abrupt switch between
    each two."""
    from river.datasets import synth

    out: list[tuple[dict, int]] = []
    for i, variant in enumerate(concepts):
        for k, (x, y) in enumerate(synth.SEA(variant=variant, seed=seed + i, noise=0.1)):
            if k == n:
                break
            out.append(({f"x{name}": float(v) for name, v in x.items()}, int(y)))
    return out


def to_csv(examples, label="y") -> bytes:
    names = list(examples[0][0])
    lines = [",".join([*names, label])]
    lines += [",".join([*(repr(x[k]) for k in names), str(y)]) for x, y in examples]
    return ("\n".join(lines) + "\n").encode()


def to_jsonl(examples, label="y") -> bytes:
    return "".join(json.dumps({**x, label: y}) + "\n" for x, y in examples).encode()


def to_libsvm(examples) -> bytes:
    out = []
    for x, y in examples:
        out.append(" ".join([str(y), *(f"{k[1:]}:{v!r}" for k, v in x.items())]))
    return ("\n".join(out) + "\n").encode()


def _progress(checkpoint: Path) -> int:
    """The next line a checkpoint of ``run --input FILE`` resumes from (0 before the first)."""
    try:
        positions = json.loads(checkpoint.read_bytes())["positions"]
    except (OSError, ValueError, KeyError):  # not written yet (the rename is atomic)
        return 0
    return int(positions[0]["next_offset"]) if positions else 0


def kill_9_and_resume(tmp_path: Path, data: Path, flags: list[str], kills: int = 3) -> None:
    """``run --input DATA FLAGS`` killed with SIGKILL ``kills`` times and resumed from its
    checkpoint (every 2,000 records) ends with the uninterrupted run's model, counters,
    positions and predictions file, to the bit.

    Each kill comes once the checkpoint shows a random number of lines (4,000 to a fifth of
    the input) past where that run started, plus up to 5 ms: a point in the stream, not a
    time. A random sleep after the first checkpoint (0.02-0.4 s) raced the run's end: the
    block path learns 250,000 lines in about 0.25 s, and every run of one test on a fresh
    machine here finished before its kill."""
    common = ["run", "--input", str(data), "--checkpoint-every", "2000", *flags]
    whole = tmp_path / "whole.json"
    proc = run_cli(
        *common, "--checkpoint", str(whole), "--predictions", str(tmp_path / "whole.jsonl")
    )
    assert proc.returncode == 0, proc.stderr.decode()
    lines = sum(1 for _ in data.open("rb"))

    ck, preds = tmp_path / "ck.json", tmp_path / "preds.jsonl"
    args = [*CLI, *common, "--checkpoint", str(ck), "--predictions", str(preds), "--resume"]
    rng = random.Random(5)
    killed = 0
    for _ in range(kills):
        target = _progress(ck) + rng.randint(4000, max(4001, lines // 5))
        victim = subprocess.Popen(args, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while victim.poll() is None and _progress(ck) < target:
            assert time.monotonic() < deadline, f"{ck} never reached line {target}"
            time.sleep(0.001)
        time.sleep(rng.uniform(0, 0.005))
        if victim.poll() is None:
            victim.send_signal(signal.SIGKILL)
            killed += 1
        victim.wait(timeout=60)
    assert killed == kills, f"{kills - killed} of {kills} runs ended before their kill"
    finish = subprocess.run(args, capture_output=True, timeout=120, check=False)
    assert finish.returncode == 0, finish.stderr.decode()

    assert model_of(ck).get_state() == model_of(whole).get_state()
    resumed, uninterrupted = json.loads(ck.read_text()), json.loads(whole.read_text())
    assert resumed["stats"] == uninterrupted["stats"]
    assert resumed["positions"] == uninterrupted["positions"]
    # Outputs are cut back to the checkpoint on resume: no duplicate and no missing line.
    assert preds.read_bytes() == (tmp_path / "whole.jsonl").read_bytes()
