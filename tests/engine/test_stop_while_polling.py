"""A stop request (SIGTERM, SIGINT) that comes while the engine waits on a source that polls
(Kafka) is seen between polls, never raised inside what the source runs meanwhile.

A fresh clone's make test found the bug: a shared-model worker got SIGTERM during the commit
its poll loop makes when idle; the signal handler's exception surfaced inside confluent-kafka's
``produce`` (which checks for signals), came out as ``TypeError('expected header key to be
unicode string')``, failed the transaction, and the worker exited 1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from connectors import MemorySink
from connectors.base import Closing
from connectors.record import Position, Record
from stream_perceptron.engine import Engine
from stream_perceptron.engine.outputs import Outputs
from stream_perceptron.formats import make_parser
from stream_perceptron.learners import Perceptron


class _PollingSource(Closing):
    """Polls: a batch, then an idle round in which it commits (the stop request arrives in the
    middle of that commit, as a signal would), then more batches until told to stop."""

    name = "polls"

    def __init__(self, engine_stop: Callable[[], None], cooperative: bool) -> None:
        self._engine_stop = engine_stop
        self._requested: Callable[[], bool] | None = None
        self.commit_steps: list[str] = []
        self.polls = 0
        if cooperative:
            self.stop_when = self._stop_when  # the Kafka sources' hook

    def _stop_when(self, requested: Callable[[], bool]) -> None:
        self._requested = requested

    def _commit(self) -> None:
        self.commit_steps.append("begin")
        self._engine_stop()  # the signal handler runs here (a C call that checks signals)
        self.commit_steps.append("end")

    def batches(self) -> Iterator[list[Record]]:
        lines = [b"a,y", b"1,1", b"-1,0", b"2,1"]
        offset = 0
        while True:
            if self._requested is not None and self._requested():
                return
            self.polls += 1
            if self.polls == 2:
                self._commit()  # an idle poll: the source commits
                continue
            if self.polls > 50:
                raise AssertionError("the stop was never seen")
            yield [Record(v, Position(self.name, offset + i)) for i, v in enumerate(lines)]
            offset += len(lines)
            lines = [b"3,1"]

    def close(self) -> None:
        pass


def _run(cooperative: bool) -> tuple[_PollingSource, Engine]:
    holder: list[Engine] = []
    source = _PollingSource(lambda: holder[0].request_stop(), cooperative)
    engine = Engine(Perceptron(), make_parser("csv"), Outputs(MemorySink(), MemorySink()))
    holder.append(engine)
    engine.run(source)
    return source, engine


def test_a_stop_during_a_polling_sources_commit_is_seen_after_it():
    source, engine = _run(cooperative=True)
    assert source.commit_steps == ["begin", "end"]  # the commit ran whole
    assert source.polls == 2  # and the source ended at its next poll
    assert engine.stats.records == 3


def test_a_source_that_blocks_in_a_read_is_still_interrupted():
    # stdin: a read that blocks until a line comes is left by the handler's exception
    source, engine = _run(cooperative=False)
    assert source.commit_steps == ["begin"]
    assert engine.stats.records == 3
