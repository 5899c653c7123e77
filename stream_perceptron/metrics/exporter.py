"""Serving metrics over HTTP and pushing them to a Prometheus Pushgateway."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Histogram,
    generate_latest,
    push_to_gateway,
)

from stream_perceptron.metrics.collector import PREFIX, EngineCollector
from stream_perceptron.metrics.http_server import MetricsHTTPServer, Response
from stream_perceptron.metrics.live import PAGE, LiveState

__all__ = ["MetricsExporter"]

logger = logging.getLogger(__name__)

BATCH_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class MetricsExporter:
    """Owns a registry for one engine: HTTP ``/metrics`` and/or periodic Pushgateway pushes.

    Parameters
    ----------
    engine
        The engine whose metrics are exported.
    registry
        The registry to fill (a new one by default; never the global default registry).
    max_weights
        Weight series exposed.
    kafka
        Optional callable giving Kafka consumer state (see :class:`EngineCollector`).
    describe
        What the run watches (``source``, ``format``), shown by the live page.

    Examples
    --------
    >>> from stream_perceptron import Perceptron
    >>> from stream_perceptron.engine import Engine
    >>> from stream_perceptron.formats import make_parser
    >>> from connectors import MemorySource
    >>> engine = Engine(Perceptron(), make_parser("csv"))
    >>> exporter = MetricsExporter(engine)
    >>> _ = engine.run(MemorySource([b"a,y", b"1,1", b"2,1"]))
    >>> exporter.registry.get_sample_value("stream_perceptron_examples_total")
    2.0

    """

    def __init__(
        self,
        engine: Any,
        registry: CollectorRegistry | None = None,
        max_weights: int = 50,
        kafka: Any = None,
        describe: dict[str, Any] | None = None,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.live = LiveState(engine, describe, max_weights=min(max_weights, 20), kafka=kafka)
        self.registry.register(EngineCollector(engine, max_weights=max_weights, kafka=kafka))
        self.batch_seconds = Histogram(
            f"{PREFIX}_batch_duration_seconds",
            "Time to process one batch of records.",
            buckets=BATCH_BUCKETS,
            registry=self.registry,
        )
        self._server: MetricsHTTPServer | None = None
        self._pusher: threading.Thread | None = None
        self._stop = threading.Event()
        self._push: tuple[str, dict[str, str]] | None = None

    def observe_batch(self, seconds: float) -> None:
        self.batch_seconds.observe(seconds)
        self.live.observe_batch(seconds)

    def serve(self, port: int, host: str = "127.0.0.1") -> int:
        """Serve ``/metrics``, the live page at ``/`` and its data at ``/api/state`` on
        ``host:port`` (port 0: any free port); return the port. Everything is read-only."""
        page = PAGE.read_bytes()
        routes: dict[str, Callable[[], Response]] = {
            "/metrics": lambda: (200, CONTENT_TYPE_LATEST, generate_latest(self.registry)),
            "/": lambda: (200, "text/html; charset=utf-8", page),
            "/api/state": lambda: (200, "application/json", self.live.state_json()),
        }
        self._server = MetricsHTTPServer(routes, host, port)
        return self._server.port

    def start_pushing(self, url: str, interval: float, grouping: dict[str, str]) -> None:
        """Push to the Pushgateway at ``url`` every ``interval`` seconds (and at :meth:`close`)."""
        self._push = (url, grouping)

        def loop() -> None:
            while not self._stop.wait(interval):
                self.push()

        self._pusher = threading.Thread(target=loop, name="pushgateway", daemon=True)
        self._pusher.start()

    def push(self) -> bool:
        """Push once; log (do not raise) when the Pushgateway cannot be reached."""
        if self._push is None:
            return False
        url, grouping = self._push
        try:
            push_to_gateway(
                url, job="stream_perceptron", registry=self.registry, grouping_key=grouping
            )
        except (OSError, ValueError) as e:  # ValueError: an exposition that cannot be sent
            logger.warning("cannot push metrics to %s: %s", url, e)
            return False
        return True

    def close(self) -> bool:
        """Stop the pusher after one final push; stop the HTTP server. Return the push result."""
        self._stop.set()
        if self._pusher is not None:
            self._pusher.join(timeout=10)
        pushed = self.push() if self._push is not None else True
        if self._server is not None:
            self._server.close()
            self._server = None
        return pushed
