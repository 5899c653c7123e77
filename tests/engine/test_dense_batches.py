"""The engine's vectorised dense path against its per-record path: same model, counts, outputs."""

from __future__ import annotations

import io
import random

import pytest

from connectors import LineSource, MemorySink, MemorySource, Position, Record
from stream_perceptron import MulticlassPerceptron, PassiveAggressive, Perceptron, Preprocessed
from stream_perceptron.checkpoint import CheckpointCoordinator
from stream_perceptron.engine import Engine, Outputs
from stream_perceptron.engine.blocks import BlockPath, LineRun
from stream_perceptron.formats import make_parser


def _lines(seed: int, n: int = 3000, noise: bool = True) -> list[bytes]:
    rng = random.Random(seed)
    lines = [b"a,b,c,y"]
    for i in range(n):
        x = [rng.gauss(0, 1) for _ in range(3)]
        label = int(x[0] - 0.5 * x[1] + 0.2 > 0)
        cell = "" if noise and i % 97 == 5 else str(label)  # some unlabelled rows
        lines.append(",".join([*(repr(v) for v in x), cell]).encode())
        if noise and i % 331 == 7:
            lines.append(b"1,2,oops,1")  # a bad line: that batch goes the per-record way
        if noise and i % 613 == 11:
            lines.append(b"1,2,3,7")  # a third label: dead-lettered in either path
    return lines


def _run_source(learner, source, dense: bool = True):
    predictions, dead = MemorySink(), MemorySink()
    engine = Engine(
        learner,
        make_parser("csv"),
        Outputs(predictions=predictions, dead_letters=dead),
        dense=dense,
        keep_recent=50,
    )
    engine.run(source)
    return engine, predictions.lines, dead.lines


def _run(learner, lines, dense: bool, batch_size: int):
    return _run_source(learner, MemorySource(lines, batch_size=batch_size), dense)


def _examples(recent):
    """The window as (dict, label) pairs, however each path keeps it."""
    return [(x if isinstance(x, dict) else dict(zip(x[0], x[1].tolist())), y) for x, y in recent]


@pytest.mark.parametrize("bias", ["learned", "r2", "none"])
@pytest.mark.parametrize("averaged", [False, True])
@pytest.mark.parametrize("batch_size", [64, 1000])
def test_dense_path_equals_the_per_record_path(bias, averaged, batch_size):
    lines = _lines(seed=batch_size + averaged)
    a, preds_a, dead_a = _run(Perceptron(bias=bias, averaged=averaged), lines, True, batch_size)
    b, preds_b, dead_b = _run(Perceptron(bias=bias, averaged=averaged), lines, False, batch_size)
    assert a._blocks is not None and b._blocks is None
    assert a.learner.get_state() == b.learner.get_state()
    assert a.stats.get_state() == b.stats.get_state()
    assert a.stats.summary()["invalid"] == {"non_numeric_value": 10, "label_outside_encoding": 5}
    assert preds_a == preds_b and dead_a == dead_b
    assert _examples(a.recent_window()) == _examples(b.recent_window())
    assert a.next_offsets == b.next_offsets


def test_dense_path_is_really_taken(monkeypatch):
    calls = []
    original = Perceptron.learn_dense
    monkeypatch.setattr(Perceptron, "learn_dense", lambda *a: calls.append(1) or original(*a))
    engine, _, _ = _run(Perceptron(), _lines(seed=1, noise=False), True, 500)
    # 7 batches of records (header + 3000 lines by 500): every one dense, the first after its
    # header line.
    assert len(calls) == 7 and engine.stats.learned == 3000


class _DenseOnly(Perceptron):
    @property
    def sparse_capable(self) -> bool:
        return False


def test_unsupported_learners_use_the_per_record_path():
    engine = Engine(Perceptron(init="random", seed=1), make_parser("csv"))
    assert engine._blocks is None
    assert Engine(Perceptron(), make_parser("jsonl"))._blocks is not None
    # libsvm has no dense form: its blocks are sparse, for the learners that take those
    assert Engine(Perceptron(), make_parser("libsvm"))._blocks is not None
    libsvm = make_parser("libsvm")
    Engine(_DenseOnly(), libsvm)  # a learner of dense blocks only: no sparse ones asked for
    assert libsvm.parse_dense_block(b"1 a:1\n", 1) is None
    preprocessed = Preprocessed(MulticlassPerceptron(), scale="standard", hash_bits=4)
    for learner in (MulticlassPerceptron(), PassiveAggressive(), preprocessed):
        libsvm = make_parser("libsvm")
        Engine(learner, libsvm)
        assert libsvm.parse_dense_block(b"1 a:1\n", 1) is not None


@pytest.mark.parametrize("bias", ["learned", "r2"])
@pytest.mark.parametrize("chunk_size", [700, 1 << 16])
@pytest.mark.parametrize("crlf", [False, True])
def test_line_blocks_equal_the_per_record_path(bias, chunk_size, crlf):
    # Whole reads of a line source through the dense path: blocks with bad lines, unlabelled
    # rows and dead letters go the per-record way in part; the result is the same throughout.
    lines = _lines(seed=chunk_size + crlf)
    data = b"".join(line + (b"\r\n" if crlf else b"\n") for line in lines)
    taken = []
    original = BlockPath.learn

    def spy(self, run):
        done = original(self, run)
        if isinstance(run, LineRun):  # a whole read of the line source
            taken.append(done)
        return done

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(BlockPath, "learn", spy)
        source = LineSource(io.BytesIO(data), chunk_size=chunk_size)
        a, preds_a, dead_a = _run_source(Perceptron(bias=bias), source)
    reference = LineSource(io.BytesIO(data), chunk_size=chunk_size)
    b, preds_b, dead_b = _run_source(Perceptron(bias=bias), reference, dense=False)
    assert False in taken and (chunk_size > 1 << 15 or True in taken)
    assert a.learner.get_state() == b.learner.get_state()
    assert a.stats.get_state() == b.stats.get_state()
    assert preds_a == preds_b and dead_a == dead_b
    assert _examples(a.recent_window()) == _examples(b.recent_window())
    assert a.next_offsets == b.next_offsets == {("stdin", None): len(lines)}


