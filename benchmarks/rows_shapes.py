"""Row 15: the record shapes of issue 43 on stdin, against Vowpal Wabbit.

``cat FILE | stream-perceptron run`` (the binary perceptron, row 4's flags) on sparse, nested
and categorical JSON lines and on libsvm, each against VW reading the same records in its own
text format, in the same alternated rounds; row 4a's dense CSV at the same size for reference.

The data, from fixed seeds:

- sparse: 20 of 200 names ``f0..f199`` per record, in random order, values ``N(0, 1)`` with 4
  decimals, labelled by the sign of a hidden linear function of all 200 (on the written values,
  so the stream is separable). The same records make the flat JSON (``{"f83": -2.8963, ...,
  "y": 1}``), the nested JSON (``{"x": {...}, "y": 1}``), libsvm (``1 84:-2.8963 ...``, 1-based
  indices sorted) and VW's ``1 | f83:-2.8963 ...`` (labels -1/1), which 15a, 15b and 15d share.
- categorical: ``{"colour": one of 4, "city": one of 50, "a": float, "b": float, "y": 0/1}``,
  labelled by the sign of a hidden weight per colour and per city plus a linear function of
  ``a`` and ``b``; VW: ``1 | colour=red city=c7 a:0.1200 b:-1.3000``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from benchmarks.common import Context, Measure, Result, count, interleaved, median
from benchmarks.data import CHUNK, SEED, data_file
from benchmarks.procs import VW_MISSING, Run, run_command, vw_command
from benchmarks.rows_stdin import _cli_run, _engine_notes, _spread, check_summary

__all__ = ["row_shapes", "shape_file"]

N_NAMES = 200
PER_RECORD = 20
COLOURS = ("red", "green", "blue", "yellow")
N_CITIES = 50
GOAL = ">= 3x Vowpal Wabbit (issue 43)"

Chunk = tuple[np.ndarray, ...]


# -- data --------------------------------------------------------------------------------------
def sparse_chunks(n: int, seed: int = SEED + 43) -> Iterator[Chunk]:
    """``(names, values, y)`` chunks: ``names`` the 20 indices (0..199) of each record in
    random order, ``values`` rounded to 4 decimals, ``y`` boolean."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=N_NAMES)
    made = 0
    while made < n:
        m = min(CHUNK, n - made)
        names = np.argsort(rng.random((m, N_NAMES)), axis=1)[:, :PER_RECORD]
        values = np.round(rng.normal(size=(m, PER_RECORD)), 4)
        yield names, values, (values * w[names]).sum(axis=1) > 0
        made += m


def categorical_chunks(n: int, seed: int = SEED + 44) -> Iterator[Chunk]:
    """``(colour, city, a, b, y)`` chunks: indices into ``COLOURS`` and ``c0..c49``, two
    values rounded to 4 decimals, ``y`` boolean."""
    rng = np.random.default_rng(seed)
    w_colour, w_city = rng.normal(size=len(COLOURS)), rng.normal(size=N_CITIES)
    w_ab = rng.normal(size=2)
    made = 0
    while made < n:
        m = min(CHUNK, n - made)
        colour = rng.integers(len(COLOURS), size=m)
        city = rng.integers(N_CITIES, size=m)
        a, b = np.round(rng.normal(size=(2, m)), 4)
        score = w_colour[colour] + w_city[city] + w_ab[0] * a + w_ab[1] * b
        yield colour, city, a, b, score > 0
        made += m


def _pairs(names: np.ndarray, values: np.ndarray) -> list[list[object]]:
    """Each record's name, value, name, value, ... as one list, for a ``%`` template."""
    both = np.empty((len(names), 2 * PER_RECORD), dtype=object)
    both[:, 0::2] = names.tolist()
    both[:, 1::2] = values.tolist()
    return both.tolist()


def _sparse_lines(
    head: str,
    pair: str,
    tail: str,
    *,
    sep: str = " ",
    signs: bool = False,
    one_based: bool = False,
) -> Callable[..., bytes]:
    """A chunk's lines: ``head``, the 20 ``pair % (name, value)`` joined by ``sep``, ``tail``;
    the label (0/1, or -1/1 with ``signs``) fills whichever of ``head`` and ``tail`` has a
    ``%d``. ``one_based``: names as indices 1..200 in increasing order (libsvm)."""
    template = head + sep.join([pair] * PER_RECORD) + tail
    label_first = "%" in head

    def lines(names: np.ndarray, values: np.ndarray, y: np.ndarray) -> bytes:
        if one_based:
            order = np.argsort(names, axis=1)
            names = np.take_along_axis(names, order, 1) + 1
            values = np.take_along_axis(values, order, 1)
        labels = (np.where(y, 1, -1) if signs else y.astype(int)).tolist()
        rows = zip(labels, _pairs(names, values))
        if label_first:
            return "".join(template % (label, *row) for label, row in rows).encode()
        return "".join(template % (*row, label) for label, row in rows).encode()

    return lines


def _categorical_json(
    colour: np.ndarray, city: np.ndarray, a: np.ndarray, b: np.ndarray, y: np.ndarray
) -> bytes:
    template = '{"colour": "%s", "city": "c%d", "a": %.4f, "b": %.4f, "y": %d}\n'
    colours = [COLOURS[c] for c in colour.tolist()]
    rows = zip(colours, city.tolist(), a.tolist(), b.tolist(), y.astype(int).tolist())
    return "".join(template % row for row in rows).encode()


