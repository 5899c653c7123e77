"""JSON libraries measured on the engine's JSON-lines shapes (issue #43).

``python -m benchmarks.json_libraries [--n 200000] [--repeats 3] [--seed 43]``

Before writing a JSON scanner by hand: how fast do the stdlib ``json``, ``orjson``, ``msgspec``
and ``simdjson`` (pysimdjson) go from the bytes of a block of JSON lines to what the learner
needs, one ``({name: float}, label)`` per record (strings become ``name=value`` -> 1.0,
booleans 1.0/0.0, integers floats, null skipped: :class:`JsonLinesParser`'s rules)?

Three seeded shapes of ``--n`` lines each: ``sparse`` (flat objects, 20 of 200 names
``f0..f199`` in random order, 4-decimal floats, ``"y": 0/1``), ``nested``
(``{"x": {the same 20}, "y": 0/1}``) and ``categorical`` (``colour``: 1 of 4 strings,
``city``: 1 of 50, ``a`` and ``b`` floats, ``y``). The lines are cut into blocks of 10,000
(one block's records live at a time); each candidate gets every block's bytes and returns the
block's records, splitting the lines itself where it parses line by line. Times are the
process's CPU seconds (``--clock wall``: elapsed), medians of ``--repeats`` rounds, the
candidates interleaved within each round; ``x (a)`` is candidate (a)'s time over the
candidate's. Before timing, every candidate that builds feature dicts is
checked against ``JsonLinesParser("y").parse(line)`` on the first 1,000 lines of each shape.

The Python loop that turns a decoded object into a feature dict is the same for every library
(:func:`_record`); it omits the project's ``isfinite`` check, since orjson, msgspec and
simdjson refuse ``NaN`` and ``Infinity`` themselves (the project parser's own row keeps it).
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import msgspec
import orjson
import simdjson

from stream_perceptron.formats.jsonl import JsonLinesParser

BLOCK_LINES = 10_000
SHAPES = ("sparse", "nested", "categorical")
COLOURS = ("red", "green", "blue", "yellow")
CITIES = tuple(f"city{i:02d}" for i in range(50))


# -- data ---------------------------------------------------------------------------------------


def lines_of(shape: str, n: int, seed: int) -> list[bytes]:
    """``n`` JSON lines of ``shape`` (no newline), the same for the same seed."""
    rng = random.Random(f"{shape}-{seed}")
    out = []
    for _ in range(n):
        y = int(rng.random() < 0.5)
        if shape == "categorical":
            colour, city = rng.choice(COLOURS), rng.choice(CITIES)
            a, b = rng.gauss(0, 1), rng.gauss(0, 1)
            line = (
                f'{{"colour": "{colour}", "city": "{city}", "a": {a:.4f}, "b": {b:.4f}, "y": {y}}}'
            )
        else:
            pairs = ", ".join(f'"f{j}": {rng.gauss(0, 1):.4f}' for j in rng.sample(range(200), 20))
            if shape == "nested":
                line = f'{{"x": {{{pairs}}}, "y": {y}}}'
            else:
                line = f'{{{pairs}, "y": {y}}}'
        out.append(line.encode())
    return out


def blocks_of(lines: list[bytes], size: int = BLOCK_LINES) -> list[bytes]:
    """The lines as blocks of ``size`` lines, each line ending with a newline."""
    return [b"\n".join(lines[i : i + size]) + b"\n" for i in range(0, len(lines), size)]


def as_array(block: bytes) -> bytes:
    """A block of JSON lines (no empty line) as one JSON array."""
    return b"[" + block.rstrip(b"\n").replace(b"\n", b",") + b"]"


# -- the Python side: one decoded object -> (features, label) -------------------------------------


def _features(obj: Any, label: str | None) -> dict[str, float]:
    x: dict[str, float] = {}
    for name, v in obj.items():
        if name == label or v is None:
            continue
        t = type(v)
        if t is float:
            x[name] = v
        elif t is str:
            x[f"{name}={v}"] = 1.0
        elif t is int or t is bool:
            x[name] = float(v)
        else:
            raise ValueError(f"feature {name!r} is a {t.__name__}")
    return x


def _record(obj: dict[str, Any]) -> tuple[dict[str, float], Any]:
    """A decoded line -> (features, label): nested ``{"x": {...}, "y": ...}`` or flat."""
    nested = obj.get("x")
    if type(nested) is dict and len(obj) <= 2:
        return _features(nested, None), obj.get("y")
    return _features(obj, "y"), obj.get("y")


def _record_proxy(obj: Any) -> tuple[dict[str, float], Any]:
    """:func:`_record` on simdjson's lazy proxies (values are read as the loop asks)."""
    nested = obj.get("x")
    if type(nested) is simdjson.Object and len(obj) <= 2:
        return _features(nested, None), obj.get("y")
    return _features(obj, "y"), obj.get("y")


