"""Differential fuzz of the engine's two paths: random streams (CSV and JSON lines, unlabelled
rows, refused labels, bad, huge and missing values, empty lines, wrong column counts) under
random block sizes and every learner configuration that has a block path; the block path and
the record path (``Engine(dense=False)``) must give the same bytes: predictions, dead letters,
counters, window, offsets and model state, or the same error under ``on_error="fail"``.

The normal suite runs a fixed list of seeds (:data:`SHORT_RUN`, about 22 s of CPU; ``-s``
prints the count); the long run takes ``STREAM_PERCEPTRON_FUZZ_CONFIGS`` seeds from
``STREAM_PERCEPTRON_FUZZ_START`` (default 0), e.g. ``STREAM_PERCEPTRON_FUZZ_CONFIGS=10000 make
soak TEST=tests/engine/test_differential_fuzz.py::test_block_path_equals_record_path_long_run
N=1`` (10,000: about 2 minutes of CPU). A failure names its seed; replay it with
``STREAM_PERCEPTRON_FUZZ_CONFIGS=1 STREAM_PERCEPTRON_FUZZ_START=<seed>``.
"""

from __future__ import annotations

import io
import json
import os
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from connectors import LineSource, MemorySink, MemorySource, MessageBlock, Position, Record, Source
from stream_perceptron import native
from stream_perceptron.checkpoint import CheckpointCoordinator
from stream_perceptron.drift import DriftMonitor
from stream_perceptron.engine import Engine, Outputs
from stream_perceptron.engine.drift_reference import ReferenceWatch, reference_monitor
from stream_perceptron.engine.outcomes import refusal
from stream_perceptron.errors import BadRecordError, ValueTooLargeError
from stream_perceptron.formats import make_parser
from stream_perceptron.learners import (
    MulticlassPassiveAggressive,
    MulticlassPerceptron,
    PassiveAggressive,
    Perceptron,
    Preprocessed,
    StreamClassifier,
)
from stream_perceptron.stats import RunStats

SHORT_RUN = 2000  # seeds 0..1999: about 22 s of CPU on this machine
CONFIGS = int(os.environ.get("STREAM_PERCEPTRON_FUZZ_CONFIGS", "0") or 0)
START = int(os.environ.get("STREAM_PERCEPTRON_FUZZ_START", "0") or 0)

pytestmark = pytest.mark.skipif(native.dense is None, reason="the block path needs the C tier")

# -- configurations --------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """One learner configuration, one stream and how it is cut into blocks."""

    seed: int
    model: str  # binary, multiclass, pa, pa-multiclass
    params: dict[str, Any]
    scale: str | None
    hash_bits: int | None
    rff: int | None
    drift: str | None  # adwin, reference
    fmt: str  # csv, jsonl
    source: str  # memory, lines, messages, partitions
    cut: int  # records per batch, bytes per read, or messages per block
    on_error: str
    keep_recent: int
    resume_at: int  # records before it skipped, as a resumed run skips them (0: none)

    def learner(self) -> StreamClassifier:
        learner: StreamClassifier
        if self.model == "binary":
            learner = Perceptron(**self.params)
        elif self.model == "multiclass":
            learner = MulticlassPerceptron(**self.params)
        elif self.model == "pa":
            learner = PassiveAggressive(**self.params)
        else:
            learner = MulticlassPassiveAggressive(**self.params)
        if self.scale or self.hash_bits is not None or self.rff is not None:
            rff = {} if self.rff is None else {"rff_components": self.rff, "rff_gamma": 0.5}
            learner = Preprocessed(learner, scale=self.scale, hash_bits=self.hash_bits, **rff)
        return learner


