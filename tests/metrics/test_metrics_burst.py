"""The metrics server under a burst of scrapes and a crowd of half-open connections."""

from __future__ import annotations

import socket
import threading
import time

from connectors import MemorySource
from stream_perceptron import Perceptron
from stream_perceptron.engine import Engine
from stream_perceptron.formats import make_parser
from stream_perceptron.metrics import MetricsExporter
from stream_perceptron.metrics.http_server import MetricsHTTPServer

REQUEST = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def _burst(port: int, scrapes: int, half_open: int, timeout: float = 60.0) -> list[bytes]:
    """Open ``half_open`` connections that never finish their request, then ``scrapes``
    connections that all send a whole request before any answer is read; the answers."""
    idle = []
    for _ in range(half_open):
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        s.sendall(b"GET /metr")
        idle.append(s)
    conns = [socket.create_connection(("127.0.0.1", port), timeout=timeout) for _ in range(scrapes)]
    for s in conns:
        s.sendall(REQUEST)
    answers = []
    for s in conns:
        chunks = []
        try:
            while chunk := s.recv(65536):
                chunks.append(chunk)
        except OSError:
            pass
        answers.append(b"".join(chunks))
        s.close()
    for s in idle:
        s.close()
    return answers


def test_every_scrape_of_a_burst_is_answered_with_bounded_threads():
    engine = Engine(Perceptron(), make_parser("csv"))
    engine.run(MemorySource([b"a,y", b"1,1", b"-1,0"]))
    exporter = MetricsExporter(engine)
    port = exporter.serve(0)
    before = threading.active_count()
    peak = [before]
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], threading.active_count())
            time.sleep(0.01)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        answers = _burst(port, scrapes=1000, half_open=200)
    finally:
        done.set()
        watcher.join()
        exporter.close()
    ok = [a for a in answers if a.startswith(b"HTTP/1.1 200") and b"examples_total 2.0" in a]
    assert len(ok) == 1000
    assert peak[0] <= before + 1 + 4  # the watcher and at most the pool's 4 workers


def test_requests_that_never_complete_are_dropped_after_the_timeout():
    server = MetricsHTTPServer({"/metrics": lambda: (200, "text/plain", b"x")}, request_timeout=0.3)
    try:
        s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        s.sendall(b"GET /metrics HTTP/1.1\r\n")  # no blank line: never complete
        assert s.recv(100) == b""  # closed by the server after about 0.3 s
        s.close()
        bad = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        bad.sendall(b"x" * 9000)  # over the 8 KiB a request may have
        assert bad.recv(100) == b""
        bad.close()
    finally:
        server.close()


def test_unknown_paths_and_methods():
    server = MetricsHTTPServer({"/metrics": lambda: (200, "text/plain", b"x")})
    try:
        for request, status in (
            (b"GET /nope HTTP/1.1\r\n\r\n", b"404"),
            (b"POST /metrics HTTP/1.1\r\n\r\n", b"405"),
            (b"garbage\r\n\r\n", b"400"),
            (b"GET /metrics?name[]=x HTTP/1.0\r\n\r\n", b"200"),
        ):
            s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            s.sendall(request)
            assert s.recv(100).split()[1] == status
            s.close()
    finally:
        server.close()
