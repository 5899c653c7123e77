"""Where a shared-model worker's time goes (issue 45): the timeline's phases are exclusive and
add up to at most the wall time, and every phase of a worker's commits, mixes and restores is
accounted where it happens (in one process, over the in-memory model log). The same timeline
over HTTP from a real worker: tests/kafka/test_shared_model_timeline.py."""

from __future__ import annotations

import random
import threading
import time

from test_shared_coordinator import TOPIC, Cluster, _data, _Stepper

from connectors import Position, Record
from stream_perceptron.sharing.timeline import DETAILS, PHASES, Timeline


def _check_adds_up(summary: dict) -> None:
    phases = summary["phases"]
    assert set(phases) == set(PHASES)
    assert all(v >= 0 for v in phases.values()), phases
    assert all(v >= 0 for v in summary["details"].values()), summary["details"]
    assert sum(phases.values()) <= summary["wall_seconds"] + 1e-9, summary
    assert summary["other_seconds"] == max(0.0, summary["wall_seconds"] - sum(phases.values()))
    assert summary["cpu_seconds"] >= 0


class _Clock:
    """A wall clock that moves only when told (the phases' arithmetic, exactly)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_phases_are_exclusive_and_add_up_to_at_most_the_wall_time() -> None:
    clock = _Clock()
    t = Timeline(clock=clock)
    with t.phase("transaction"):
        clock.now += 2
        with t.phase("fold"):
            clock.now += 3
        with t.detail("commit"):  # a detail is inclusive: the phase keeps its time
            clock.now += 1
    t.add("learn", 0.5)  # the engine times its batches itself
    clock.now += 0.5
    t.open_span("wait")
    clock.now += 2
    with t.phase("read"):  # inside the span: the span's time excludes it
        clock.now += 4
    t.add("learn", 0.25)  # so does a batch learned while holding
    clock.now += 0.25
    t.close_span()
    clock.now += 1  # no phase: other
    t.end()
    clock.now += 10  # after the end: nowhere
    s = t.summary()
    _check_adds_up(s)
    assert s["wall_seconds"] == 13.75
    assert s["phases"] == {**dict.fromkeys(PHASES, 0.0), "transaction": 3, "fold": 3,
                           "learn": 0.75, "wait": 2, "read": 4}  # fmt: skip
    assert s["other_seconds"] == 1.0
    assert s["details"]["commit"] == 1 and s["detail_calls"]["commit"] == 1
    assert s["calls"] == {**dict.fromkeys(PHASES, 0), "transaction": 1, "fold": 1, "learn": 2,
                          "wait": 1, "read": 1}  # fmt: skip


def test_a_phase_in_another_thread_is_not_taken_from_this_threads_phase() -> None:
    """A revocation's commit runs on a helper thread: its phases are its own."""
    t = Timeline()
    with t.phase("transaction"):
        worker = threading.Thread(target=lambda: t.add("restore", 0.05))
        worker.start()
        worker.join()
        time.sleep(0.01)
    assert t.summary()["phases"]["transaction"] >= 0.01


def test_every_phase_of_a_leader_and_a_worker_is_accounted() -> None:
    """Two workers learn, commit, mix and move over the in-memory log: the leader's timeline
    has time (and calls) in every phase its commits meet, the details of the increments and
    moves too; removing any phase's timing fails this test."""
    cluster, data = Cluster(), _data(2, 400)
    lead = _Stepper(cluster, "lead", [0], mix_every=100)
    other = _Stepper(cluster, "other", [1], mix_every=100)
    for worker in (lead, other):  # the engine's batches, as the CLI hooks them
        timeline = worker.coordinator.timeline
        worker.engine.on_batch = lambda seconds, t=timeline: t.add("learn", seconds)
    rng = random.Random(3)

    def step(self, data, available, rng) -> None:  # _Stepper.step, timed as the engine does
        batch = []
        for p, start in self.positions.items():
            end = min(start + rng.randint(1, 60), available[p])
            batch += [Record(data[p][o], Position(TOPIC, o, p)) for o in range(start, end)]
            self.positions[p] = end
        if batch:
            started = time.perf_counter()
            with self.engine.lock:
                self.engine._process_unit(batch)
            self.engine.on_batch(time.perf_counter() - started)  # the commit not included
        self.coordinator.after_batch(self.engine.stats.records)

    while not (lead.done(data) and other.done(data)):
        for w in (lead, other):
            step(w, data, {0: 400, 1: 400}, rng)
    other.coordinator.save()
    lead.coordinator.peek_s = 0.0
    lead.coordinator.idle()
    assert lead.coordinator.hold_at_end()  # waits for the other: the "wait" span opens
    time.sleep(0.01)
    lead.coordinator.finish()
    other.coordinator.finish()
    for w in (lead, other):
        w.coordinator.close()
    s = lead.coordinator.timeline.summary()
    _check_adds_up(s)
    assert lead.coordinator.mixes >= 2 and other.coordinator.mixes >= 2
    for phase in ("learn", "increment", "transaction", "read", "wait", "fold", "move",
                  "restore"):  # fmt: skip
        assert s["phases"][phase] > 0 and s["calls"][phase] > 0, (phase, s)
    assert s["phases"]["wait"] >= 0.01
    for detail in DETAILS:
        assert s["details"][detail] > 0 and s["detail_calls"][detail] > 0, (detail, s)
    assert s["detail_calls"]["commit"] == lead.coordinator.commits
    o = other.coordinator.timeline.summary()
    _check_adds_up(o)
    assert o["calls"]["fold"] == 0 and o["phases"]["fold"] == 0  # only the leader folds
    assert o["phases"]["move"] > 0 and o["phases"]["increment"] > 0


def test_the_leaders_last_commit_waiting_to_read_its_mixture_back_is_a_wait(monkeypatch) -> None:
    """finish(): the leader's last mixture, committed but not yet in the log as it reads it
    (the broker marks transactions a moment later), is waited for (READ_BACK_WAIT_S): wait."""
    from stream_perceptron.sharing import mixer

    monkeypatch.setattr(mixer, "READ_BACK_WAIT_S", 0.2)
    cluster, data = Cluster(), _data(2, 200)
    lead = _Stepper(cluster, "lead", [0], mix_every=100)
    other = _Stepper(cluster, "other", [1], mix_every=100)
    rng = random.Random(4)
    lead.step(data, {0: 1, 1: 0}, rng)
    lead.coordinator.save()  # mixture 0, read back
    while other.positions[1] < 80:
        other.step(data, {0: 1, 1: 80}, rng)
    other.coordinator.save()
    lead.coordinator.log.hidden_from = len(cluster.topics["model"])  # what it commits: unseen
    lead.coordinator.save()  # the other's 80 examples mixed: mixture 1, not read back
    assert lead.coordinator._unconfirmed is not None
    before = lead.coordinator.timeline.summary()["phases"]["wait"]
    lead.coordinator.finish()
    s = lead.coordinator.timeline.summary()
    _check_adds_up(s)
    assert s["phases"]["wait"] - before >= 0.2 - 0.06  # its reads, every 0.05 s, are reads
