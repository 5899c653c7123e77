"""``run --ui`` keeps its page up after the stream *ended* (``--ui-linger``), not after a stop
that was asked for: SIGTERM or Ctrl-C in the middle of a stream ends the process. Before, a
stop in the middle of the stream took the linger's path ("the live page stays up until
Ctrl-C") and a SIGTERM'd ``run --ui`` served on, forever: found as a process the docs
example test had stopped and left running (session 26)."""

from __future__ import annotations

import re
import signal
import subprocess
import time

import pytest
from cli_helpers import CLI


def _started(signum: int) -> tuple[subprocess.Popen, str]:
    """``run --ui`` (no linger limit) with its stdin open and a few records read; the signal
    sent once its page is up."""
    proc = subprocess.Popen([*CLI, "run", "--format", "csv", "--ui"], stdin=subprocess.PIPE,
                            stderr=subprocess.PIPE)  # fmt: skip
    assert proc.stdin is not None and proc.stderr is not None
    proc.stdin.write(b"a,b,y\n" + b"1,2,1\n3,-1,0\n" * 50)
    proc.stdin.flush()
    first = proc.stderr.readline().decode()
    assert re.search(r"live page on http://127\.0\.0\.1:\d+/", first), first
    time.sleep(0.5)  # the records read
    proc.send_signal(signum)
    return proc, first


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_in_the_middle_of_the_stream_ends_run_ui(signum: int) -> None:
    proc, _ = _started(signum)
    try:
        code = proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail("run --ui still serving 20 s after the stop:\n"
                    + proc.stderr.read().decode()[-2000:])  # type: ignore[union-attr]
    err = proc.stderr.read().decode()  # type: ignore[union-attr]
    assert code == 0, err
    assert "received: stopping after the current record" in err
    assert "stays up" not in err
    assert re.search(r"records\s+100\b", err), err  # what it read was counted (the summary)