def _categorical_vw(
    colour: np.ndarray, city: np.ndarray, a: np.ndarray, b: np.ndarray, y: np.ndarray
) -> bytes:
    template = "%d | colour=%s city=c%d a:%.4f b:%.4f\n"
    colours = [COLOURS[c] for c in colour.tolist()]
    rows = zip(np.where(y, 1, -1).tolist(), colours, city.tolist(), a.tolist(), b.tolist())
    return "".join(template % row for row in rows).encode()


# shape -> (its chunks, {format: lines of a chunk})
SHAPES: dict[str, tuple[Callable[[int], Iterator[Chunk]], dict[str, Callable[..., bytes]]]] = {
    "sparse": (
        sparse_chunks,
        {
            "jsonl": _sparse_lines("{", '"f%d": %.4f', ', "y": %d}\n', sep=", "),
            "nested.jsonl": _sparse_lines('{"x": {', '"f%d": %.4f', '}, "y": %d}\n', sep=", "),
            "libsvm": _sparse_lines("%d ", "%d:%.4f", "\n", one_based=True),
            "vw": _sparse_lines("%d | ", "f%d:%.4f", "\n", signs=True),
        },
    ),
    "categorical": (categorical_chunks, {"jsonl": _categorical_json, "vw": _categorical_vw}),
}


def shape_file(ctx: Context, shape: str, fmt: str, n: int) -> Path:
    """The first ``n`` records of ``shape`` as a ``fmt`` file in the run's scratch directory,
    made once per run (as ``data.data_file``)."""
    key = (fmt, n, shape)
    if key not in ctx.files:
        chunks, formats = SHAPES[shape]
        path = ctx.workdir / f"{shape}-{n}.{fmt}"
        with open(path, "wb") as f:
            for chunk in chunks(n):
                f.write(formats[fmt](*chunk))
        ctx.files[key] = path
    return ctx.files[key]


# -- the row -----------------------------------------------------------------------------------
#: row, what, our --format, our input, VW's input (a name of ``inputs`` below)
CASES = (
    ("15a", "sparse JSON lines, 20 of 200 names per record in random order", "jsonl",
     ("sparse", "jsonl"), "sparse"),
    ("15b", 'nested JSON lines, the records of 15a as {"x": {...}, "y": 0/1}', "jsonl",
     ("sparse", "nested.jsonl"), "sparse"),
    ("15c", "categorical JSON lines, colour (4 strings), city (50), 2 numbers", "jsonl",
     ("categorical", "jsonl"), "categorical"),
    ("15d", "libsvm, the records of 15a (1-based indices, sorted)", "libsvm",
     ("sparse", "libsvm"), "sparse"),
    ("15e", "dense CSV, 20 features (row 4a's stream, for reference)", "csv",
     ("dense", "csv"), "dense"),
)  # fmt: skip


def row_shapes(ctx: Context) -> list[Result]:
    n = ctx.sizes.shapes
    summary = ctx.workdir / "summary-shapes.json"

    def ours_input(shape: str, fmt: str) -> Path:
        return data_file(ctx, fmt, n) if shape == "dense" else shape_file(ctx, shape, fmt, n)

    runs: dict[str, Callable[[], Run]] = {
        row: _cli_run(fmt, ours_input(*source), summary) for row, _, fmt, source, _ in CASES
    }
    vw = vw_command()
    if vw is not None:
        inputs = {
            "sparse": shape_file(ctx, "sparse", "vw", n),
            "categorical": shape_file(ctx, "categorical", "vw", n),
            "dense": data_file(ctx, "vw", n),
        }
        for name, path in inputs.items():
            runs[f"vw-{name}"] = lambda path=path: run_command(vw, input_path=path)
    interleaved(1, runs)  # a round not timed, as row 4: the bytecode caches written, files read
    got = interleaved(ctx.repeats, runs)
    rates = {name: n / median([r.wall for r in done]) for name, done in got.items()}
    runner = "vw" if vw is None or "vowpalwabbit" not in " ".join(vw) else "python -m vowpalwabbit"
    results = []
    for row, what, fmt, _, vw_input in CASES:
        vw_rate = rates.get(f"vw-{vw_input}")
        if vw_rate is None:
            anchor = Measure("Vowpal Wabbit", missing=VW_MISSING)
        else:
            anchor = Measure(f"VW ({runner} --loss_function hinge, stdin)", vw_rate, "records/s")
        ratio = rates[row] / vw_rate if vw_rate else None
        notes = [n for n in (_engine_notes(got[row]),) if n] + check_summary(got[row][-1], n)
        if vw_rate is not None:
            notes.append(_spread(got[row], got[f"vw-{vw_input}"]))
        results.append(
            Result(
                row,
                f"record shapes on stdin: {what}, `cat file | stream-perceptron run --format"
                f" {fmt}`; {count(n)} records (wall time of the whole command)",
                Measure("ours", rates[row], "records/s"),
                anchor,
                ratio,
                ratio_text="x VW",
                goal=GOAL,
                met=None if ratio is None else ratio >= 3.0,
                notes=notes,
            )
        )
    return results
