"""What a plain ``stream-perceptron run`` imports and what its start does with the collector
(issue 43: the command's start was a third of a 200k-record run's time)."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest

from stream_perceptron.cli._gc import imports_without_gc

#: The CLI run in a fresh interpreter, then which of the modules asked about it imported.
PROBE = (
    "import gc, sys\n"
    "from stream_perceptron.cli import main\n"
    "sys.argv = ['stream-perceptron', *sys.argv[1:]]\n"
    "code = main()\n"
    "print('imported:', sorted(m for m in {} if m in sys.modules), file=sys.stderr)\n"
    "print('gc:', gc.isenabled(), gc.get_freeze_count() > 0, file=sys.stderr)\n"
    "sys.exit(code)\n"
)
#: Modules a run on stdin without a checkpoint or a join does not need.
NOT_NEEDED = (
    "tempfile",  # writing a checkpoint or a summary file
    "ctypes",  # mallopt without the C extension (allocator.py)
    "ctypes.util",  # finding libc by another name than libc.so.6
    "stream_perceptron.engine.delayed",  # --join-key
    "stream_perceptron.engine.delayed_blocks",
    "stream_perceptron.join.blocks",
)


def _probe(data: bytes, *flags: str) -> list[str]:
    probe = PROBE.replace("{}", repr(NOT_NEEDED))
    done = subprocess.run(
        [sys.executable, "-c", probe, "run", "--quiet", *flags],
        input=data, capture_output=True, timeout=120, check=True,
    )  # fmt: skip
    return done.stderr.decode().strip().splitlines()[-2:]


def test_a_plain_run_leaves_the_join_and_the_file_writers_unimported() -> None:
    lines = b"".join(b'{"a": %d, "y": %d}\n' % (k, k % 2) for k in range(3000))
    imported, collector = _probe(lines, "--format", "jsonl")
    assert imported == "imported: []"
    assert collector == "gc: True True"  # back on, the modules frozen


def test_a_join_and_a_summary_file_bring_theirs_in(tmp_path) -> None:
    lines = b"".join(b'{"id": %d, "a": 1}\n{"id": %d, "y": 1}\n' % (k, k) for k in range(50))
    summary = str(tmp_path / "s.json")
    imported, _ = _probe(lines, "--format", "jsonl", "--join-key", "id", "--summary-json", summary)
    assert imported == f"imported: {sorted(m for m in NOT_NEEDED if not m.startswith('ctypes'))}"


@pytest.mark.parametrize("was_on", [True, False])
def test_the_collector_is_left_as_it_was(was_on: bool) -> None:
    before = gc.isenabled()
    try:
        (gc.enable if was_on else gc.disable)()
        with imports_without_gc():
            assert not gc.isenabled()
        assert gc.isenabled() is was_on
        with pytest.raises(ImportError), imports_without_gc():
            raise ImportError("a failed import")
        assert gc.isenabled() is was_on
    finally:
        (gc.enable if before else gc.disable)()
