"""Row 7: peak RSS of ``stream-perceptron run`` after 1M and after 10M piped records."""

from __future__ import annotations

from benchmarks.common import Context, Measure, MiB, Result, count, interleaved, median
from benchmarks.data import feed_repeated
from benchmarks.procs import Run, cli_command, run_command
from benchmarks.rows_stdin import check_summary

__all__ = ["row_memory"]


def row_memory(ctx: Context) -> list[Result]:
    small, large, block = ctx.sizes.memory_small, ctx.sizes.memory_large, ctx.sizes.memory_block
    summary = ctx.workdir / "summary-memory.json"
    cmd = [*cli_command(), "run", "--format", "csv", "--summary-json", str(summary)]

    def run(n: int) -> Run:
        # The lines are one block repeated, written into the pipe as the CLI reads it.
        return run_command(cmd, feed=feed_repeated(n, block), summary_path=summary)

    got = interleaved(ctx.repeats, {"small": lambda: run(small), "large": lambda: run(large)})

    def peak(name: str) -> float:
        return median([r.summary["peak_rss_bytes"] for r in got[name] if r.summary])

    rss_small, rss_large = peak("small"), peak("large")
    limit = 1.10 * rss_small + 10 * MiB
    large_rate = large / median([r.wall for r in got["large"]])
    notes = [
        f"limit {limit / MiB:,.1f} MiB; {count(large)} lines at {large_rate:,.0f} lines/s",
        f"input: a {count(block)}-line block repeated",
    ]
    notes += check_summary(got["small"][-1], small) + check_summary(got["large"][-1], large)
    return [
        Result(
            "7",
            f"memory: peak RSS (--summary-json peak_rss_bytes) after {count(large)}"
            f" vs {count(small)} piped CSV lines",
            Measure(f"after {count(large)}", rss_large, "bytes"),
            Measure(f"after {count(small)}", rss_small, "bytes"),
            rss_large / rss_small,
            ratio_text=f"x {count(small)}",
            goal=f"flat: {count(large)} <= 1.1 x {count(small)} + 10 MiB",
            met=rss_large <= limit,
            notes=notes,
        )
    ]
