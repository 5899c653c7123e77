"""The metrics server against hostile clients (issue 29, classes 5 and 10): idle connections,
accept errors, foreign Host headers, HEAD, bare-LF requests, and an empty --metrics-host."""

from __future__ import annotations

import errno
import json
import logging
import os
import resource
import socket
import subprocess
import sys
import time

import pytest

from stream_perceptron.metrics.http_server import MetricsHTTPServer

ROUTES = {"/metrics": lambda: (200, "text/plain", b"x" * 100)}


def _ask(port: int, request: bytes, timeout: float = 5.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(request)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_idle_connections_hold_at_most_the_cap_and_scrapes_still_get_through():
    server = MetricsHTTPServer(ROUTES, max_connections=16, request_timeout=60)
    before = _fds()
    idle = []
    try:
        for _ in range(200):  # more than the cap, each silent for longer than a scrape's wait
            idle.append(socket.create_connection(("127.0.0.1", server.port), timeout=10))
        time.sleep(0.5)
        assert _fds() - before <= 200 + 16 + 2  # the clients' 200, the server's cap
        started = time.monotonic()
        answer = _ask(server.port, b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 20)
        assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"x" * 100)
        assert time.monotonic() - started < 10  # an idle client made room, not the 60 s timeout
    finally:
        for s in idle:
            s.close()
        server.close()


def test_accept_errors_back_off_and_are_logged_once(monkeypatch, caplog):
    calls = []

    def failing_accept(self):
        calls.append(time.monotonic())
        raise OSError(errno.EMFILE, "Too many open files")

    server = MetricsHTTPServer(ROUTES)
    try:
        with caplog.at_level(logging.DEBUG, logger="stream_perceptron.metrics.http_server"):
            monkeypatch.setattr(socket.socket, "accept", failing_accept)
            clients = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(3)]
            time.sleep(2.0)
            monkeypatch.undo()
        assert 1 <= len(calls) <= 8  # 0.1 + 0.2 + 0.4 + 0.8 s of pauses, not a spin
        warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1 and "EMFILE" in warnings[0].getMessage()
        answer = _ask(server.port, b"GET /metrics HTTP/1.1\r\n\r\n", 10)  # accepting again
        assert answer.startswith(b"HTTP/1.1 200")
        for c in clients:
            c.close()
    finally:
        server.close()


def test_a_run_under_a_low_fd_limit_survives_a_crowd_of_idle_connections(tmp_path):
    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))

    ck = tmp_path / "c.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "stream_perceptron.cli", "run", "--format", "csv",
         "--metrics-port", "0", "--checkpoint", str(ck), "--checkpoint-interval", "0.2"],
        stdin=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=low_limit,
    )  # fmt: skip
    idle = []
    try:
        assert proc.stdin is not None and proc.stderr is not None
        line = proc.stderr.readline()
        assert b"metrics on http://127.0.0.1:" in line, line
        port = int(line.rsplit(b":", 1)[1].split(b"/")[0])
        proc.stdin.write(b"a,y\n1,1\n")
        proc.stdin.flush()
        for _ in range(300):
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        time.sleep(1.5)
        proc.stdin.write(b"-1,0\n" * 50)
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
        err = proc.stderr.read()
        assert b"Too many open files" not in err, err.decode()
        assert err.count(b"cannot accept") <= 1
        assert json.loads(ck.read_text())["model"]["n_seen"] == 51
    finally:
        for s in idle:
            s.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_foreign_host_is_refused_on_loopback_and_answers_carry_security_headers():
    server = MetricsHTTPServer(ROUTES)
    try:
        for host in (b"evil.example", b"evil.example:80", b"10.0.0.1"):
            answer = _ask(server.port, b"GET /metrics HTTP/1.1\r\nHost: " + host + b"\r\n\r\n")
            assert answer.startswith(b"HTTP/1.1 403"), (host, answer)
        for host in (b"127.0.0.1", b"localhost:9108", b"[::1]:9108", b"LOCALHOST"):
            answer = _ask(server.port, b"GET /metrics HTTP/1.1\r\nhost: " + host + b"\r\n\r\n")
            assert answer.startswith(b"HTTP/1.1 200"), (host, answer)
            head = answer.split(b"\r\n\r\n", 1)[0]
            assert b"\r\nX-Content-Type-Options: nosniff\r\n" in head
            assert b"\r\nContent-Security-Policy: default-src 'none';" in head
    finally:
        server.close()


def test_any_host_is_served_when_bound_to_every_interface():
    server = MetricsHTTPServer(ROUTES, host="0.0.0.0")
    try:
        answer = _ask(server.port, b"GET /metrics HTTP/1.1\r\nHost: engine:9108\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 200")
    finally:
        server.close()


def test_head_gives_the_length_of_the_body_without_it_and_bare_lf_requests_are_answered():
    server = MetricsHTTPServer(ROUTES, request_timeout=30)
    try:
        answer = _ask(server.port, b"HEAD /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert b"\r\nContent-Length: 100\r\n" in answer and answer.endswith(b"\r\n\r\n")
        started = time.monotonic()
        answer = _ask(server.port, b"GET /metrics HTTP/1.1\nHost: 127.0.0.1\n\n")
        assert answer.startswith(b"HTTP/1.1 200") and time.monotonic() - started < 2
    finally:
        server.close()


@pytest.mark.parametrize("host", ["", " ", "[::1]"])
def test_an_empty_metrics_host_is_a_usage_error(host):
    proc = subprocess.run(
        [sys.executable, "-m", "stream_perceptron.cli", "run", "--format", "csv",
         "--metrics-port", "0", "--metrics-host", host],
        input=b"a,y\n1,1\n", capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and b"error: argument --metrics-host" in proc.stderr
    assert b"http://:" not in proc.stderr
