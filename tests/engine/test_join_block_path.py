"""``--join-key`` on the block path (issue 44): random keyed streams joined by runs
(:mod:`stream_perceptron.engine.delayed_blocks`) and record by record (``Engine(dense=False)``)
must leave the same bytes: predictions, dead letters (``no_outcome``, ``unmatched_outcome``
and bad records), counters, the pending store, model, window, offsets, and the same again
after a checkpoint's state is taken half way and a new engine resumes from it.

The streams: events, outcomes (before and after their events, twice, of keys no event has),
records with both, records without a key (with a label alone: ``missing_join_key``), empty and
integer keys, bad lines (invalid JSON, NaN, a float key, an escape), labels a binary model
refuses and values too large (the block refused whole, then taken row by row), under small and
large ``--max-pending`` and ``--label-wait`` and block sizes that split pairs; the block plan's
loop in C and its Python reference both. Tests break the block join on purpose (an expiry one
record late, a served prediction of the wrong row) and check that the comparison sees it.

``STREAM_PERCEPTRON_JOIN_FUZZ=N`` runs N seeds instead of the short run's.
"""

from __future__ import annotations

import io
import json
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest

from connectors import LineSource, MemorySink, MemorySource, MessageBlock, Source
from stream_perceptron import native
from stream_perceptron.checkpoint import CheckpointCoordinator
from stream_perceptron.drift import DriftMonitor
from stream_perceptron.engine import Engine, Outputs, delayed_blocks
from stream_perceptron.formats import make_parser
from stream_perceptron.join import PendingJoin
from stream_perceptron.join import blocks as join_blocks
from stream_perceptron.join.blocks import OWN
from stream_perceptron.learners import (
    MulticlassPerceptron,
    PassiveAggressive,
    Perceptron,
    Preprocessed,
    StreamClassifier,
)
from stream_perceptron.stats import RunStats

pytestmark = pytest.mark.skipif(native.dense is None, reason="the block path needs the C tier")

SHORT_RUN = 300


