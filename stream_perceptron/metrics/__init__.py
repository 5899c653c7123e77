"""Prometheus metrics: scrape-time collectors over the engine and model, HTTP and Pushgateway."""

from __future__ import annotations

from stream_perceptron.metrics.collector import EngineCollector, top_weights
from stream_perceptron.metrics.exporter import MetricsExporter

__all__ = ["EngineCollector", "MetricsExporter", "top_weights"]
