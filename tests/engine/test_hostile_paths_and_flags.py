"""Hostile input, round three (issue 42): file flags naming no usable file (empty, in a missing
directory, a dangling symlink, a FIFO read whole), flags that did nothing, silent fallbacks
(a missing C tier, an incomplete pulled model). Each is refused up front, before any input is
read, with one line ``stream-perceptron: error: --flag PATH: reason``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import CLI, binary_examples, to_csv

DATA = to_csv(binary_examples(200, seed=42))
PULL = ["pull-model", "--bootstrap-servers", "127.0.0.1:1", "--model-topic", "models"]


def _cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None, code: str | None = None
) -> subprocess.CompletedProcess:
    """The command in ``cwd`` (its parent is where a stray temp file would land); ``code``:
    Python run before the command's ``main`` in the same process."""
    command = [*CLI, *args] if code is None else [
        sys.executable, "-c", f"{code}\nfrom stream_perceptron.cli import main\n"
        "sys.exit(main())", *args,
    ]  # fmt: skip
    return subprocess.run(
        command, input=DATA, cwd=cwd, capture_output=True, timeout=60, check=False,
        env={**os.environ, **(env or {})},
    )  # fmt: skip


def _refused(proc: subprocess.CompletedProcess, code: int, start: str, reason: str) -> None:
    """Exit ``code`` with one error line, ``start`` then ``reason``, nothing learned, no
    traceback."""
    err = proc.stderr.decode()
    assert proc.returncode == code, err
    errors = [line for line in err.splitlines() if line.startswith("stream-perceptron: error:")]
    assert len(errors) == 1, err
    assert errors[0].startswith(f"stream-perceptron: error: {start}: "), err
    assert reason in errors[0], err
    assert "Traceback" not in err and "learned " not in err and ".lock" not in err


def _no_temp_files(*dirs: Path) -> None:
    for d in dirs:
        assert not list(d.glob(".*.tmp")), list(d.iterdir())


@pytest.fixture
def wd(tmp_path: Path) -> Path:
    """The working directory of the command (``tmp_path`` is its parent)."""
    d = tmp_path / "wd"
    d.mkdir()
    (d / "data.csv").write_bytes(DATA)
    return d


#: every file flag of every command: (command line before it, flag, exit code of a bad path)
RUN = ["run", "--format", "csv"]
FILE_FLAGS = [
    (RUN, "--input", 2),
    (RUN, "--checkpoint", 2),
    ([*RUN, "--resume"], "--checkpoint", 2),
    (RUN, "--predictions", 2),
    (RUN, "--dead-letter", 2),
    (RUN, "--summary-json", 2),
    (RUN, "--model-topic-key-file", 2),
    (RUN, "--ssl-cafile", 2),
    (RUN, "--ssl-certfile", 2),
    (RUN, "--ssl-keyfile", 2),
    (["inspect"], "CHECKPOINT", 1),
    (PULL, "--output", 2),
    ([*PULL, "--output", "pulled.json"], "--model-topic-key-file", 2),
    ([*PULL, "--output", "pulled.json"], "--ssl-cafile", 2),
    ([*PULL, "--output", "pulled.json"], "--ssl-certfile", 2),
    ([*PULL, "--output", "pulled.json"], "--ssl-keyfile", 2),
]


def _ids(flags: list[tuple[list[str], str, int]]) -> list[str]:
    return [f"{b[0]}{'-resume' if '--resume' in b else ''}{f}" for b, f, _ in flags]


IDS = _ids(FILE_FLAGS)


def _with(before: list[str], flag: str, path: str) -> list[str]:
    return [*before, path] if flag == "CHECKPOINT" else [*before, flag, path]


# -- class 8: an empty path ------------------------------------------------------------------------
@pytest.mark.parametrize(("before", "flag", "code"), FILE_FLAGS, ids=IDS)
def test_an_empty_path_is_refused_up_front_for_every_file_flag(wd, before, flag, code):
    proc = _cli(*_with(before, flag, ""), cwd=wd)
    _refused(proc, code, f"{flag} ''", "an empty path")
    _no_temp_files(wd, wd.parent)


