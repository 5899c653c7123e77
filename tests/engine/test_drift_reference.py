"""--drift-detector reference: ADWIN on the mistakes of a frozen copy of the model sees SEA's
switches (too small for an adapting model's own mistakes) within 1,000 examples, raises at most
one false alarm in 100k stationary examples, acts with --on-drift, survives kill -9 and
--resume to the bit (the copy travels in the checkpoint), and sees on the block path the drifts
the record path sees."""

from __future__ import annotations

import functools
import json

import pytest
from cli_helpers import (
    flipping_csv,
    kill_9_and_resume,
    run_cli,
    sea_examples,
    switching_examples,
    to_csv,
)

from connectors import MemorySink, MemorySource
from stream_perceptron import MulticlassPerceptron, PassiveAggressive, Perceptron, Preprocessed
from stream_perceptron.engine import Engine, Outputs
from stream_perceptron.engine.drift_reference import ReferenceWatch, reference_monitor
from stream_perceptron.errors import StateError
from stream_perceptron.formats import make_parser
from stream_perceptron.stats import RunStats

SWITCHES = [12_500, 25_000, 37_500]
PA = ["--model", "pa", "--C", "0.003", "--scale", "standard"]


def _summary(tmp_path, data: bytes, *flags: str) -> dict:
    path, out = tmp_path / "data.csv", tmp_path / "summary.json"
    path.write_bytes(data)
    proc = run_cli("run", "--input", str(path), "--format", "csv", *flags,
                   "--summary-json", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    return {**json.loads(out.read_text()), "human": (proc.stdout + proc.stderr).decode()}


def _delays(positions: list[int]) -> list[int | None]:
    ends = [*SWITCHES[1:], None]
    return [next((p - s for p in positions if p > s and (e is None or p <= e)), None)
            for s, e in zip(SWITCHES, ends)]  # fmt: skip


@pytest.mark.parametrize("seed", [42, 100, 200])
def test_every_switch_of_sea_is_seen_within_1000_examples(tmp_path, seed):
    data = to_csv(sea_examples([0, 1, 2, 3], 12_500, seed))
    own = _summary(tmp_path, data, *PA, "--drift-detector", "adwin")
    ref = _summary(tmp_path, data, *PA, "--drift-detector", "reference")
    assert ref["drift"]["detector"] == "reference"
    delays = _delays(ref["drift"]["positions"])
    assert all(d is not None and 0 < d <= 1_000 for d in delays), delays
    assert ref["drift"]["drifts"] == 3  # no false alarm either
    # the same model (reported only), whose own mistakes do not show the smallest switch
    assert ref["mistakes"] == own["mistakes"]
    assert _delays(own["drift"]["positions"])[0] is None
    # the copy was taken again after the last drift
    assert ref["drift"]["reference_taken_at"] == ref["drift"]["last_drift"] + 2_000
    taken, last = ref["drift"]["reference_taken_at"], ref["drift"]["last_drift"]
    assert (f"drifts           3 (ADWIN on a frozen copy of the model, taken at example {taken};"
            f" last at example {last})") in ref["human"]  # fmt: skip


@pytest.mark.parametrize("variant", [0, 3])
def test_a_stationary_stream_of_100k_raises_at_most_one_false_alarm(tmp_path, variant):
    data = to_csv(sea_examples([variant], 100_000, seed=7))
    summary = _summary(tmp_path, data, *PA, "--drift-detector", "reference")
    assert summary["learned"] == 100_000
    assert summary["drift"]["drifts"] <= 1
    assert summary["drift"]["reference_taken_at"] is not None


def test_forget_on_a_seen_switch_beats_the_model_left_alone(tmp_path):
    data = to_csv(sea_examples([0, 1, 2, 3], 12_500))
    flags = ["--averaged", "--scale", "standard", "--bias", "r2", "--drift-detector"]
    alone = _summary(tmp_path, data, *flags, "reference")
    forget = _summary(tmp_path, data, *flags, "reference", "--on-drift", "forget")
    assert forget["drift"]["drifts"] == 3
    assert forget["accuracy"] > alone["accuracy"] + 0.01


def test_the_copy_is_frozen_and_taken_after_the_warm_up():
    model = Perceptron()
    watch = ReferenceWatch(model, reference_monitor(), after=50)
    examples = switching_examples(400, None)
    for i, (x, y) in enumerate(examples[:50], 1):
        model.learn_one(x, y)
        watch.observe(x, y, i)
    assert watch.taken_at == 50
    copy = watch.get_state()["model"]
    assert copy == model.get_state()
    for i, (x, y) in enumerate(examples[50:], 51):
        model.learn_one(x, y)
        watch.observe(x, y, i)
    assert watch.get_state()["model"] == copy  # the learner moved on, the copy did not
    assert model.get_state() != copy
    assert watch.monitor.seen == 400  # the monitor counts the run's examples


def test_a_restored_watch_sees_the_drifts_of_an_uninterrupted_one():
    examples = switching_examples(30_000, None)
    flipped = [(x, 1 - y if (i // 10_000) % 2 else y) for i, (x, y) in enumerate(examples)]

    def run(split: int | None) -> tuple[list[int], dict]:
        model = Perceptron()  # it adapts: the copy after a drift knows the new concept
        watch = ReferenceWatch(model, reference_monitor(), after=1_000)
        for i, (x, y) in enumerate(flipped, 1):
            model.learn_one(x, y)
            watch.observe(x, y, i)
            if i == split:  # through JSON, as a checkpoint holds them
                model = Perceptron.from_state(json.loads(json.dumps(model.get_state())))
                monitor = reference_monitor()
                monitor.load_state(json.loads(json.dumps(watch.monitor.get_state())))
                state = json.loads(json.dumps(watch.get_state()))
                watch = ReferenceWatch(model, monitor, after=1_000)
                watch.load_state(state)
        return watch.monitor.positions, watch.get_state()

    whole, whole_state = run(None)
    assert len(whole) == 2 and all(0 < p - s <= 1_000 for p, s in zip(whole, [10_000, 20_000]))
    for split in (500, 10_300, 20_002):
        assert run(split) == (whole, whole_state)


def test_a_corrupt_state_is_refused():
    watch = ReferenceWatch(Perceptron(), reference_monitor(), after=10)
    good = watch.get_state()
    for bad in ({}, {**good, "due": None}, {**good, "version": 9}, {**good, "due": "x"},
                {**good, "due": None, "model": {"class": "Nope"}}):  # fmt: skip
        with pytest.raises(StateError):
            watch.load_state(bad)


@pytest.mark.parametrize("flags", [["--model", "pa"], ["--averaged", "--on-drift", "forget"]])
def test_kill_9_and_resume_end_with_the_uninterrupted_run(tmp_path, flags):
    # labels inverted from 40k to 80k and from 120k to 160k: each of the 4 switches seen by
    # the copy of a model that adapted (PA-I; the averaged perceptron's average restarted) to
    # the concept before it. The kills come at points of the stream (kill_9_and_resume), so a
    # fast run needs no longer input (it was repeated 4 times, and its drift count loosened)
    data = tmp_path / "data.csv"
    data.write_bytes(flipping_csv(200_000, 40_000))
    kill_9_and_resume(tmp_path, data, [*flags, "--drift-detector", "reference"])
    stats = json.loads((tmp_path / "ck.json").read_text())["stats"]
    assert stats["learned"] == 200_000
    assert stats["drift"]["drifts"] == 4
    assert stats["drift_reference"]["model"] is not None


def test_the_flags_are_checked():
    proc = run_cli("run", "--format", "csv", "--drift-reference-after", "10", stdin=b"")
    assert proc.returncode == 2
    assert b"--drift-reference-after needs --drift-detector reference" in proc.stderr
    proc = run_cli("run", "--format", "csv", "--drift-detector", "reference",
                   "--drift-reference-after", "0", stdin=b"")  # fmt: skip
    assert proc.returncode == 2 and b"--drift-reference-after" in proc.stderr


@functools.cache  # made once a test process (1 s), not once for each of the 8 tests
def _sea_lines(n: int) -> tuple[bytes, ...]:
    """SEA's 4 concepts (``n`` each) as CSV lines, with unlabelled rows, bad lines and a third
    label here and there (the blocks holding them go record by record)."""
    lines = [b"x0,x1,x2,y"]
    for i, (x, y) in enumerate(sea_examples([0, 1, 2, 3], n)):
        cell = "" if i % 1_999 == 5 else str(y)
        lines.append(",".join([*(repr(v) for v in x.values()), cell]).encode())
        if i % 3_331 == 7:
            lines.append(b"1,2,oops,1")
        if i % 6_113 == 11:
            lines.append(b"1,2,3,7")
    return tuple(lines)


@pytest.mark.parametrize("make", [
    lambda: Preprocessed(PassiveAggressive(C=0.003), scale="standard"),
    lambda: Preprocessed(Perceptron(averaged=True, bias="r2"), scale="standard"),
    lambda: Preprocessed(Perceptron(), rff_components=30, rff_gamma=0.5),
    lambda: MulticlassPerceptron(averaged=True),
])  # fmt: skip
@pytest.mark.parametrize("batch_size", [500, 4_000])
def test_the_block_path_sees_the_drifts_the_record_path_sees(make, batch_size):
    lines = list(_sea_lines(12_500))
    runs = []
    for dense in (True, False):
        learner = make()
        stats = RunStats()
        stats.drift = reference_monitor()
        stats.drift_reference = ReferenceWatch(learner, stats.drift, after=2_000)
        predictions, dead = MemorySink(), MemorySink()
        engine = Engine(learner, make_parser("csv"), Outputs(predictions, dead), stats=stats,
                        dense=dense)  # fmt: skip
        calls: list[bool] = []
        if dense:  # count the blocks learned whole while the copy is held
            watch = stats.drift_reference

            def spy(*args, trial=watch.trial_block, watch=watch, calls=calls):
                got = trial(*args)
                calls.append(got is not None and watch.taken_at is not None)
                return got

            watch.trial_block = spy
        engine.run(MemorySource(lines, batch_size=batch_size))
        runs.append((learner.get_state(), stats.get_state(), predictions.lines, dead.lines))
        if dense:
            assert sum(calls) >= 5  # blocks predicted by the copy and learned whole
    assert runs[0] == runs[1]
    assert runs[0][1]["drift"]["drifts"] >= 2
