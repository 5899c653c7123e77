"""A `stream-perceptron run` subprocess with a metrics port, fed by the test."""

from __future__ import annotations

import os
import subprocess

from cli_helpers import CLI


class EngineProcess:
    """``stream-perceptron run`` with a metrics port, fed through a pipe the test controls."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [*CLI, "run", "--metrics-port", "0", *args],
            stdin=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        line = self.proc.stderr.readline().decode()
        assert "metrics on http://" in line, line
        self.url = line.split("metrics on ", 1)[1].strip()
        self.target = self.url.removeprefix("http://").removesuffix("/metrics")

    def feed(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def finish(self, timeout: float = 60) -> tuple[int, bytes]:
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        err = self.proc.stderr.read()
        self.proc.wait(timeout=timeout)
        return self.proc.returncode, err

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
