"""What a plain ``stream-perceptron run`` imports and what its start does with the collector
(issue 43: the command's start was a third of a 200k-record run's time), and what
``example-data`` leaves out (issue 41: a test of the docs' examples ran it a dozen times)."""

from __future__ import annotations

import gc
import io
import subprocess
import sys

import pytest

from stream_perceptron.cli._gc import imports_without, imports_without_gc

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


def test_example_data_leaves_scikit_learn_out_and_writes_the_same_rows() -> None:
    # river's data sets import scikit-learn where it is installed (here): 1.1 s of a 1.5 s
    # command, for a reader this command never uses
    probe = PROBE.replace("{}", repr(("sklearn",)))
    args = ["example-data", "bananas", "--format", "csv"]
    done = subprocess.run(
        [sys.executable, "-c", probe, *args], capture_output=True, timeout=120, check=True
    )
    assert "imported: []" in done.stderr.decode()
    import sklearn  # noqa: F401  # installed: the test means something only where it is

    from stream_perceptron.example_data import write_dataset

    written = io.StringIO()  # in this process, river's data sets imported with scikit-learn
    write_dataset("bananas", "csv", written)
    assert done.stdout.decode() == written.getvalue()
    assert written.getvalue().count("\n") == 5301  # the header and Bananas' 5,300 rows


def test_a_package_left_out_imports_again_after_the_block() -> None:
    name = "stream_perceptron_no_such_package_for_the_test"
    with imports_without(name), pytest.raises(ImportError):
        __import__(name)
    assert name not in sys.modules
    with imports_without("json"):  # imported already: left alone
        import json
    assert json.dumps([1]) == "[1]"
