"""A small HTTP server for ``/metrics`` that answers every scrape of a burst with bounded threads.

prometheus_client's ``start_http_server`` (a ``ThreadingWSGIServer``) listens with a backlog of 5
and starts a thread per connection. Measured here with the burst of
``tests/metrics/test_metrics_burst.py`` (200 half-open connections, then 1,000 scrapes sent
before any answer is read): prometheus_client answered all 1,000 but only after 184 s, with
1,198 threads at the peak (clients with a shorter timeout saw 295 of 1,000 time out); this server
answered all 1,000 in 0.5 s with 6 threads. Here one selector thread accepts connections and reads
requests without blocking (a listen backlog of 1,024; a request must arrive whole within
``request_timeout`` seconds and fit in 8 KiB, or the connection is closed), and only complete
requests go to a fixed pool of ``workers`` threads that build the exposition and send it. Slow
or silent clients therefore cost a buffer, never a thread.

Hostile clients (issue 29) cost at most ``max_connections`` file descriptors: at the cap, a new
connection takes the place of the oldest one still without a whole request after 0.25 s, and
otherwise the server stops accepting (the kernel's backlog holds the others) until one
is done. When ``accept`` itself fails (out of file descriptors) the server backs off (0.1 s,
doubling to 5 s) instead of spinning, and logs each reason once. A request ends at its blank
line, CRLF or bare LF. Bound to a loopback address, a request naming another ``Host`` (a DNS
rebinding page in a browser) is refused with 403; two ``Host`` headers, an invalid one (an
empty host, a port that is not a number) or whitespace before a header's colon, with 400
(RFC 9112 sections 3.2 and 5.1). Every answer says ``nosniff`` and carries a
Content-Security-Policy that lets the live page run its own inline code and nothing else;
``HEAD`` answers the ``Content-Length`` ``GET`` would have.
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import re
import resource
import selectors
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

__all__ = ["MetricsHTTPServer", "Response", "default_max_connections", "is_loopback"]

logger = logging.getLogger(__name__)

#: ``(status, content type, body)``
Response = tuple[int, str, bytes]

_REASONS = {200: "OK", 400: "Bad Request", 403: "Forbidden", 404: "Not Found"}
_REASONS[405] = "Method Not Allowed"
_MAX_REQUEST_BYTES = 8192
_SECURITY_HEADERS = (
    "X-Content-Type-Options: nosniff\r\n"
    "Content-Security-Policy: default-src 'none'; script-src 'unsafe-inline'; "
    "style-src 'unsafe-inline'; img-src data:; connect-src 'self'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'\r\n"
    "Cache-Control: no-store\r\n"
)
_BACKOFF_FIRST, _BACKOFF_MAX = 0.1, 5.0
#: At the connection cap, a connection that sent no whole request for this long makes room.
_IDLE_GRACE = 0.25


def default_max_connections() -> int:
    """256, or a quarter of the process's file descriptor limit when that is lower (at least
    8): the engine keeps the rest for its files, checkpoints and Kafka connections."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 256
    return max(8, min(256, soft // 4))


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, without a port) is this machine's loopback.

    Examples
    --------
    >>> [is_loopback(h) for h in ("localhost", "127.0.0.2", "::1", "0.0.0.0", "evil.example")]
    [True, True, True, False, False]

    """
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# RFC 3986's host [":" port]: an IP literal in brackets, or a name or IPv4 address (reg-name)
_HOST = re.compile(r"(?:\[([0-9A-Fa-f:.]+)\]|[A-Za-z0-9\-._~%!$&'()*+,;=]+)(?::[0-9]*)?")


def _request_host(header_lines: list[bytes]) -> tuple[str | None, str | None]:
    """The request's ``Host`` value (None without one) and why it must be answered 400 (None:
    it need not): more than one ``Host``, an invalid one, or whitespace between a header's name
    and its colon (a second Host a proxy and this server could read differently).

    Examples
    --------
    >>> _request_host([b"Host: 127.0.0.1:9108"])
    ('127.0.0.1:9108', None)
    >>> [_request_host(h)[1] for h in ([b"Host: a", b"host: b"], [b"Host :"], [b"Host: a:x"])]
    ['more than one Host header', 'whitespace before a header colon', 'an invalid Host header']

    """
    hosts = []
    for line in header_lines:
        name, colon, value = line.partition(b":")
        if not colon:
            continue
        if name != name.strip(b" \t"):
            return None, "whitespace before a header colon"
        if name.lower() == b"host":
            hosts.append(value.strip(b" \t").decode("latin-1"))
    if not hosts:
        return None, None
    if len(hosts) > 1:
        return None, "more than one Host header"
    match = _HOST.fullmatch(hosts[0])
    if match is None or (match[1] is not None and not _is_ipv6(match[1])):
        return None, "an invalid Host header"
    return hosts[0], None


def _is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def _host_name(header: str) -> str:
    """The host of a ``Host`` header value, without its port or IPv6 brackets."""
    header = header.strip()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class MetricsHTTPServer:
    """Serves ``GET`` requests from ``routes`` (path -> function giving the response).

    Parameters
    ----------
    routes
        Paths without the query string (``"/metrics"``) and what answers them.
    max_connections
        Connections held at once (file descriptors the server may use), reading or answered;
        default :func:`default_max_connections`.
    host, port
        Where to listen (port 0: any free port; :attr:`port` says which).
    workers
        Threads that build and send responses.
    request_timeout
        Seconds a connection has to send its whole request, and a response to be sent.

    Examples
    --------
    >>> import urllib.request
    >>> server = MetricsHTTPServer({"/ping": lambda: (200, "text/plain", b"pong")})
    >>> urllib.request.urlopen(f"http://127.0.0.1:{server.port}/ping").read()
    b'pong'
    >>> server.close()

    """

    def __init__(
        self,
        routes: dict[str, Callable[[], Response]],
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        workers: int = 4,
        request_timeout: float = 10.0,
        backlog: int = 1024,
        max_connections: int | None = None,
    ) -> None:
        self.routes = routes
        self.request_timeout = request_timeout
        self.max_connections = default_max_connections() if max_connections is None else (
            max_connections
        )
        self._loopback_only = is_loopback(host)  # then only a loopback Host is served
        self._answering = 0  # connections handed to the workers, not yet closed
        self._answering_lock = threading.Lock()
        self._listening = True
        self._backoff = _BACKOFF_FIRST
        self._resume_at = 0.0  # accepting waits until then after an accept error
        self._logged: set[int] = set()  # accept errors already logged (errno)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._listener = socket.socket(family, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((host, port))
        self._listener.listen(backlog)
        self._listener.setblocking(False)
        self.port: int = self._listener.getsockname()[1]
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="metrics-http")
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ, None)
        # connection -> (bytes so far, deadline)
        self._pending: dict[socket.socket, tuple[bytearray, float]] = {}
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="metrics-http-accept", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop accepting, drop unfinished requests, let answers in progress finish."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._thread.join(timeout=5)
        self._pool.shutdown(wait=False)

    # -- the selector thread -------------------------------------------------------------------
    def _loop(self) -> None:
        try:
            while not self._closed.is_set():
                for key, _ in self._selector.select(timeout=0.2):
                    if key.fileobj is self._listener:
                        self._accept()
                    else:
                        self._read(key.fileobj)  # type: ignore[arg-type]
                now = time.monotonic()
                self._expire(now)
                self._listen(now >= self._resume_at and self._room(now))
        finally:
            for conn in list(self._pending):
                self._drop(conn)
            self._selector.close()
            self._listener.close()

    def _stale(self, now: float) -> socket.socket | None:
        """The connection that has waited longest for its request, if over ``_IDLE_GRACE``."""
        if not self._pending:
            return None
        oldest = min(self._pending, key=lambda c: self._pending[c][1])
        waited = now - (self._pending[oldest][1] - self.request_timeout)
        return oldest if waited > _IDLE_GRACE else None

    def _room(self, now: float) -> bool:
        """Whether a connection may be accepted now (perhaps in the place of an idle one)."""
        held = len(self._pending) + self._answering
        return held < self.max_connections or self._stale(now) is not None

    def _listen(self, on: bool) -> None:
        if on != self._listening:
            if on:
                self._selector.register(self._listener, selectors.EVENT_READ, None)
            else:
                self._selector.unregister(self._listener)
            self._listening = on

    def _accept(self) -> None:
        for _ in range(64):  # a burst: take what is queued, then serve the others
            if len(self._pending) + self._answering >= self.max_connections:
                idle = self._stale(time.monotonic())
                if idle is None:
                    return  # all busy or just arrived: the kernel's backlog holds the others
                # its whole request may be waiting unread in its buffer (sent while this
                # thread had no CPU): read it first, and only a client still without one
                # makes room (tests/metrics/test_metrics_burst.py)
                self._read(idle)
                if idle not in self._pending:
                    continue
                self._drop(idle)
            try:
                conn, _addr = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:  # out of file descriptors: back off, leave it in the backlog
                self._resume_at = time.monotonic() + self._backoff
                self._backoff = min(self._backoff * 2, _BACKOFF_MAX)
                code = e.errno or 0
                log = logger.debug if code in self._logged else logger.warning
                self._logged.add(code)
                pause = self._resume_at - time.monotonic()
                reason = errno.errorcode.get(code, str(code))
                log("metrics server cannot accept connections (%s: %s): pausing %.1f s (each "
                    "reason logged once)", reason, e.strerror, pause)  # fmt: skip
                self._listen(False)
                return
            self._backoff = _BACKOFF_FIRST
            conn.setblocking(False)
            self._pending[conn] = (bytearray(), time.monotonic() + self.request_timeout)
            self._selector.register(conn, selectors.EVENT_READ, None)

    def _read(self, conn: socket.socket) -> None:
        try:
            chunk = conn.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._drop(conn)
            return
        buffer, _deadline = self._pending[conn]
        buffer += chunk
        ends = [i for i in (buffer.find(b"\r\n\r\n"), buffer.find(b"\n\n")) if i >= 0]
        if not ends:
            if len(buffer) > _MAX_REQUEST_BYTES:
                self._drop(conn)
            return
        self._selector.unregister(conn)
        del self._pending[conn]
        lines = [line.rstrip(b"\r") for line in bytes(buffer[: min(ends)]).split(b"\n")]
        host, problem = _request_host(lines[1:])
        with self._answering_lock:
            self._answering += 1
        self._pool.submit(self._answer, conn, lines[0], host, problem)

    def _expire(self, now: float) -> None:
        for conn, (_buffer, deadline) in list(self._pending.items()):
            if now > deadline:
                self._drop(conn)

    def _drop(self, conn: socket.socket) -> None:
        self._pending.pop(conn, None)
        try:
            self._selector.unregister(conn)
        except (KeyError, ValueError):
            pass
        conn.close()

    # -- the workers ---------------------------------------------------------------------------
    def _answer(
        self,
        conn: socket.socket,
        request_line: bytes,
        host: str | None = None,
        problem: str | None = None,
    ) -> None:
        try:
            status, content_type, body = self._respond(request_line, host, problem)
            head = (
                f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
                f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
                f"{_SECURITY_HEADERS}Connection: close\r\n\r\n"
            ).encode("ascii")
            conn.settimeout(self.request_timeout)
            conn.sendall(head if request_line.startswith(b"HEAD ") else head + body)
        except OSError as e:
            logger.debug("metrics client went away: %s", e)
        except Exception:  # a failing route must not kill the worker thread
            logger.exception("metrics request %r failed", request_line[:200])
        finally:
            conn.close()
            with self._answering_lock:
                self._answering -= 1

    def _respond(
        self, request_line: bytes, host: str | None = None, problem: str | None = None
    ) -> Response:
        parts = request_line.split()
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/"):
            return 400, "text/plain; charset=utf-8", b"bad request\n"
        if problem is not None:
            return 400, "text/plain; charset=utf-8", f"bad request: {problem}\n".encode()
        if self._loopback_only and host is not None and not is_loopback(_host_name(host)):
            # a page of another site whose name now resolves to 127.0.0.1 (DNS rebinding)
            return 403, "text/plain; charset=utf-8", b"this server answers loopback hosts only\n"
        method, target = parts[0], parts[1].decode("latin-1")
        route = self.routes.get(target.split("?", 1)[0])
        if route is None:
            return 404, "text/plain; charset=utf-8", b"not found\n"
        if method not in (b"GET", b"HEAD"):
            return 405, "text/plain; charset=utf-8", b"only GET\n"
        return route()  # HEAD: the same head, Content-Length included; _answer sends no body
