"""A source with nothing new (Kafka between messages) lets the engine save a due checkpoint."""

from __future__ import annotations

import time

from connectors import MemorySource
from stream_perceptron import Perceptron
from stream_perceptron.checkpoint import CheckpointCoordinator, load_checkpoint
from stream_perceptron.engine import Engine
from stream_perceptron.formats import make_parser


def test_idle_saves_a_due_checkpoint_once(tmp_path):
    path = tmp_path / "model.json"
    coordinator = CheckpointCoordinator(str(path), interval=0.05)
    engine = Engine(Perceptron(), make_parser("csv"), coordinator=coordinator)
    lines = [b"a,y"] + [b"%d,%d" % (i % 7 - 3, i % 2) for i in range(50)]
    for batch in MemorySource(lines, batch_size=10).batches():
        engine._process_unit(batch)  # as run() does, without its final checkpoint
    assert not path.exists()
    engine.coordinator.idle()  # not due yet
    assert not path.exists()
    time.sleep(0.06)
    engine.coordinator.idle()  # due, and 51 records came since: saved
    saved = load_checkpoint(str(path))
    assert saved.next_offsets == {("memory", None): 51}
    assert saved.model.get_state() == engine.learner.get_state()
    first = path.stat().st_mtime_ns
    time.sleep(0.06)
    engine.coordinator.idle()  # due, but nothing new: not saved again
    assert path.stat().st_mtime_ns == first


def test_idle_without_a_checkpoint_saves_nothing():
    engine = Engine(Perceptron(), make_parser("csv"))
    for batch in MemorySource([b"a,y", b"1,1", b"-1,0"]).batches():
        engine._process_unit(batch)
    engine.coordinator.idle()
    assert engine.coordinator.last_saved_at is None and engine.stats.records == 2
