"""Real servers for tests, on loopback: Prometheus and the Pushgateway (Debian packages)."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import needs


def free_port() -> int:
    """A free loopback port outside the kernel's range for outgoing connections
    (:func:`kafka_broker.free_port`)."""
    from kafka_broker import free_port as below_ephemeral

    return below_ephemeral()


def http_get(url: str, timeout: float = 5.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (loopback)
        return response.read()


def wait_http(url: str, timeout: float = 60.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            http_get(url, timeout=2)
            return
        except (urllib.error.URLError, ConnectionError, OSError):
            if proc is not None and proc.poll() is not None:
                msg = f"server exited with {proc.returncode} before {url} answered"
                raise RuntimeError(msg) from None
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not answer within {timeout} s") from None
            time.sleep(0.2)


def require(binary: str, package: str) -> str:
    path = shutil.which(binary)
    if path is None:
        raise RuntimeError(
            f"{binary} not found: install the Debian package {package} "
            "(scripts/install-system-deps.sh does, and make test runs it)"
        )
    return path


@contextmanager
def prometheus_server(
    workdir: Path, targets: list[str], scrape_interval: str = "1s", config_text: str | None = None
) -> Iterator[str]:
    """A real Prometheus scraping ``targets`` (host:port), or run with ``config_text`` as its
    whole configuration; yields its base URL."""
    binary = require("prometheus", "prometheus")
    port = free_port()
    config = workdir / "prometheus.yml"
    config.write_text(
        config_text
        or "global:\n"
        f"  scrape_interval: {scrape_interval}\n"
        f"  evaluation_interval: {scrape_interval}\n"
        "scrape_configs:\n"
        "  - job_name: stream-perceptron\n"
        "    static_configs:\n"
        f"      - targets: {json.dumps(targets)}\n"
    )
    args = [f"--config.file={config}", f"--storage.tsdb.path={workdir / 'tsdb'}"]
    with _serve([binary, *args], port, workdir / "prometheus.log") as url:
        yield url


def query(prometheus_url: str, promql: str) -> list[dict[str, Any]]:
    """Instant query through Prometheus' HTTP API; returns the result vector."""
    q = urllib.parse.urlencode({"query": promql})
    body = json.loads(http_get(f"{prometheus_url}/api/v1/query?{q}"))
    assert body["status"] == "success", body
    return body["data"]["result"]


def wait_query(prometheus_url: str, promql: str, timeout: float = 60.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        result = query(prometheus_url, promql)
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"Prometheus returned nothing for {promql!r} in {timeout} s")
        time.sleep(0.5)


@contextmanager
def pushgateway_server(workdir: Path) -> Iterator[str]:
    """A real Prometheus Pushgateway; yields its base URL."""
    binary = require("prometheus-pushgateway", "prometheus-pushgateway")
    with _serve([binary], free_port(), workdir / "pushgateway.log") as url:
        yield url


@contextmanager
def _serve(command: list[str], port: int, log_path: Path) -> Iterator[str]:
    """Run a Prometheus-family server on 127.0.0.1:port until it is ready; yield its URL."""
    needs.require("services")
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [*command, f"--web.listen-address=127.0.0.1:{port}"],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            wait_http(f"{url}/-/ready", proc=proc)
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=30)