# -- class 9: a missing directory, a dangling symlink ----------------------------------------------
@pytest.mark.parametrize(("before", "flag", "code"), FILE_FLAGS, ids=IDS)
def test_a_path_in_a_missing_directory_is_refused_naming_it(wd, before, flag, code):
    path = str(wd / "nowhere" / "f.json")
    proc = _cli(*_with(before, flag, path), cwd=wd)
    reads = flag not in ("--checkpoint", "--predictions", "--dead-letter", "--summary-json",
                         "--output")  # fmt: skip
    _refused(proc, code, f"{flag} {path}", "does not exist" if reads else (
        f"the directory {wd / 'nowhere'} does not exist"
    ))
    assert not (wd / "nowhere").exists()


@pytest.mark.parametrize(("before", "flag", "code"), FILE_FLAGS, ids=IDS)
def test_a_dangling_symlink_into_a_missing_directory_is_refused_naming_its_target(
    wd, before, flag, code
):
    link = wd / "link.json"
    link.symlink_to(wd / "gone" / "f.json")
    proc = _cli(*_with(before, flag, str(link)), cwd=wd)
    _refused(proc, code, f"{flag} {link}", "is a symbolic link")
    assert "exists" not in proc.stderr.decode()
    assert str(wd / "gone") in proc.stderr.decode()


def test_a_dangling_symlink_to_a_new_checkpoint_is_written_through_not_called_existing(wd):
    link = wd / "model.json"
    link.symlink_to(wd / "models.json")  # the target's directory is there: a new file
    proc = _cli(*RUN, "--input", "data.csv", "--checkpoint", str(link), cwd=wd)
    assert proc.returncode == 0, proc.stderr.decode()
    assert link.is_symlink() and json.loads((wd / "models.json").read_text())["model"]
    _no_temp_files(wd, wd.parent)


# -- class 7: a FIFO where a file is read whole ----------------------------------------------------
READ_WHOLE = [(b, f, c) for b, f, c in FILE_FLAGS if f not in (
    "--input", "--predictions", "--dead-letter", "--summary-json"  # FIFOs are streamed
)]  # fmt: skip


@pytest.mark.parametrize(("before", "flag", "code"), READ_WHOLE, ids=_ids(READ_WHOLE))
def test_a_fifo_read_whole_is_refused_unopened_not_waited_on(wd, before, flag, code):
    fifo = wd / "x.fifo"
    os.mkfifo(fifo)
    proc = _cli(*_with(before, flag, str(fifo)), cwd=wd)  # before: inspect waited forever
    _refused(proc, code, f"{flag} {fifo}", "is a FIFO, not a regular file")
    assert fifo.is_fifo()


# -- class 10: flags that did nothing ------------------------------------------------------------
def test_rff_gamma_without_rff_components_is_a_usage_error_even_at_its_default(wd):
    proc = _cli(*RUN, "--input", "data.csv", "--rff-gamma", "1", cwd=wd)
    assert proc.returncode == 2 and b"error: --rff-gamma needs --rff-components" in proc.stderr


def test_on_drift_forget_on_a_resumed_model_without_an_average_is_a_usage_error(wd):
    ck = wd / "ck.json"
    first = _cli(*RUN, "--input", "data.csv", "--checkpoint", str(ck), cwd=wd)
    assert first.returncode == 0, first.stderr.decode()
    before = ck.read_bytes()
    proc = _cli(*RUN, "--input", "data.csv", "--checkpoint", str(ck), "--resume", "--averaged",
                "--on-drift", "forget", "--predictions", "p.jsonl", cwd=wd)  # fmt: skip
    _refused(proc, 2, "--on-drift forget restarts the average", "is not averaged")
    assert ck.read_bytes() == before and not (wd / "p.jsonl").exists()


# -- class 12a: a missing C tier is said, not silent ---------------------------------------------
NO_DENSE = "import sys; sys.modules['stream_perceptron._dense'] = None  # as if not built"


