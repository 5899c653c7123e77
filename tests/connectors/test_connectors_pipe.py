"""LineSource reading a real OS pipe in a child process."""

from __future__ import annotations

import os
import select
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

COUNT_SCRIPT = """
import sys
from connectors import open_line_source
lines = size = 0
with open_line_source("-") as source:
    for batch in source.batches():
        lines += len(batch)
        size += sum(len(r.value) for r in batch)
sys.stdout.write(f"{lines} {size}")
"""

ECHO_SCRIPT = """
import sys
from connectors import open_line_source
with open_line_source("-") as source:
    for batch in source.batches():
        for r in batch:
            sys.stdout.write(f"{r.position}={r.value.decode()}\\n")
        sys.stdout.flush()
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def test_counts_lines_through_a_real_pipe() -> None:
    n = 200_000
    payload = b"".join(b"%d,%d\r\n" % (i, i * 7) for i in range(n - 1)) + b"last"
    expected_size = len(payload) - 2 * (n - 1)
    result = subprocess.run(
        [sys.executable, "-c", COUNT_SCRIPT],
        input=payload,
        capture_output=True,
        cwd=ROOT,
        env=_env(),
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode() == f"{n} {expected_size}"


def _read_line(fd: int, timeout: float) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], timeout)
        assert ready, f"no complete line within {timeout}s (got {data!r})"
        chunk = os.read(fd, 4096)
        assert chunk, f"child closed its stdout early (got {data!r})"
        data += chunk
    return data


def test_pipe_delivers_each_line_without_waiting_for_a_full_chunk() -> None:
    # The child uses the default 1 MiB chunk size; each line must still come
    # out as soon as it was written, while stdin stays open.
    with subprocess.Popen(
        [sys.executable, "-c", ECHO_SCRIPT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=_env(),
    ) as child:
        assert child.stdin is not None and child.stdout is not None
        try:
            fd = child.stdout.fileno()
            child.stdin.write(b"hello\n")
            child.stdin.flush()
            assert _read_line(fd, 30) == b"stdin@0=hello\n"
            child.stdin.write(b"wor")
            child.stdin.flush()
            child.stdin.write(b"ld\r\nend")
            child.stdin.flush()
            assert _read_line(fd, 30) == b"stdin@1=world\n"
            child.stdin.close()
            assert _read_line(fd, 30) == b"stdin@2=end\n"
            assert child.wait(timeout=30) == 0
        finally:
            if child.poll() is None:
                child.kill()