# -- candidates: block bytes -> list of (features, label), or of parsed objects (parse only) -----

Candidate = Callable[[bytes], list]


def project_parser(block: bytes) -> list:
    parse = JsonLinesParser("y").parse
    return [parse(line) for line in block.split(b"\n")[:-1]]


def per_line(loads: Callable[[bytes], Any]) -> Candidate:
    def run(block: bytes) -> list:
        return [_record(loads(line)) for line in block.split(b"\n")[:-1]]

    return run


def per_line_parse_only(loads: Callable[[bytes], Any]) -> Candidate:
    def run(block: bytes) -> list:
        return [loads(line) for line in block.split(b"\n")[:-1]]

    return run


def array(loads: Callable[[bytes], Any]) -> Candidate:
    def run(block: bytes) -> list:
        return [_record(obj) for obj in loads(as_array(block))]

    return run


def array_parse_only(loads: Callable[[bytes], Any]) -> Candidate:
    def run(block: bytes) -> list:
        return loads(as_array(block))

    return run


def split_only(block: bytes) -> list:
    return block.split(b"\n")[:-1]


_msgspec_decoder = msgspec.json.Decoder()


def msgspec_lines(block: bytes) -> list:
    return [_record(obj) for obj in _msgspec_decoder.decode_lines(block)]


class _Nested(msgspec.Struct):
    x: dict[str, float]
    y: Any = None


_typed = {
    "sparse": msgspec.json.Decoder(dict[str, float]),
    "nested": msgspec.json.Decoder(_Nested),
    "categorical": msgspec.json.Decoder(dict[str, float | str]),
}


def msgspec_typed(shape: str) -> Candidate:
    """msgspec told the shape: floats come out as floats (ints converted), no loop for the
    numeric shapes; the label comes out as a float (``1.0 == 1``)."""
    decode_lines = _typed[shape].decode_lines
    if shape == "sparse":

        def run(block: bytes) -> list:
            out = []
            for x in decode_lines(block):
                y = x.pop("y", None)
                out.append((x, y))
            return out

    elif shape == "nested":

        def run(block: bytes) -> list:
            return [(r.x, r.y) for r in decode_lines(block)]

    else:

        def run(block: bytes) -> list:
            return [_record(obj) for obj in decode_lines(block)]

    return run


def simdjson_lazy(block: bytes) -> list:
    parse = simdjson.Parser().parse
    out = []
    for line in block.split(b"\n")[:-1]:
        doc = parse(line)
        out.append(_record_proxy(doc))
        del doc  # no proxy of the last document may live when the parser parses the next
    return out


def simdjson_array_lazy(block: bytes) -> list:
    parser = simdjson.Parser()
    doc = parser.parse(as_array(block))
    out = [_record_proxy(obj) for obj in doc]
    del doc
    return out


def simdjson_parse_proxy_only(block: bytes) -> list:
    parse = simdjson.Parser().parse
    for line in block.split(b"\n")[:-1]:
        parse(line)  # the proxy is dropped at once: nothing is converted
    return []


def candidates(shape: str) -> dict[str, tuple[Candidate, bool]]:
    """Name -> (block -> records, builds the feature dicts). (a) is the reference."""
    sj = simdjson.Parser()
    sj_parse = sj.parse
    dec = msgspec.json.Decoder().decode
    return {
        "(a) json.loads per line + loop": (per_line(json.loads), True),
        "(a0) JsonLinesParser.parse per line": (project_parser, True),
        "(b) orjson.loads per line + loop": (per_line(orjson.loads), True),
        "(c) msgspec.json.decode per line + loop": (per_line(msgspec.json.decode), True),
        "(c) msgspec Decoder().decode per line + loop": (per_line(dec), True),
        "(d) simdjson parse(recursive=True) per line + loop": (
            per_line(lambda b: sj_parse(b, True)),
            True,
        ),
        "(d) simdjson parse().as_dict() per line + loop": (
            per_line(lambda b: sj_parse(b).as_dict()),
            True,
        ),
        "(d) simdjson parse() lazy per line + loop": (simdjson_lazy, True),
        "(f) json.loads array + loop": (array(json.loads), True),
        "(f) orjson.loads array + loop": (array(orjson.loads), True),
        "(f) msgspec decode_lines(block) + loop": (msgspec_lines, True),
        "(f) msgspec typed decode_lines(block)": (msgspec_typed(shape), True),
        "(f) simdjson array recursive + loop": (array(lambda b: sj_parse(b, True)), True),
        "(f) simdjson array lazy + loop": (simdjson_array_lazy, True),
        "(e) split lines only": (split_only, False),
        "(e) json.loads per line, parse only": (per_line_parse_only(json.loads), False),
        "(e) orjson.loads per line, parse only": (per_line_parse_only(orjson.loads), False),
        "(e) msgspec decode per line, parse only": (per_line_parse_only(dec), False),
        "(e) simdjson parse(recursive) per line, parse only": (
            per_line_parse_only(lambda b: sj_parse(b, True)),
            False,
        ),
        "(e) simdjson parse() proxy only per line (nothing converted)": (
            simdjson_parse_proxy_only,
            False,
        ),
        "(e) orjson.loads array, parse only": (array_parse_only(orjson.loads), False),
        "(e) msgspec decode_lines(block), parse only": (_msgspec_decoder.decode_lines, False),
        "(e) simdjson array recursive, parse only": (
            array_parse_only(lambda b: sj_parse(b, True)),
            False,
        ),
    }


