"""A one-line progress display on stderr, for people watching a terminal."""

from __future__ import annotations

import time
from typing import TextIO

from stream_perceptron.stats import RunStats

__all__ = ["Progress"]


class Progress:
    """Rewrites one status line (records/s, mistakes, accuracy) at most every ``interval`` s."""

    def __init__(self, stream: TextIO, interval: float = 0.5) -> None:
        self.stream = stream
        self.interval = interval
        self._last = 0.0
        self._shown = False

    def update(self, stats: RunStats, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < self.interval:
            return
        self._last = now
        elapsed = stats.elapsed_seconds or 1e-9
        acc = stats.accuracy
        line = (
            f"{stats.records:>12,} records  {stats.records_this_run / elapsed:>10,.0f}/s  "
            f"mistakes {stats.mistakes:,}  accuracy {'n/a' if acc is None else f'{acc:.4f}'}  "
            f"invalid {sum(stats.invalid.values()):,}"
        )
        self.stream.write("\r" + line + "\x1b[K")
        self.stream.flush()
        self._shown = True

    def finish(self, stats: RunStats) -> None:
        if self._shown or stats.records:
            self.update(stats, force=True)
            self.stream.write("\n")
            self.stream.flush()
