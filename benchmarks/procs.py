"""Running whole commands: the CLI and Vowpal Wabbit behind a real pipe, timed end to end."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

__all__ = [
    "CommandFailed",
    "Run",
    "cli_command",
    "cli_help",
    "run_command",
    "shell_pipeline",
    "vw_command",
    "VW_MISSING",
]

VW_MISSING = "skipped: vowpalwabbit not installed"


class CommandFailed(RuntimeError):
    """A benchmarked command exited non-zero."""


@dataclass
class Run:
    """A finished command: its wall time, its ``--summary-json`` (if asked) and stderr."""

    wall: float
    summary: dict[str, Any] | None
    stderr: list[str] = field(default_factory=list)


def cli_command() -> list[str]:
    """``stream-perceptron``: the console script next to this interpreter, else ``-m``."""
    script = Path(sys.executable).parent / "stream-perceptron"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "stream_perceptron.cli"]


def cli_help(*args: str) -> str:
    done = subprocess.run(
        [*cli_command(), *args, "--help"], capture_output=True, text=True, timeout=60
    )
    return done.stdout + done.stderr


def vw_command() -> list[str] | None:
    """Vowpal Wabbit reading stdin: a ``vw`` binary, else the Python package's ``-m`` runner.

    The package's runner cannot read stdin itself (it says so), hence ``-d /dev/stdin``, which
    reads the same pipe.
    """
    common = ["--loss_function", "hinge", "--quiet", "-d", "/dev/stdin"]
    binary = shutil.which("vw") or shutil.which("vw", path=str(Path(sys.executable).parent))
    if binary:
        return [binary, *common]
    if importlib.util.find_spec("vowpalwabbit") is not None:
        return [sys.executable, "-m", "vowpalwabbit", *common]
    return None


def shell_pipeline(cmd: list[str], input_path: Path | None, fed: bool) -> list[str]:
    """``cmd`` as ``sh`` runs it in ``cat FILE | cmd``, ``cat | cmd`` or ``cmd < /dev/null``.

    The shell forks the command rather than us: a process spawned straight from this (large)
    Python process inherits its peak RSS across ``exec`` on Linux (``ru_maxrss``), which would
    inflate the CLI's ``peak_rss_bytes``. A pipeline also makes stdin a real pipe.
    """
    if input_path is not None:
        return ["sh", "-c", 'f=$1; shift; cat "$f" | "$@"', "sh", str(input_path), *cmd]
    if fed:
        return ["sh", "-c", 'cat | "$@"', "sh", *cmd]
    return ["sh", "-c", '"$@" </dev/null & wait $!', "sh", *cmd]


def run_command(
    cmd: list[str],
    *,
    input_path: Path | None = None,
    feed: Callable[[IO[bytes]], None] | None = None,
    summary_path: Path | None = None,
    on_stderr_line: Callable[[str], None] | None = None,
    env: dict[str, str] | None = None,
) -> Run:
    """Run ``cmd`` to its end and time it, wall clock, start to exit.

    Its stdin is a real pipe: from ``cat input_path`` (as in ``cat data | cmd``), from a thread
    calling ``feed(pipe)`` (through ``cat``), or nothing. Stderr is read line by line as it
    comes.
    """
    if summary_path is not None and summary_path.exists():
        summary_path.unlink()
    stderr: list[str] = []
    feeder: threading.Thread | None = None
    # the interpreters may cache their bytecode, as on a user's machine: with
    # PYTHONDONTWRITEBYTECODE set, each run compiled the package anew (about 70 ms of row 4a's
    # 0.7 s); an empty value turns it off
    full_env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "", **(env or {})}
    started = time.perf_counter()
    proc = subprocess.Popen(
        shell_pipeline(cmd, input_path, feed is not None),
        stdin=subprocess.PIPE if feed is not None else subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=full_env,
    )
    if feed is not None:
        feeder = threading.Thread(target=_feed, args=(feed, proc.stdin), daemon=True)
        feeder.start()
    reader = threading.Thread(
        target=_read_lines, args=(proc.stderr, stderr, on_stderr_line), daemon=True
    )
    reader.start()
    rc = proc.wait()
    wall = time.perf_counter() - started
    reader.join()
    if feeder is not None:
        feeder.join()
    if rc != 0:
        tail = "".join(stderr[-5:]).strip()
        raise CommandFailed(f"{' '.join(cmd[:3])} ... exited {rc}: {tail}")
    summary = None
    if summary_path is not None:
        summary = json.loads(summary_path.read_text())
    return Run(wall, summary, stderr)


def _feed(feed: Callable[[IO[bytes]], None], pipe: IO[bytes]) -> None:
    try:
        feed(pipe)
    except BrokenPipeError:
        pass
    finally:
        try:
            pipe.close()
        except BrokenPipeError:
            pass


def _read_lines(stream: IO[bytes], into: list[str], callback: Callable[[str], None] | None) -> None:
    for raw in stream:
        line = raw.decode("utf-8", "replace")
        into.append(line)
        if callback is not None:
            callback(line)
    stream.close()
