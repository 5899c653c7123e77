"""The metrics server and the ``Host`` header (issue 42, class 11): RFC 9112 section 3.2 wants a
request with more than one ``Host`` or an invalid one answered 400 (a proxy and this server
could each read another one), and section 5.1 one with whitespace before a header's colon."""

from __future__ import annotations

import socket

import pytest

from stream_perceptron.metrics.http_server import MetricsHTTPServer

ROUTES = {"/metrics": lambda: (200, "text/plain", b"x" * 100)}


def _ask(port: int, request: bytes) -> bytes:
    """``request`` sent over a real socket; the whole answer (the server closes after it)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(request)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize("bind", ["127.0.0.1", "0.0.0.0"])
@pytest.mark.parametrize(
    "headers",
    [
        b"Host: 127.0.0.1\r\nHost: evil.example\r\n",  # the first was used
        b"Host: 127.0.0.1\r\nhost: 127.0.0.1\r\n",  # even the same twice
        b"Host :\r\n",  # whitespace before the colon: no Host was seen at all
        b"Host : 127.0.0.1\r\n",
        b"Host:\r\n",  # an empty host
        b"Host: 127.0.0.1:abc\r\n",  # a port that is not a number
        b"Host: ::1\r\n",  # an IPv6 address without its brackets
        b"Host: [not-v6]:9108\r\n",
        b"Host: 127.0.0.1 evil.example\r\n",
    ],
)
def test_two_or_an_invalid_host_header_is_a_bad_request(headers, bind):
    server = MetricsHTTPServer(ROUTES, host=bind)
    try:
        for end in (b"\r\n", b"\n"):  # CRLF and bare LF requests alike
            request = b"GET /metrics HTTP/1.1\r\n" + headers + b"\r\n"
            answer = _ask(server.port, request.replace(b"\r\n", end))
            assert answer.startswith(b"HTTP/1.1 400 Bad Request"), (headers, answer)
            assert not answer.endswith(b"x" * 100)
    finally:
        server.close()


@pytest.mark.parametrize(
    "headers",
    [b"Host: 127.0.0.1:9108\r\n", b"Host:localhost\r\n", b"Host: [::1]\r\n", b"",
     b"Host: 127.0.0.1:\r\n"],  # an empty port is RFC 3986's too
)  # fmt: skip
def test_one_valid_host_header_or_none_is_served(headers):
    server = MetricsHTTPServer(ROUTES)
    try:
        answer = _ask(server.port, b"GET /metrics HTTP/1.1\r\n" + headers + b"\r\n")
        assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"x" * 100), answer
    finally:
        server.close()