def make_config(seed: int) -> Config:
    rng = random.Random(seed)
    model = rng.choice(["binary", "binary", "multiclass", "pa", "pa-multiclass"])
    params: dict[str, Any] = {"bias": rng.choice(["learned", "r2", "none"])}
    if model in ("binary", "multiclass"):
        params["lr"] = rng.choice([1.0, 1.0, 0.5, 0.1])
        params["averaged"] = rng.random() < 0.5
        if params["averaged"] and rng.random() < 0.3:
            params["average_half_life"] = rng.choice([5.0, 50.0])
    else:
        params["variant"] = rng.choice(["pa", "pa1", "pa2"])
        params["C"] = rng.choice([1.0, 0.05])
        if params["bias"] == "r2":
            params["bias"] = "learned"
    return Config(
        seed=seed,
        model=model,
        params=params,
        scale="standard" if rng.random() < 0.4 else None,
        hash_bits=rng.choice([1, 2, 4]) if rng.random() < 0.25 else None,
        rff=rng.choice([2, 5]) if rng.random() < 0.2 else None,
        drift=rng.choice([None, None, "adwin", "reference"]),
        fmt=rng.choice(["csv", "jsonl"]),
        source=rng.choice(["memory", "lines", "messages", "partitions"]),
        cut=rng.choice([1, 2, 3, 5, 8, 13, 40, 1000]),
        on_error="fail" if rng.random() < 0.1 else "skip",
        keep_recent=rng.choice([0, 3, 50]),
        resume_at=rng.choice([1, 4, 17]) if rng.random() < 0.1 else 0,
    )


# -- streams ---------------------------------------------------------------------------------

_BINARY_LABELS = [["0", "1"], ["-1", "1"], ["false", "true"], ["-1", "+1"], ["0", "1.0"]]
_MULTI_LABELS = [["a", "b", "c"], ["0", "1", "2"], ["red", "1", "true"], ["x", "y"]]
_ODD_LABELS = ["2", "cat", "0", "-1", "true", "false", "1", "TRUE", "1e0", "7.5"]
_HUGE = ["1e300", "-1e300", "1e200", "1e160", "3e154", "1e400", "9" * 320]
_BAD = ["oops", "nan", "inf", "", " ", "1e", "--1", "0x10", '"1.5"', " 2 ", "1_0", "true"]


def _value(rng: random.Random, faults: float) -> str:
    roll = rng.random()
    if roll < faults / 3:
        return rng.choice(_HUGE)
    if roll < faults:
        return rng.choice(_BAD)
    if roll < 0.6:
        return repr(round(rng.gauss(0, 1), rng.choice([1, 3, 17])))
    if roll < 0.8:
        return str(rng.randint(-3, 3))
    return repr(rng.gauss(0, 1) * rng.choice([1e-3, 1.0, 1e3]))


def _label(rng: random.Random, classes: list[str], unlabelled: float, odd: float) -> str:
    roll = rng.random()
    if roll < unlabelled:
        return ""
    if roll < unlabelled + odd:
        return rng.choice(_ODD_LABELS)
    return rng.choice(classes)


def _json_value(text: str, rng: random.Random) -> str:
    if text in ("", " "):
        return rng.choice(["null", '""', "[]"])
    if text in ("oops", "nan", "inf", "1e", "--1", "0x10"):
        return json.dumps(text) if rng.random() < 0.5 else rng.choice(["NaN", "true", "{}"])
    return text