@pytest.fixture(autouse=True)
def _every_run_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs of any size go the block path here (the engine leaves runs of fewer than
    ``MIN_RUN`` records to the record path: both give the same, and that is what is tested)."""
    monkeypatch.setattr(delayed_blocks, "MIN_RUN", 1)
SEEDS = int(os.environ.get("STREAM_PERCEPTRON_JOIN_FUZZ", "0") or 0) or SHORT_RUN


@dataclass(frozen=True)
class JoinConfig:
    seed: int
    orderly: bool
    model: str
    max_pending: int
    label_wait: int
    source: str  # memory, lines, messages
    cut: int
    keep_recent: int
    drift: bool
    resume_at: int  # 0: one run; else the first run stops after this many lines
    n: int

    def learner(self) -> StreamClassifier:
        if self.model == "perceptron":
            return Perceptron()
        if self.model == "averaged":
            return Perceptron(averaged=True, bias="r2")
        if self.model == "pa":
            return PassiveAggressive(variant="pa1", C=0.1)
        if self.model == "scaled":
            return Preprocessed(Perceptron(), scale="standard")
        if self.model == "hashed":
            return Preprocessed(Perceptron(averaged=True), hash_bits=3)
        return MulticlassPerceptron()


def make_config(seed: int) -> JoinConfig:
    rng = random.Random(seed)
    n = rng.choice([20, 60, 200, 400])
    orderly = rng.random() < 1 / 3  # an orderly stream (see make_lines), mostly within bounds
    return JoinConfig(
        seed=seed,
        orderly=orderly,
        model=rng.choice(["perceptron", "perceptron", "averaged", "pa", "scaled", "hashed",
                          "multiclass"]),  # fmt: skip
        max_pending=rng.choice([1, 2, 3, 7, 20, 10_000] + [10_000] * 4 * orderly),
        label_wait=rng.choice([0, 1, 2, 5, 13, 40, 1 << 40] + [60, 1 << 40] * 2 * orderly),
        source=rng.choice(["memory", "lines", "messages"]),
        cut=rng.choice([1, 2, 3, 7, 16, 50, 1000]),
        keep_recent=rng.choice([0, 0, 4]),
        drift=rng.random() < 0.3,
        resume_at=rng.randrange(1, n) if rng.random() < 0.3 else 0,
        n=n,
    )


def make_lines(config: JoinConfig) -> list[bytes]:
    """A random keyed stream (see the module's text); a third of the seeds an orderly one."""
    rng = random.Random(config.seed * 7919 + 1)
    if config.orderly:
        return _orderly_lines(config, rng)
    multiclass = config.model == "multiclass"
    choices: list[list[Any]] = [[0, 1], [-1, 1], [False, True]]
    labels = ["a", "b", "c"] if multiclass else rng.choice(choices)
    pool = rng.choice([3, 10, 40, 1000])
    names = [f"f{j}" for j in range(rng.choice([1, 3, 6]))]
    odd = rng.random() < 0.3  # some lines with a third label or a value too large
    faults = rng.random() < 0.5  # lines the block path leaves to the record path
    lines: list[bytes] = []

    def features() -> dict[str, Any]:
        if rng.random() < 0.7:
            return {name: round(rng.gauss(0, 2), 3) for name in names}
        return {name: rng.choice([1, -2.5, True, "red", None]) for name in rng.sample(names, 2
                if len(names) > 1 else 1)}  # fmt: skip

    def label() -> Any:
        if odd and rng.random() < 0.03:
            return rng.choice(["cat", 7, 0.5])
        return rng.choice(labels)

    for _ in range(config.n):
        key: Any = f"k{rng.randrange(pool)}"
        roll = rng.random() if faults else rng.random() * 0.84
        if roll < 0.38:
            obj: Any = {"id": key, **features()}
        elif roll < 0.70:
            obj = {"id": key, "y": label()}
        elif roll < 0.78:
            obj = {"id": key, **features(), "y": label()}
        elif roll < 0.84:
            obj = {**features(), **({"y": label()} if rng.random() < 0.5 else {})}
        elif roll < 0.86:
            obj = {"y": label()}  # missing_join_key
        elif roll < 0.88:
            obj = {"id": rng.choice(["", 17, None]), **features()}
        elif roll < 0.90:
            obj = {"id": key, "y": None}  # an event without features
        elif roll < 0.92 and odd:
            obj = {"id": key, names[0]: 1e300, "y": label()}
        else:
            lines.append(rng.choice([
                b"not json", b'{"id": "k1", "f0": NaN}', b'{"id": 1.5, "y": 1}',
                b'{"id": "k\\u0031", "y": 1}', b"[1]", b'{"id": "k2", "x": {"f0": 1}}',
            ]))  # fmt: skip
            continue
        lines.append(json.dumps(obj).encode())
    return lines


def _orderly_lines(config: JoinConfig, rng: random.Random) -> list[bytes]:
    """Events of new keys, each outcome some records later, as a live stream mostly is
    (thousands of events waiting in one shape), with now and then what breaks that: an
    outcome before its event or of no event, a key again, another shape, a record with both,
    an event without features, one never labelled."""
    labels: list[Any] = ["a", "b", "c"] if config.model == "multiclass" else [0, 1]
    names = [f"f{j}" for j in range(rng.choice([1, 3, 6]))]
    late = rng.choice([0, 2, 10, 50])
    odd = rng.choice([0.0, 0.0, 0.02, 0.1])
    timed: list[tuple[float, int, bytes]] = []
    for i in range(config.n // 2):
        key = f"e{i}" if rng.random() >= odd else f"e{rng.randrange(i + 1)}"
        x: dict[str, Any] = {name: round(rng.gauss(0, 2), 3) for name in names}
        roll = rng.random()
        if roll < odd:
            x = {"g": 1.5}
        elif roll < 2 * odd:
            x = {}
        event = json.dumps({"id": key, **x}).encode()
        if rng.random() < odd:
            event = json.dumps({"id": key, **x, "y": rng.choice(labels)}).encode()
        timed.append((i, 0, event))
        if rng.random() >= odd:
            at = i + rng.uniform(-1 if rng.random() < odd else 0, late)
            timed.append((at, 1, json.dumps({"id": key, "y": rng.choice(labels)}).encode()))
    timed.sort()
    return [line for _, _, line in timed]


class _MessageSource:
    """One Kafka partition's messages, one record each, in message blocks of ``cut``."""

    def __init__(self, lines: list[bytes], cut: int) -> None:
        self._lines, self._cut = lines, cut

    def close(self) -> None:
        pass

    def __enter__(self) -> _MessageSource:
        return self

    def __exit__(self, *exc_info: object) -> None:
        pass

    def batches(self) -> Iterator[list[Any]]:
        for block in self.message_blocks():
            yield block.records()

    def message_blocks(self) -> Iterator[MessageBlock]:
        for lo in range(0, len(self._lines), self._cut):
            values = self._lines[lo : lo + self._cut]
            offsets = list(range(lo, lo + len(values)))
            keys: list[bytes | None] = [str(o % 3).encode() if o % 2 else None for o in offsets]
            yield MessageBlock("t", 0, values, offsets, keys)


def _source(kind: str, lines: list[bytes], cut: int) -> Source:
    if kind == "memory":
        return MemorySource(lines, batch_size=cut)
    if kind == "messages":
        return _MessageSource(lines, cut)
    data = b"".join(line + b"\n" for line in lines)
    return LineSource(io.BytesIO(data), chunk_size=max(16, cut * 23), max_line_bytes=1 << 16)


def run_path(config: JoinConfig, lines: list[bytes], dense: bool) -> dict[str, Any]:
    """Everything a run leaves, as text; with ``resume_at``, two runs, the second resumed
    from the first's state (its model, counters, pending store and positions)."""
    predictions, dead = MemorySink(), MemorySink()
    learner = config.learner()
    state: dict[str, Any] | None = None
    blocks = 0
    for part in ([lines[: config.resume_at], lines] if config.resume_at else [lines]):
        stats = RunStats(rolling_window=7)
        if config.drift:
            stats.drift = DriftMonitor(chunk=2, clock=4, recent=2)
        join = PendingJoin(config.max_pending, config.label_wait)
        positions = None
        if state is not None:
            learner = type(learner).from_state(json.loads(state["model"]))
            stats.load_state(json.loads(state["counters"]), learner)
            join.load_state(json.loads(state["join"]))
            positions = state["positions"]
        engine = Engine(
            learner, make_parser("jsonl", "y", "id"), Outputs(predictions, dead), stats=stats,
            keep_recent=config.keep_recent, dense=dense, join=join,
            coordinator=CheckpointCoordinator(positions=positions),
        )  # fmt: skip
        if dense:
            assert engine._blocks is not None
            learn = engine._blocks.learn

            def counted(run: Any, learn: Any = learn) -> bool:
                nonlocal blocks
                done = learn(run)
                blocks += done
                return done

            engine._blocks.learn = counted  # type: ignore[method-assign]
        engine.run(_source(config.source, part, config.cut))
        learner = engine.learner
        state = {  # as a checkpoint holds it: JSON
            "model": json.dumps(learner.get_state()),
            "counters": json.dumps(engine.stats.get_state()),
            "join": json.dumps(join.get_state()),
            "positions": dict(engine.next_offsets),
        }
    assert state is not None
    window = [
        (x if isinstance(x, dict) else dict(zip(x[0], x[1].tolist())), y)
        for x, y in engine.recent_window()
    ]
    summary = {k: v for k, v in engine.stats.summary().items()
               if "second" not in k and k != "peak_rss_bytes"}  # fmt: skip
    return {
        "predictions": predictions.lines, "dead_letters": dead.lines, "model": state["model"],
        "counters": state["counters"], "join": state["join"], "summary": repr(summary),
        "offsets": repr(state["positions"]), "window": repr(window), "blocks": blocks,
    }  # fmt: skip


def differences(seed: int) -> tuple[list[str], int]:
    """What the two paths disagree on for seed ``seed``, and how many runs the block path
    took."""
    config = make_config(seed)
    lines = make_lines(config)
    block = run_path(config, lines, dense=True)
    record = run_path(config, lines, dense=False)
    blocks = block.pop("blocks")
    record.pop("blocks")
    found = []
    for key, got in block.items():
        want = record[key]
        if got != want:
            found.append(f"seed {seed} {config}: {key} differs:\n  block  {_first(got, want)}"
                         f"\n  record {_first(want, got)}")  # fmt: skip
    return found, blocks


def _first(a: Any, b: Any) -> str:
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return f"[{i}] {x[:300]!r}"
        return f"{len(a)} lines"
    return repr(a)[:600]


def _check(seeds: range) -> int:
    found: list[str] = []
    blocks = 0
    for seed in seeds:
        more, runs = differences(seed)
        found += more
        blocks += runs
    assert not found, "\n".join(found[:10])
    return blocks


def test_the_join_block_path_equals_the_record_path_on_random_keyed_streams() -> None:
    blocks = _check(range(SEEDS))
    assert blocks > SEEDS  # the block path took runs (several a stream, on the whole)


def test_the_plan_ran_in_c_and_its_python_reference_equals_the_record_path_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The streams above went through ``_dense.join_plan`` (the C loop); its reference, the
    Python loop of :mod:`stream_perceptron.join.blocks`, gives the record path's bytes too."""
    assert native.dense is not None
    calls = 0
    c_plan = native.dense.join_plan

    def counted(*args: Any) -> Any:
        nonlocal calls
        calls += 1
        return c_plan(*args)

    monkeypatch.setattr(native.dense, "join_plan", counted)
    _check(range(0, SHORT_RUN, 10))
    assert calls > 30
    monkeypatch.setattr(join_blocks, "NATIVE", False)
    calls = 0
    _check(range(0, SHORT_RUN, 3))
    assert calls == 0


def test_bounds_past_int64_go_the_python_plan_with_the_same_results(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A ``--label-wait`` or ``--max-pending`` past what the C loop's int64 sums hold."""
    assert native.dense is not None
    calls = 0
    c_plan = native.dense.join_plan

    def counted(*args: Any) -> Any:
        nonlocal calls
        calls += 1
        return c_plan(*args)

    monkeypatch.setattr(native.dense, "join_plan", counted)
    blocks = 0
    for seed in range(6):
        config = replace(make_config(seed), label_wait=1 << 70, max_pending=1 << 66)
        lines = make_lines(config)
        block, record = run_path(config, lines, True), run_path(config, lines, False)
        blocks += block.pop("blocks")
        record.pop("blocks")
        assert block == record
    assert blocks > 100 and calls == 0


def test_a_resumed_run_and_refused_blocks_are_among_the_streams() -> None:
    configs = [make_config(seed) for seed in range(SHORT_RUN)]
    assert sum(c.resume_at > 0 for c in configs) > 50
    assert sum(c.label_wait < 5 and c.max_pending < 5 for c in configs) > 5
    refused = 0
    original = Perceptron.learn_block

    def learn_block(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal refused
        result = original(self, *args, **kwargs)
        refused += result is None
        return result

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Perceptron, "learn_block", learn_block)
        _check(range(0, SHORT_RUN, 3))
    assert refused > 5  # blocks refused whole, then taken row by row, were compared too


def test_the_comparison_sees_an_expiry_one_record_late(monkeypatch: pytest.MonkeyPatch) -> None:
    original = PendingJoin.next_due

    def late(self: PendingJoin, entries: bool = True, joined: bool = True) -> Any:
        return original(self, entries, joined) + 1

    monkeypatch.setattr(PendingJoin, "next_due", late)
    found = [seed for seed in range(60) if differences(seed)[0]]
    assert len(found) > 10, found


def test_the_comparison_sees_a_served_prediction_of_the_wrong_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = delayed_blocks.JoinBlockPath._served

    def shifted(self: Any, plan: Any, predictions: Any, row_labels: Any) -> None:
        plan.served = [(k, OWN, delay) for k, _, delay in plan.served]  # the outcome's row's
        original(self, plan, predictions, row_labels)

    monkeypatch.setattr(delayed_blocks.JoinBlockPath, "_served", shifted)
    found = [seed for seed in range(60) if differences(seed)[0]]
    assert len(found) >= 3, found

