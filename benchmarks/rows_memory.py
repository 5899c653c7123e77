"""Row 7: peak RSS of ``stream-perceptron run`` after 1M and after 10M piped records (7: CSV;
7b: sparse JSON lines, 20 of 200 names a record in any order, the sparse block path); row 10:
the same with ``--hash-bits 18`` over all-distinct feature names, 100k vs 5M records."""

from __future__ import annotations

from typing import IO, Any

from benchmarks.common import Context, Measure, MiB, Result, count, interleaved, median
from benchmarks.data import feed_repeated
from benchmarks.procs import Run, cli_command, run_command
from benchmarks.rows_stdin import check_summary

__all__ = ["row_memory", "row_memory_hashed", "row_memory_sparse"]


def row_memory(ctx: Context) -> list[Result]:
    block = ctx.sizes.memory_block
    return _memory_row(
        ctx, "7", "csv", "CSV lines", lambda n: feed_repeated(n, block),
        f"input: a {count(block)}-line block repeated",
    )  # fmt: skip


def row_memory_sparse(ctx: Context) -> list[Result]:
    """Row 7b: row 7 with sparse JSON lines (issue 43: memory per record flat over 10M sparse
    records); a bounded vocabulary, so the model stops growing."""
    from benchmarks.rows_shapes import SHAPES

    block = ctx.sizes.memory_block
    chunks, formats = SHAPES["sparse"]
    lines = b"".join(formats["jsonl"](*chunk) for chunk in chunks(block))
    rows = lines.splitlines(keepends=True)

    def feed(n: int) -> Any:
        def write(out: IO[bytes]) -> None:
            left = n
            while left >= block:
                out.write(lines)
                left -= block
            if left:
                out.write(b"".join(rows[:left]))

        return write

    return _memory_row(
        ctx, "7b", "jsonl", "sparse JSON records", feed,
        f"input: a {count(block)}-record block of sparse JSON lines repeated",
    )  # fmt: skip


def _memory_row(
    ctx: Context, row: str, fmt: str, what: str, feed: Any, input_note: str
) -> list[Result]:
    """Row 7's measure: peak RSS after ``memory_large`` vs ``memory_small`` piped records of
    ``fmt`` (``feed(n)``: a writer of n records)."""
    small, large = ctx.sizes.memory_small, ctx.sizes.memory_large
    summary = ctx.workdir / f"summary-memory-{row}.json"
    cmd = [*cli_command(), "run", "--format", fmt, "--summary-json", str(summary)]

    def run(n: int) -> Run:
        # The records are one block repeated, written into the pipe as the CLI reads it.
        return run_command(cmd, feed=feed(n), summary_path=summary)

    got = interleaved(ctx.repeats, {"small": lambda: run(small), "large": lambda: run(large)})

    def peak(name: str) -> float:
        return median([r.summary["peak_rss_bytes"] for r in got[name] if r.summary])

    rss_small, rss_large = peak("small"), peak("large")
    limit = 1.10 * rss_small + 10 * MiB
    large_rate = large / median([r.wall for r in got["large"]])
    notes = [
        f"limit {limit / MiB:,.1f} MiB; {count(large)} records at {large_rate:,.0f} records/s",
        input_note,
    ]
    return _flat_rss(
        row,
        f"memory: peak RSS (--summary-json peak_rss_bytes) after {count(large)}"
        f" vs {count(small)} piped {what}",
        got,
        (small, rss_small),
        (large, rss_large),
        f"1.1 x {count(small)} + 10 MiB",
        limit,
        notes,
    )


def _flat_rss(
    row: str,
    title: str,
    got: dict[str, list[Run]],
    small: tuple[int, float],
    large: tuple[int, float],
    bound: str,
    limit: float,
    notes: list[str],
) -> list[Result]:
    """The row saying whether the peak RSS after ``large[0]`` records (``large[1]`` bytes)
    stays within ``limit`` (``bound``) of the one after ``small[0]``; the notes gain the
    check of the last run of each size's summary."""
    (n_small, rss_small), (n_large, rss_large) = small, large
    notes = notes + check_summary(got["small"][-1], n_small)
    notes += check_summary(got["large"][-1], n_large)
    return [
        Result(
            row,
            title,
            Measure(f"after {count(n_large)}", rss_large, "bytes"),
            Measure(f"after {count(n_small)}", rss_small, "bytes"),
            rss_large / rss_small,
            ratio_text=f"x {count(n_small)}",
            goal=f"flat: {count(n_large)} <= {bound}",
            met=rss_large <= limit,
            notes=notes,
        )
    ]


def distinct_names_feed(n_records: int, per_record: int = 10) -> Any:
    """A writer of ``n_records`` JSON lines whose feature names are all distinct
    (``n<record>_<j>``, ``per_record`` each): an unbounded vocabulary."""

    def write(out: IO[bytes]) -> None:
        chunk: list[str] = []
        for i in range(n_records):
            fields = ", ".join(
                f'"n{i}_{j}": {((i * 7 + j * 3) % 19) / 10 - 0.9:.1f}' for j in range(per_record)
            )
            chunk.append(f'{{{fields}, "y": {(i * 31 + i // 7) % 2}}}\n')
            if len(chunk) == 10_000:
                out.write("".join(chunk).encode())
                chunk.clear()
        out.write("".join(chunk).encode())

    return write


def row_memory_hashed(ctx: Context) -> list[Result]:
    """Row 10: ``--hash-bits 18`` keeps the model's memory fixed however many distinct names."""
    small, large = ctx.sizes.hashed_small, ctx.sizes.hashed_large
    summary = ctx.workdir / "summary-hashed.json"
    cmd = [*cli_command(), "run", "--format", "jsonl", "--hash-bits", "18",
           "--summary-json", str(summary)]  # fmt: skip

    def run(n: int) -> Run:
        return run_command(cmd, feed=distinct_names_feed(n), summary_path=summary)

    # One run each: the large one takes minutes (the per-record path, every name new).
    got = {"small": [run(small)], "large": [run(large)]}
    rss_small = got["small"][0].summary["peak_rss_bytes"]  # type: ignore[index]
    rss_large = got["large"][0].summary["peak_rss_bytes"]  # type: ignore[index]
    limit = rss_small + 10 * MiB
    rate = large / got["large"][0].wall
    notes = [
        f"{count(large)} JSON lines x 10 features, every feature name distinct"
        f" ({count(10 * large)} names); {rate:,.0f} lines/s; one run each",
        f"limit {limit / MiB:,.1f} MiB (the small run + 10 MiB)",
    ]
    return _flat_rss(
        "10",
        f"memory with --hash-bits 18: peak RSS after {count(large)} vs {count(small)}"
        " records of all-distinct feature names",
        got,
        (small, rss_small),
        (large, rss_large),
        f"{count(small)} + 10 MiB",
        limit,
        notes,
    )