def make_lines(config: Config) -> list[bytes]:
    """The stream of ``config``: a header for CSV, then rows with faults at rates of the seed."""
    rng = random.Random(config.seed * 7919 + 1)
    width = rng.randint(1, 5)
    names = [f"f{i}" for i in range(width)]
    multi = config.model in ("multiclass", "pa-multiclass")
    classes = rng.choice(_MULTI_LABELS if multi else _BINARY_LABELS)
    n = rng.choice([5, 20, 60, 150, 300, 1000])
    faults = rng.choice([0.0, 0.0, 0.01, 0.05, 0.2])
    unlabelled = rng.choice([0.0, 0.05, 0.3])
    odd = rng.choice([0.0, 0.0, 0.02, 0.1])
    # a drift halfway: the label flips, so the detectors have something to see
    flip = rng.random() < 0.3
    # the first rows unlabelled or all of one class: the encoding settles late, in a block
    late = rng.choice([0, 0, 3, 30])
    only = rng.choice(classes[-1:] + ["1", ""])
    lines: list[bytes] = []
    if config.fmt == "csv":
        lines.append(",".join([*names, "y"]).encode())
    for i in range(n):
        values = [_value(rng, faults) for _ in range(width)]
        label = _label(rng, classes, unlabelled, odd) if i >= late else only
        if i >= late and not multi and label in classes and not odd and rng.random() < 0.8:
            # mostly learnable: the label follows the first value's sign
            try:
                positive = float(values[0]) > 0
            except ValueError:
                positive = False
            label = classes[int(positive != (flip and i > n // 2))]
        roll = rng.random()
        if roll < faults / 4:
            lines.append(rng.choice([b"", b" ", b"\xff\xfe", b"#", b"{"]))
            continue
        if config.fmt == "csv":
            cells = [*values, label]
            if roll < faults / 2:  # a wrong column count
                cells = cells[:-1] if rng.random() < 0.5 else [*cells, "1"]
            lines.append(",".join(cells).encode())
        else:
            pairs = [(k, _json_value(v, rng)) for k, v in zip(names, values)]
            nested = config.seed % 7 == 0  # the {"x": {...}, "y": label} form
            if roll < faults / 2:  # a key missing or one more
                pairs = pairs[:-1] if rng.random() < 0.5 else [*pairs, ("extra", "1")]
            if label:
                y = label if label in ("true", "false") else _json_label(label)
                pairs.append(("y", y))
            elif rng.random() < 0.5:
                pairs.append(("y", "null"))
            if rng.random() < 0.05:
                rng.shuffle(pairs)
            if nested:
                y = [v for k, v in pairs if k == "y"]
                x = ", ".join(f'"{k}": {v}' for k, v in pairs if k != "y")
                pairs = [("x", "{" + x + "}"), *(("y", v) for v in y)]
            lines.append(("{" + ", ".join(f'"{k}": {v}' for k, v in pairs) + "}").encode())
    return lines


def _json_label(label: str) -> str:
    try:
        return json.dumps(int(label))
    except ValueError:
        pass
    try:
        float(label)
        return label  # a JSON number as written (1e0, 7.5)
    except ValueError:
        return json.dumps(label)


# -- sources ---------------------------------------------------------------------------------


class _MessageSource:
    """One Kafka partition's messages, one record each, as message blocks of ``cut``."""

    def __init__(self, lines: list[bytes], cut: int) -> None:
        self._lines = lines
        self._cut = cut

    def close(self) -> None:
        pass

    def __enter__(self) -> _MessageSource:
        return self

    def __exit__(self, *exc_info: object) -> None:
        pass

    def batches(self) -> Iterator[list[Record]]:
        for block in self.message_blocks():
            yield block.records()

    def message_blocks(self) -> Iterator[MessageBlock]:
        for lo in range(0, len(self._lines), self._cut):
            values = self._lines[lo : lo + self._cut]
            offsets = list(range(lo, lo + len(values)))
            keys: list[bytes | None] = [str(o % 3).encode() if o % 2 else None for o in offsets]
            yield MessageBlock("t", 0, values, offsets, keys)


class _PartitionedSource:
    """Batches as a Kafka source of records makes them: records of three partitions, some
    messages of several lines (sharing its offset and key), batches cut at random."""

    def __init__(self, lines: list[bytes], cut: int, seed: int) -> None:
        rng = random.Random(seed)
        records, offsets = [], [0, 0, 0]
        i = 0
        while i < len(lines):
            partition = 0 if i == 0 else rng.choice([0, 1, 2])  # a CSV header first
            size = 1 if i == 0 else rng.choice([1, 1, 1, 2, 3])
            offset = offsets[partition]
            offsets[partition] += 1
            for line in lines[i : i + size]:
                records.append(Record(line, Position("t", offset, partition), key=b"k"))
            i += size
        self._batches = [records[lo : lo + cut] for lo in range(0, len(records), cut)]

    def batches(self) -> Iterator[list[Record]]:
        yield from self._batches

    def close(self) -> None:
        pass

    def __enter__(self) -> _PartitionedSource:
        return self

    def __exit__(self, *exc_info: object) -> None:
        pass


def _source(kind: str, lines: list[bytes], cut: int, seed: int = 0) -> Source:
    if kind == "memory":
        return MemorySource(lines, batch_size=cut)
    if kind == "messages":
        return _MessageSource(lines, cut)
    if kind == "partitions":
        return _PartitionedSource(lines, cut, seed)
    end = b"\r\n" if seed % 5 == 0 else b"\n"
    data = b"".join(line + end for line in lines)
    return LineSource(io.BytesIO(data), chunk_size=max(16, cut * 11), max_line_bytes=160)


# -- one run, both paths ---------------------------------------------------------------------


def _window(engine: Engine) -> list[tuple[Any, Any]]:
    return [
        (x if isinstance(x, dict) else dict(zip(x[0], x[1].tolist())), y)
        for x, y in engine.recent_window()
    ]


def run_path(config: Config, lines: list[bytes], dense: bool) -> dict[str, Any]:
    """Everything a run of one path leaves, as text to compare byte for byte."""
    learner = config.learner()
    stats = RunStats(rolling_window=7)
    if config.drift == "adwin":
        stats.drift = DriftMonitor(chunk=2, clock=4, recent=2)
    elif config.drift == "reference":
        stats.drift = reference_monitor()
        stats.drift_reference = ReferenceWatch(learner, stats.drift, after=10)
    predictions, dead = MemorySink(), MemorySink()
    skip = config.resume_at
    keys = [("memory", None), ("stdin", None)] + [("t", p) for p in range(3)]
    engine = Engine(
        learner, make_parser(config.fmt), Outputs(predictions, dead), on_error=config.on_error,
        stats=stats, keep_recent=config.keep_recent, dense=dense,
        coordinator=CheckpointCoordinator(positions=dict.fromkeys(keys, skip) if skip else None),
    )  # fmt: skip
    error = None
    try:
        engine.run(_source(config.source, lines, config.cut, config.seed))
    except BadRecordError as e:
        error = str(e)
    return {
        "error": error,
        "predictions": predictions.lines,
        "dead_letters": dead.lines,
        "counters": repr(engine.stats.get_state()),
        "summary": repr(
            {
                k: v
                for k, v in stats.summary().items()
                if "second" not in k and k != "peak_rss_bytes"
            }
        ),
        "model": repr(engine.learner.get_state()),
        "window": repr(_window(engine)),
        "offsets": repr(engine.next_offsets),
        "block_path": engine._blocks is not None,
    }


def differences(seed: int) -> list[str]:
    """What the two paths of seed ``seed``'s configuration disagree on (empty: nothing)."""
    config = make_config(seed)
    lines = make_lines(config)
    block = run_path(config, lines, dense=True)
    record = run_path(config, lines, dense=False)
    assert block.pop("block_path") and not record.pop("block_path"), config
    found = []
    for key, got in block.items():
        want = record[key]
        if got != want:
            found.append(f"seed {seed} {config}: {key} differs:\n  block  {_first(got, want)}"
                         f"\n  record {_first(want, got)}")  # fmt: skip
    return found


def _first(a: Any, b: Any) -> str:
    """The first item (or the text) where ``a`` differs from ``b``, shortened."""
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return f"[{i}] {x[:300]!r}"
        return f"{len(a)} lines"
    return repr(a)[:600]


def _check(seeds: range) -> None:
    started = time.process_time()
    found: list[str] = []
    for seed in seeds:
        found += differences(seed)
    seconds = time.process_time() - started
    step = f" step {seeds.step}" if seeds.step != 1 else ""
    print(f"differential fuzz: {len(seeds)} configurations (seeds {seeds.start}..{seeds.stop - 1}"
          f"{step}) in {seconds:.1f} s of CPU, {len(found)} differences")  # fmt: skip
    assert not found, "\n".join(found[:20])


# -- what the fuzz found first (issue 42) -----------------------------------------------------


def _both_paths(make: Any, lines: list[bytes], source: str) -> list[dict[str, Any]]:
    runs = []
    for dense in (True, False):
        predictions, dead = MemorySink(), MemorySink()
        engine = Engine(make(), make_parser("csv"), Outputs(predictions, dead), dense=dense)
        engine.run(_source(source, lines, cut=100))
        assert (engine._blocks is not None) == dense
        runs.append({
            "predictions": predictions.lines, "dead_letters": dead.lines,
            "counters": engine.stats.get_state(), "model": repr(engine.learner.get_state()),
        })  # fmt: skip
    return runs


_BINARY = {
    "perceptron": lambda: Perceptron(),
    "averaged": lambda: Perceptron(averaged=True, bias="r2"),
    "pa": lambda: PassiveAggressive(),
    "scaled": lambda: Preprocessed(Perceptron(), scale="standard"),
}


@pytest.mark.parametrize("first", [b"1,", b"1,2", b"1,cat"])  # unlabelled, refused labels
@pytest.mark.parametrize("source", ["memory", "lines", "messages"])
@pytest.mark.parametrize("learner", sorted(_BINARY))
def test_predictions_decode_with_their_rows_encoding(learner, source, first):
    # rows not learned before the encoding settles within a block: the block path wrote the
    # whole block's predictions as false/true, since (0, 1) == (False, True) as pairs
    lines = [b"a,y", first, b"2,1", b"3,0", b"-1,", b"4,1"]
    block, record = _both_paths(_BINARY[learner], lines, source)
    assert block == record
    shown = [json.loads(line)["prediction"] for line in block["predictions"]]
    kinds = [type(p) for p in shown]
    want = [bool, int, int, int, int] if first == b"1," else [int] * 4
    assert kinds == want, shown


_TWO_FAULTS = {  # a value the model cannot take and a label outside its encoding
    "scaled": (lambda: Preprocessed(Perceptron(), scale="standard"), b"1e300,1,2"),
    "scaled-pa": (lambda: Preprocessed(PassiveAggressive(), scale="standard"), b"1e300,1,7"),
    "fourier": (lambda: Preprocessed(Perceptron(), rff_components=3), b"1e308,1e308,cat"),
    "scaled-multiclass": (
        lambda: Preprocessed(MulticlassPerceptron(), scale="standard"),
        b"1e300,1,true",
    ),
}


@pytest.mark.parametrize("neighbour", [None, b"1.7e308,1e308,1"])  # value_too_large itself
@pytest.mark.parametrize("source", ["memory", "lines"])
@pytest.mark.parametrize("learner", sorted(_TWO_FAULTS))
def test_a_record_with_two_faults_is_refused_for_its_label(learner, source, neighbour):
    make, two = _TWO_FAULTS[learner]
    lines = [b"a,b,y", b"1,2,1", b"2,1,0", b"0.5,1,1", two]
    lines += [] if neighbour is None else [neighbour]
    lines += [b"1,1,0"]
    block, record = _both_paths(make, lines, source)
    assert block == record
    reasons = [json.loads(line)["reason"] for line in block["dead_letters"]]
    assert reasons == ["label_outside_encoding"] + ["value_too_large"] * (neighbour is not None)


def test_refusal_puts_the_label_before_the_values():
    model = Preprocessed(Perceptron(), scale="standard")
    model.learn_one({"a": 1.0}, 1)
    model.learn_one({"a": 2.0}, 0)
    with pytest.raises(ValueTooLargeError) as caught:
        model.predict_learn_one({"a": 1e300}, 2)
    assert refusal(model, 2, caught.value)[0] == "label_outside_encoding"
    assert refusal(model, 1, caught.value) == ("value_too_large", caught.value.detail)


# -- the fuzz ----------------------------------------------------------------------------------


@pytest.mark.parametrize("part", range(4))  # four items, so that xdist's processes share it
def test_block_path_equals_record_path_on_random_streams(part):
    _check(range(part, SHORT_RUN, 4))


@pytest.mark.skipif(not CONFIGS, reason="the long run: STREAM_PERCEPTRON_FUZZ_CONFIGS=N")
def test_block_path_equals_record_path_long_run():
    _check(range(START, START + CONFIGS))