# -- measuring ----------------------------------------------------------------------------------


def check(shape: str, lines: list[bytes], runs: dict[str, tuple[Candidate, bool]]) -> None:
    """Every dict-building candidate gives the project parser's (x, y) on these lines."""
    parse = JsonLinesParser("y").parse
    want = [(ex.x, ex.y) for ex in map(parse, lines)]
    block = b"\n".join(lines) + b"\n"
    for name, (run, builds) in runs.items():
        if builds:
            got = run(block)
            assert got == want, f"{shape}: {name} differs from JsonLinesParser"
            assert all(type(v) is float for x, _ in got for v in x.values()), name


def timed(run: Candidate, blocks: list[bytes], clock: Callable[[], float]) -> float:
    t = clock()
    for block in blocks:
        run(block)  # the records are dropped block by block, as the engine drops them
    return clock() - t


def import_costs(repeats: int, clock: str = "process_time") -> dict[str, float]:
    """Seconds to import each library in a fresh interpreter (median of ``repeats``)."""
    modules = {
        "json (stdlib)": "import json",
        "orjson": "import orjson",
        "msgspec.json": "import msgspec.json",
        "simdjson": "import simdjson",
        "stream_perceptron.formats.jsonl": "import stream_perceptron.formats.jsonl",
    }
    out = {}
    for name, stmt in modules.items():
        code = f"import time; t = time.{clock}(); {stmt}; print(time.{clock}() - t)"
        out[name] = statistics.median(
            float(
                subprocess.run(
                    [sys.executable, "-c", code], capture_output=True, text=True, check=True
                ).stdout
            )
            for _ in range(repeats)
        )
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.json_libraries", description=__doc__)
    ap.add_argument("--n", type=int, default=200_000, help="lines per shape (default 200000)")
    ap.add_argument("--repeats", type=int, default=3, help="rounds; the median is reported")
    ap.add_argument("--seed", type=int, default=43)
    ap.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="cpu (default): this process's CPU time, which other jobs on a busy machine "
        "disturb less than wall time; wall: elapsed time",
    )
    args = ap.parse_args(argv)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter

    print(
        f"Python {sys.version.split()[0]}, orjson {orjson.__version__}, "
        f"msgspec {msgspec.__version__}; {args.n:,} lines per shape, blocks of {BLOCK_LINES:,} "
        f"lines, median of {args.repeats}, {args.clock} seconds",
        flush=True,
    )
    costs = import_costs(args.repeats, clock.__name__)
    print(
        "import cost (fresh interpreter): "
        + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in costs.items()),
        flush=True,
    )

    table: dict[str, dict[str, float]] = {}
    for shape in SHAPES:
        lines = lines_of(shape, args.n, args.seed)
        size = sum(map(len, lines)) + len(lines)
        runs = candidates(shape)
        check(shape, lines[:1000], runs)
        blocks = blocks_of(lines)
        del lines
        gc.collect()
        gc.freeze()  # the data set out of the collector's way
        try:
            times: dict[str, list[float]] = {name: [] for name in runs}
            for _ in range(args.repeats):
                for name, (run, _builds) in runs.items():
                    times[name].append(timed(run, blocks, clock))
        finally:
            gc.unfreeze()
        for name, ts in times.items():
            table.setdefault(name, {})[shape] = statistics.median(ts)
        mb = size / 1e6
        print(f"{shape}: {size / args.n:.0f} bytes a line, {mb:.1f} MB, checked", flush=True)
        del blocks
        gc.collect()

    ref = table["(a) json.loads per line + loop"]
    print()
    print("| candidate | " + " | ".join(f"{s} s | {s} rec/s | x (a)" for s in SHAPES) + " |")
    print("| --- |" + " ---: | ---: | ---: |" * len(SHAPES))
    for name, row in table.items():
        cells = []
        for s in SHAPES:
            t = row[s]
            cells += [f"{t:.3f}", f"{args.n / t / 1e3:,.0f}k", f"{ref[s] / t:.2f}"]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