def test_line_blocks_skip_what_a_resume_skips():
    lines = _lines(seed=3, noise=False)
    data = b"".join(line + b"\n" for line in lines)
    first = Engine(Perceptron(), make_parser("csv"))
    first.run(MemorySource(lines[:1201]))
    resumed = Engine(
        Perceptron.from_state(first.learner.get_state()),
        make_parser("csv"),
        coordinator=CheckpointCoordinator(positions={("stdin", None): 1201}),
        stats=first.stats,
    )
    resumed.run(LineSource(io.BytesIO(data), chunk_size=4096))
    whole = Engine(Perceptron(), make_parser("csv"))
    whole.run(LineSource(io.BytesIO(data), chunk_size=4096))
    assert resumed.learner.get_state() == whole.learner.get_state()
    assert resumed.stats.learned == whole.stats.learned == 3000


class _PartitionedSource:
    """Batches as a Kafka source makes them: records of several partitions, several records
    (lines) per message sharing its offset."""

    def __init__(self, batches: list[list[Record]]) -> None:
        self._batches = batches

    def batches(self):
        yield from self._batches


def _partitioned(lines: list[bytes], seed: int) -> list[list[Record]]:
    rng = random.Random(seed)
    header, rows = lines[0], lines[1:]
    offsets = {0: 0, 1: 0, 2: 0}
    records = [Record(header, Position("t", 0, 0))]
    offsets[0] = 1
    i = 0
    while i < len(rows):
        partition = rng.choice([0, 1, 2])
        size = rng.choice([1, 1, 3])  # a message of one line or of three
        offset = offsets[partition]
        offsets[partition] += 1
        for line in rows[i : i + size]:
            records.append(Record(line, Position("t", offset, partition), key=b"k"))
        i += size
    cuts = sorted(rng.sample(range(1, len(records)), 12))
    return [records[a:b] for a, b in zip([0, *cuts], [*cuts, len(records)])]


@pytest.mark.parametrize("seed", [1, 2])
def test_partitioned_batches_equal_the_per_record_path(seed, monkeypatch):
    lines = _lines(seed=seed)
    batches = _partitioned(lines, seed)
    calls = []
    original = Perceptron.learn_dense
    monkeypatch.setattr(Perceptron, "learn_dense", lambda *a: calls.append(1) or original(*a))
    a, preds_a, dead_a = _run_source(Perceptron(), _PartitionedSource(batches))
    monkeypatch.setattr(Perceptron, "learn_dense", original)
    b, preds_b, dead_b = _run_source(Perceptron(), _PartitionedSource(batches), dense=False)
    assert len(calls) > 10
    assert a.learner.get_state() == b.learner.get_state()
    assert a.stats.get_state() == b.stats.get_state()
    assert preds_a == preds_b and dead_a == dead_b
    assert a.next_offsets == b.next_offsets and len(a.next_offsets) == 3


@pytest.mark.parametrize("variant", ["pa", "pa1", "pa2"])
@pytest.mark.parametrize("bias", ["learned", "none"])
@pytest.mark.parametrize("batch_size", [64, 1000])
def test_passive_aggressive_blocks_equal_the_per_record_path(variant, bias, batch_size):
    lines = _lines(seed=batch_size + len(variant))

    def make() -> PassiveAggressive:
        return PassiveAggressive(C=0.05, variant=variant, bias=bias)

    a, preds_a, dead_a = _run(make(), lines, True, batch_size)
    b, preds_b, dead_b = _run(make(), lines, False, batch_size)
    assert a._blocks is not None and b._blocks is None
    assert a.learner.get_state() == b.learner.get_state()
    assert a.stats.get_state() == b.stats.get_state()
    assert a.stats.summary()["invalid"] == {"non_numeric_value": 10, "label_outside_encoding": 5}
    assert preds_a == preds_b and dead_a == dead_b
    assert a.next_offsets == b.next_offsets


@pytest.mark.parametrize("scale", [None, "standard"])
def test_passive_aggressive_line_blocks_are_taken_and_equal_the_per_record_path(
    scale, monkeypatch
):
    lines = _lines(seed=11)
    data = b"".join(line + b"\n" for line in lines)
    calls = []
    original = PassiveAggressive.learn_dense
    monkeypatch.setattr(
        PassiveAggressive, "learn_dense", lambda *a: calls.append(1) or original(*a)
    )

    def make() -> Preprocessed:
        return Preprocessed(PassiveAggressive(C=0.01), scale=scale)

    a, preds_a, dead_a = _run_source(make(), LineSource(io.BytesIO(data), chunk_size=4096))
    b, preds_b, dead_b = _run_source(make(), LineSource(io.BytesIO(data)), dense=False)
    assert len(calls) > 10
    assert a.learner.get_state() == b.learner.get_state()
    assert a.stats.get_state() == b.stats.get_state()
    assert preds_a == preds_b and dead_a == dead_b
