"""Every PromQL expression under deploy/, and the metric names the engine exposes.

``iter_promql_expressions()`` yields the expressions of deploy/prometheus/rules.yml and of the
Grafana dashboards, with Grafana's variables replaced so that each can be sent to Prometheus as
is (the checks in this folder parse them with promtool; an end-to-end test can evaluate them).

>>> sources = {e.source for e in iter_promql_expressions()}
>>> sorted(sources)
['deploy/grafana/dashboards/stream-perceptron.json', 'deploy/prometheus/rules.yml']
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

try:
    import yaml
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("tests/deploy need PyYAML: pip install pyyaml (in the test extra)") from exc

__all__ = [
    "ENGINE_METRICS",
    "PROMETHEUS_METRICS",
    "PromQLExpression",
    "iter_promql_expressions",
    "metric_names",
    "recorded_names",
    "render_grafana",
]

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
RULES_FILE = DEPLOY / "prometheus" / "rules.yml"
DASHBOARD_DIR = DEPLOY / "grafana" / "dashboards"
DASHBOARD = DASHBOARD_DIR / "stream-perceptron.json"

_HISTOGRAMS = ("stream_perceptron_batch_duration_seconds", "stream_perceptron_label_delay_records",
               "stream_perceptron_label_delay_seconds")

#: The engine's metric names as Prometheus stores them (the exposition contract).
ENGINE_METRICS: frozenset[str] = frozenset(
    {
        "stream_perceptron_examples_total",
        "stream_perceptron_mistakes_total",
        "stream_perceptron_predictions_total",
        "stream_perceptron_invalid_records_total",
        "stream_perceptron_accuracy",
        "stream_perceptron_rolling_accuracy",
        "stream_perceptron_weight",
        "stream_perceptron_weights_nonzero",
        "stream_perceptron_bias",
        "stream_perceptron_weight_norm",
        "stream_perceptron_input_norm_max",
        "stream_perceptron_classes",
        "stream_perceptron_margin_min",
        "stream_perceptron_mistake_bound",
        "stream_perceptron_recent_margin",
        "stream_perceptron_recent_wrong_side_ratio",
        "stream_perceptron_checkpoint_last_success_timestamp_seconds",
        "stream_perceptron_build_info",
        "stream_perceptron_kafka_consumer_lag",
        "stream_perceptron_kafka_committed_offset",
        "stream_perceptron_kafka_rebalances_total",
        # --drift-detector adwin
        "stream_perceptron_drifts_total",
        "stream_perceptron_last_drift_position",
        # shared-model mode (--model-topic)
        "stream_perceptron_model_version",
        "stream_perceptron_mixes_total",
        "stream_perceptron_seconds_since_last_mix",
        "stream_perceptron_mix_divergence",
        "stream_perceptron_partitions_owned",
        "stream_perceptron_state_restores_total",
        "stream_perceptron_state_restore_seconds_total",
        "stream_perceptron_transactions_total",
        "stream_perceptron_transaction_seconds_total",
        "stream_perceptron_mix_seconds_total",
        "stream_perceptron_model_records_rejected_total",
        # --join-key (labels that come later; the delay histogram is in _HISTOGRAMS)
        "stream_perceptron_pending_examples",
        "stream_perceptron_pending_examples_limit",
        "stream_perceptron_joined_examples_total",
        "stream_perceptron_served_mistakes_total",
        "stream_perceptron_served_accuracy",
        "stream_perceptron_expired_events_total",
        "stream_perceptron_unmatched_outcomes_total",
        "stream_perceptron_duplicate_outcomes_total",
        "stream_perceptron_duplicate_events_total",
    }
    | {f"{h}_{suffix}" for h in _HISTOGRAMS for suffix in ("bucket", "sum", "count")}
)

#: Series that Prometheus itself writes for every scrape target.
PROMETHEUS_METRICS: frozenset[str] = frozenset({"up"})

#: Grafana's built-in interval variables, and what a 15 s scrape interval makes of them.
GRAFANA_VARIABLES: dict[str, str] = {
    "$__rate_interval": "1m",
    "$__interval": "15s",
    "$__range": "1h",
}


@dataclass(frozen=True)
class PromQLExpression:
    source: str  # file, relative to the repository root
    where: str  # which rule or panel target
    expr: str  # ready for Prometheus: Grafana variables replaced
    raw: str  # as written in the file


def render_grafana(expr: str) -> str:
    """Replace Grafana's variables by values Prometheus accepts.

    >>> render_grafana("rate(x_total[$__rate_interval])")
    'rate(x_total[1m])'
    >>> render_grafana("x{instance=~'$instance'}")
    Traceback (most recent call last):
    ...
    ValueError: unknown Grafana variable in: x{instance=~'$instance'}
    """
    for name in sorted(GRAFANA_VARIABLES, key=len, reverse=True):
        expr = expr.replace(name, GRAFANA_VARIABLES[name])
    if "$" in expr:
        raise ValueError(f"unknown Grafana variable in: {expr}")
    return expr


def _rule_expressions(path: Path) -> Iterator[PromQLExpression]:
    source = path.relative_to(REPO).as_posix()
    for group in yaml.safe_load(path.read_text())["groups"]:
        for rule in group["rules"]:
            name = rule.get("alert") or rule.get("record")
            kind = "alert" if "alert" in rule else "record"
            expr = rule["expr"].strip()
            yield PromQLExpression(source, f"{group['name']}: {kind} {name}", expr, rule["expr"])


def _panels(panels: list[dict]) -> Iterator[dict]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))  # collapsed rows hold their panels


def _dashboard_expressions(path: Path) -> Iterator[PromQLExpression]:
    source = path.relative_to(REPO).as_posix()
    dashboard = json.loads(path.read_text())
    for panel in _panels(dashboard.get("panels", [])):
        for target in panel.get("targets", []):
            if target.get("expr"):
                where = f"panel {panel.get('title')!r} target {target.get('refId')}"
                yield PromQLExpression(
                    source, where, render_grafana(target["expr"]), target["expr"]
                )
    for annotation in dashboard.get("annotations", {}).get("list", []):
        if annotation.get("expr"):
            where = f"annotation {annotation.get('name')!r}"
            yield PromQLExpression(
                source, where, render_grafana(annotation["expr"]), annotation["expr"]
            )
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") == "query":
            raise ValueError(f"{source}: query variables are not handled here: {variable['name']}")


def iter_promql_expressions() -> Iterator[PromQLExpression]:
    """All PromQL of rules.yml (alerts and recording rules) and of the Grafana dashboards."""
    yield from _rule_expressions(RULES_FILE)
    for path in sorted(DASHBOARD_DIR.glob("*.json")):
        yield from _dashboard_expressions(path)


def recorded_names() -> set[str]:
    """Names of the recording rules of rules.yml (usable in queries like engine metrics)."""
    groups = yaml.safe_load(RULES_FILE.read_text())["groups"]
    return {rule["record"] for group in groups for rule in group["rules"] if "record" in rule}


# Tokens of PromQL that look like names but are not metrics.
_KEYWORDS = frozenset(
    "and or unless by without on ignoring group_left group_right bool offset inf nan".split()
)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_COMMENT = re.compile(r"#[^\n]*")
_BRACES = re.compile(r"\{[^{}]*\}")  # label matchers (strings are gone already)
_BRACKETS = re.compile(r"\[[^\[\]]*\]")  # ranges and subqueries
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_TOKEN = re.compile(r"(?P<number>\d[\w.]*)|(?P<name>[A-Za-z_:][\w:]*)(?P<call>\s*\()?")


def metric_names(expr: str) -> set[str]:
    """Metric names an expression selects: names neither called, nor keywords, nor labels.

    >>> sorted(metric_names(
    ...     'sum by (reason) (rate(a_total{reason!="x",job=~"b|c"}[5m] offset 1h)) / on (job) '
    ...     'group_left (version) b_info > bool 0.5 or vector(0) and time() - c_seconds'))
    ['a_total', 'b_info', 'c_seconds']
    >>> sorted(metric_names('histogram_quantile(0.9, sum(rate(h_bucket[5m:1m])) without (x)) '))
    ['h_bucket']
    >>> metric_names('label_replace(up, "dst", "$1", "src", "(.*)") > 1e3')
    {'up'}
    """
    text = _STRING.sub('""', expr)
    text = _COMMENT.sub(" ", text)
    text = _BRACES.sub(" ", text)
    text = _BRACKETS.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    names = set()
    for match in _TOKEN.finditer(text):
        name = match.group("name")
        if name and not match.group("call") and name.lower() not in _KEYWORDS:
            names.add(name)
    return names
