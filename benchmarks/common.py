"""What the rows share: sizes, the run context, results, repeats and medians."""

from __future__ import annotations

import dataclasses
import gc
import statistics
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "Context",
    "Measure",
    "Result",
    "Sizes",
    "count",
    "frozen_gc",
    "interleaved",
    "median",
]

MiB = 1 << 20


@dataclass(frozen=True)
class Sizes:
    """Examples (or lines, records) per row; ``--quick`` divides them all by 10."""

    binary: int = 200_000
    multiclass: int = 100_000
    array: int = 1_000_000
    array_batch: int = 10_000
    stdin: int = 1_000_000
    kafka: int = 1_000_000
    metrics: int = 5_000_000
    memory_small: int = 1_000_000
    memory_large: int = 10_000_000
    memory_block: int = 10_000
    hashed_small: int = 100_000
    hashed_large: int = 5_000_000
    quality: int = 50_000  # synthetic streams of the learning-quality row (9)
    # row 11: one worker drains some 180k records/s, and a member that joins reaches the others
    # at their next heartbeat (up to 3 s): shorter, the first worker read it all before the
    # second had partitions, which then waited out the first's session (45 s) to end
    shared: int = 1_440_000
    shared_quality: int = 30_000  # row 14: records per run (produced over about 8 s)
    shared_seeds: int = 10  # row 14: seeds per setting
    shapes: int = 200_000  # row 15: records per record shape (issue 43)
    delayed: int = 200_000  # row 16: events (each with an outcome: two records) (issue 44)
    pending: int = 1_000_000  # row 16c: events waiting at once

    def scaled_down(self, factor: int) -> Sizes:
        """Every size divided by ``factor`` (batch and block sizes stay as they are; the
        hashed row's large run by 10 more)."""
        keep = {"array_batch", "memory_block"}
        # the all-distinct-names run is per record, every name new: 100x smaller, not 10x
        extra = {"hashed_large": 10}
        return dataclasses.replace(
            self,
            **{
                f.name: max(1, getattr(self, f.name) // (factor * extra.get(f.name, 1)))
                for f in dataclasses.fields(self)
                if f.name not in keep
            },
        )


@dataclass
class Context:
    """One run of the suite: sizes, repeats, a scratch directory and its generated files."""

    sizes: Sizes
    repeats: int
    workdir: Path
    files: dict[tuple[str, int], Path] = field(default_factory=dict)
    #: the fewest rounds of the rows whose goals are a few per cent (4a-4d, 6, 6b, 13c): 5 on
    #: this noisy machine; a ``--quick`` run (a smoke run: its figures are not held to goals)
    #: runs ``--repeats`` rounds there too
    least_rounds: int = 5

    def rounds(self) -> int:
        """Rounds of a row whose goal is a few per cent: ``repeats``, at least ``least_rounds``."""
        return max(self.repeats, self.least_rounds)


@dataclass
class Measure:
    """One figure: a value with its unit, or the reason it is missing."""

    label: str
    value: float | None = None
    unit: str = ""
    missing: str | None = None

    def text(self) -> str:
        """``label: value unit``; just ``value unit`` for our own figures (label ``ours``)."""
        if self.value is None:
            shown = self.missing or "n/a"
        else:
            shown = format_value(self.value, self.unit)
        return shown if self.label == "ours" else f"{self.label}: {shown}"


@dataclass
class Result:
    """A row of the table: our figure, the anchor's, the ratio and the goal."""

    row: str
    name: str
    figure: Measure
    anchor: Measure | None = None
    ratio: float | None = None
    ratio_text: str = "x anchor"
    goal: str = ""
    met: bool | None = None
    notes: list[str] = field(default_factory=list)
    error: bool = False

    @property
    def verdict(self) -> str:
        if self.error:
            return "error"
        return "n/a" if self.met is None else ("yes" if self.met else "NO")

    @property
    def ratio_str(self) -> str:
        return "n/a" if self.ratio is None else f"{self.ratio:.3g}{self.ratio_text}"


def format_value(value: float, unit: str) -> str:
    if unit == "bytes":
        return f"{value / MiB:,.1f} MiB"
    if unit == "s":
        return f"{value:,.3f} s"
    if unit == "%":
        return f"{value:.2f} %"
    if unit in ("", "x"):
        return f"{value:.3g}{unit}"
    if value >= 100:
        return f"{value:,.0f} {unit}"
    return f"{value:,.3g} {unit}"


def count(n: int) -> str:
    """A count for people: 200k, 1M, 10M."""
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return f"{n:,}"


def median(values: list[float]) -> float:
    return statistics.median(values)


def interleaved(repeats: int, runs: dict[str, Callable[[], Any]]) -> dict[str, list[Any]]:
    """Call every run once per round, ``repeats`` rounds, so drift hits them all alike."""
    out: dict[str, list[Any]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            out[name].append(run())
    return out


@contextmanager
def frozen_gc() -> Iterator[None]:
    """Move what exists now (the data set) out of the collector's way for the timed loops."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.collect()
