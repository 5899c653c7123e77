"""A `stream-perceptron run` subprocess with a metrics port, fed by the test."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

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
        # its stderr read as it comes: a full pipe would stop the engine at its next log line
        # (a broker outage logs a line a retry), and a killed engine's says what it was doing
        self.stderr = bytearray()
        line = ""
        while "metrics on http://" not in line:  # earlier lines: -vv's debug lines
            line = self.proc.stderr.readline().decode()
            assert line, f"the engine printed no metrics address:\n{self.stderr.decode()}"
            self.stderr += line.encode()
        self.url = line.split("metrics on ", 1)[1].strip()
        self.target = self.url.removeprefix("http://").removesuffix("/metrics")
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()

    def _read_stderr(self) -> None:
        for chunk in iter(lambda: self.proc.stderr.read1(65536), b""):
            self.stderr += chunk

    def examples_total(self) -> float:
        """``stream_perceptron_examples_total`` as scraped now."""
        from prometheus_client.parser import text_string_to_metric_families

        with urllib.request.urlopen(self.url, timeout=5) as response:  # noqa: S310 (loopback)
            text = response.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "stream_perceptron_examples_total" and not sample.labels:
                    return sample.value
        return 0.0

    def wait_examples(self, n: int, timeout: float = 60) -> None:
        """Wait until the engine has learned ``n`` examples (its metrics say so)."""
        deadline = time.monotonic() + timeout
        while (got := self.examples_total()) != n:
            assert self.proc.poll() is None, f"the engine exited ({self.proc.returncode})"
            assert time.monotonic() < deadline, f"examples_total stuck at {got}, want {n}"
            time.sleep(0.05)

    def feed(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def finish(self, timeout: float = 60) -> tuple[int, bytes]:
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        self.proc.wait(timeout=timeout)
        self._reader.join(timeout=timeout)
        return self.proc.returncode, bytes(self.stderr)

    def kill(self, keep: Path | None = None) -> None:
        """Kill it (a test that failed): its stderr's tail is printed, shown with the failure,
        after every thread's stack (the CLI's SIGUSR1 handler writes them: where it was);
        ``keep``: the whole stderr is also written there (a failed soak run keeps its tmp dir)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGUSR1)
            time.sleep(1)
            self.proc.kill()
            self.proc.wait()
            self._reader.join(timeout=10)
            if keep is not None:
                keep.write_bytes(bytes(self.stderr))
                print(f"--- the killed engine's stderr, whole: {keep} ---")
            tail = bytes(self.stderr[-12000:]).decode(errors="replace")
            print(f"--- the killed engine's stderr, its last 12000 bytes ---\n{tail}")