def test_a_missing_c_extension_is_said_once_by_run_and_shown_by_version(wd):
    proc = _cli(*RUN, "--input", "data.csv", cwd=wd, code=NO_DENSE)
    assert proc.returncode == 0, proc.stderr.decode()
    warnings = [line for line in proc.stderr.decode().splitlines() if "C tier" in line]
    assert len(warnings) == 1 and "dense (not built)" in warnings[0], proc.stderr.decode()
    assert "20-60x slower" in warnings[0] and "C compiler" in warnings[0]
    version = _cli("--version", cwd=wd, code=NO_DENSE).stdout.decode()
    assert "(C tier: speedups, features, drift; pure Python for the rest: dense not built)" in (
        version
    ), version
    full = _cli("--version", cwd=wd).stdout.decode()
    assert "(C tier: dense, speedups, features, drift)" in full, full
    asked = _cli(*RUN, "--input", "data.csv", cwd=wd, env={"STREAM_PERCEPTRON_NO_C": "1"})
    assert asked.returncode == 0
    assert asked.stderr.decode().count("turned off by STREAM_PERCEPTRON_NO_C") == 1
    quiet = _cli(*RUN, "--input", "data.csv", cwd=wd)
    assert b"C tier" not in quiet.stderr


# -- class 12b: an incomplete pulled model is an error unless allowed ----------------------------
def _model_topic(n_seen_counted: int) -> list[tuple[bytes, bytes]]:
    """A model topic whose mixture holds no example while its partition record counts
    ``n_seen_counted`` (a worker's increments lost)."""
    from stream_perceptron import Perceptron
    from stream_perceptron.sharing import Mixture, PartitionState

    mixture = Mixture(1, Perceptron().get_state(), "w0")
    part = PartitionState("t", 0, next_offset=n_seen_counted, n_seen=n_seen_counted, worker="w0")
    return [(part.key.encode(), part.encode()), (mixture.key.encode(), mixture.encode())]


@pytest.mark.parametrize("counted", [0, 100])
def test_pull_model_of_an_incomplete_model_exits_1_unless_allow_incomplete(
    tmp_path, monkeypatch, capsys, caplog, counted
):
    """The decision alone, with the Kafka part replaced (the broker test
    test_shared_model_guards.py::test_hostile_model_topic_records_stop_nothing checks it on
    a real topic)."""
    from stream_perceptron.cli import build_parser
    from stream_perceptron.cli import kafka as cli_kafka

    records = _model_topic(counted)

    class Log:  # the model topic, read whole
        def __init__(self, *_args: object, **_kwargs: object) -> None:
            pass

        def ensure(self, create: bool) -> None:
            assert not create

        def read_new(self) -> list[tuple[bytes, bytes]]:
            return records

        def close(self) -> None:
            pass

    monkeypatch.setattr(cli_kafka, "_model_log_class", lambda _client: Log)
    out = tmp_path / "pulled.json"
    args = build_parser().parse_args([*PULL, "--output", str(out), "-q"])
    code = cli_kafka.pull_model_command(args)
    err = capsys.readouterr().err
    if counted == 0:  # complete: written
        assert code == 0 and out.exists(), err
        return
    assert code == 1 and not out.exists(), err
    assert err.count("stream-perceptron: error:") == 1
    assert "the model holds 0 examples, the partition records count 100" in err
    assert "--allow-incomplete" in err
    args = build_parser().parse_args([*PULL, "--output", str(out), "--allow-incomplete", "-q"])
    assert cli_kafka.pull_model_command(args) == 0
    assert json.loads(out.read_text())["model"]["n_seen"] == 0
    assert "written anyway (--allow-incomplete)" in caplog.text


def test_read_json_refuses_a_fifo_without_waiting_for_a_writer(tmp_path):
    """The API's loader too (``load_checkpoint``, ``from_state`` callers), not only the CLI's
    up-front check: opening a FIFO for reading waits for a writer that never comes."""
    import threading

    from stream_perceptron.errors import StateError
    from stream_perceptron.state import read_json

    fifo = tmp_path / "model.json"
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []

    def read() -> None:
        try:
            read_json(fifo)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            outcome.append(exc)
        else:
            outcome.append(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10)
    if not outcome:  # still waiting: let it go by opening the other end
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(10)
        pytest.fail("read_json waited on a FIFO")
    assert isinstance(outcome[0], StateError) and "not a regular file" in str(outcome[0])
