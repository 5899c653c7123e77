"""Generated data, all from fixed seeds: arrays, dict rows, and CSV / JSON lines / VW text.

The binary stream is ``x ~ N(0, I_20)`` labelled by the sign of a hidden hyperplane through the
origin (separable, no margin, so the perceptron keeps making a few mistakes). Text files write
each value with 5 decimals; they are generated in chunks, so a file never sits in memory whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import numpy as np

from benchmarks.common import Context

__all__ = [
    "N_FEATURES",
    "SEED",
    "binary_arrays",
    "binary_chunks",
    "csv_block",
    "data_file",
    "dict_rows",
    "feed_repeated",
    "FORMATTERS",
]

SEED = 20_240_601
N_FEATURES = 20
NAMES = [f"x{j}" for j in range(N_FEATURES)]
CHUNK = 50_000


def _hidden(rng: np.random.Generator) -> np.ndarray:
    return rng.normal(size=N_FEATURES)


def binary_chunks(
    n: int, seed: int = SEED, dtype: type = np.float64
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``(X, y)`` chunks of the binary stream, ``y`` boolean; the same rows for any ``dtype``."""
    rng = np.random.default_rng(seed)
    w = _hidden(rng)
    made = 0
    while made < n:
        m = min(CHUNK, n - made)
        X = rng.normal(size=(m, N_FEATURES))
        yield X.astype(dtype, copy=False), X @ w > 0
        made += m


N_CLASSES = 10


def multiclass_chunks(n: int, seed: int = SEED) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``(X, y)`` chunks of a separable 10-class stream: ``y`` the argmax of 10 hidden linear
    scores of ``x ~ N(0, I_20)``, in 0..9."""
    rng = np.random.default_rng(seed + 1)
    V = rng.normal(size=(N_FEATURES, N_CLASSES))
    made = 0
    while made < n:
        m = min(CHUNK, n - made)
        X = rng.normal(size=(m, N_FEATURES))
        yield X, np.argmax(X @ V, axis=1)
        made += m


def binary_arrays(
    n: int, seed: int = SEED, dtype: type = np.float64
) -> tuple[np.ndarray, np.ndarray]:
    """The first ``n`` examples of the binary stream as one ``(X, y)`` pair of arrays."""
    chunks = list(binary_chunks(n, seed, dtype))
    return np.concatenate([c[0] for c in chunks]), np.concatenate([c[1] for c in chunks])


def dict_rows(X: np.ndarray) -> list[dict[str, float]]:
    """Rows as River-style dicts ``{"x0": ..., "x19": ...}`` of Python floats."""
    return [dict(zip(NAMES, row)) for row in X.tolist()]


# -- text formats ------------------------------------------------------------------------------
def _csv_header() -> bytes:
    return (",".join([*NAMES, "y"]) + "\n").encode()


def _csv_lines(X: np.ndarray, y: np.ndarray) -> bytes:
    template = ",".join(["%.5f"] * N_FEATURES) + ",%d\n"
    return "".join(template % (*row, label) for row, label in zip(X.tolist(), y.tolist())).encode()


def _jsonl_lines(X: np.ndarray, y: np.ndarray) -> bytes:
    template = "{" + ", ".join(f'"{name}": %.5f' for name in NAMES) + ', "y": %d}\n'
    return "".join(template % (*row, label) for row, label in zip(X.tolist(), y.tolist())).encode()


def _vw_multiclass_lines(X: np.ndarray, y: np.ndarray) -> bytes:
    template = "%d |f " + " ".join(f"{name}:%.5f" for name in NAMES) + "\n"
    rows = zip(X.tolist(), y.tolist())
    return "".join(template % (label + 1, *row) for row, label in rows).encode()


def _vw_lines(X: np.ndarray, y: np.ndarray) -> bytes:
    template = "%d |f " + " ".join(f"{name}:%.5f" for name in NAMES) + "\n"
    return "".join(
        template % (1 if label else -1, *row) for row, label in zip(X.tolist(), y.tolist())
    ).encode()


# format -> (header, lines of a chunk)
FORMATTERS: dict[str, tuple[bytes, Callable[[np.ndarray, np.ndarray], bytes]]] = {
    "csv": (_csv_header(), _csv_lines),
    "jsonl": (b"", _jsonl_lines),
    "vw": (b"", _vw_lines),
    "vw-multiclass": (b"", _vw_multiclass_lines),
}


def data_file(ctx: Context, fmt: str, n: int, multiclass: bool = False) -> Path:
    """The first ``n`` binary (or 10-class) examples as a ``fmt`` file in the run's scratch
    directory (``vw-multiclass``: VW's format, classes 1..10).

    Made once per run and shared by the rows that read it.
    """
    key = (fmt, n) if not multiclass else (fmt, n, "multiclass")
    if key not in ctx.files:
        header, lines = FORMATTERS[fmt]
        kind = "multiclass" if multiclass else "binary"
        path = ctx.workdir / f"{kind}-{n}.{fmt}"
        chunks = multiclass_chunks(n) if multiclass else binary_chunks(n)
        with open(path, "wb") as f:
            f.write(header)
            for X, y in chunks:
                f.write(lines(X, y))
        ctx.files[key] = path
    return ctx.files[key]


def csv_block(n_rows: int) -> tuple[bytes, bytes]:
    """The CSV header and the first ``n_rows`` lines, to be repeated into a pipe."""
    X, y = binary_arrays(n_rows)
    return _csv_header(), _csv_lines(X, y)


def feed_repeated(n_lines: int, block_rows: int) -> Callable[[IO[bytes]], None]:
    """A writer of ``n_lines`` CSV lines made of one small block repeated (small in memory)."""
    header, block = csv_block(block_rows)
    lines = block.splitlines(keepends=True)

    def write(out: IO[bytes]) -> None:
        out.write(header)
        left = n_lines
        while left >= block_rows:
            out.write(block)
            left -= block_rows
        if left:
            out.write(b"".join(lines[:left]))

    return write
