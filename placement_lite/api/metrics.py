"""Prometheus metrics, kept in process and written in the text format.

Collected: requests by method, route template and status; request latency
histograms by method and route; the candidate engine's search time
(reported by GET /allocation_candidates); write retries
(generation conflicts and database deadlocks, from Database.on_retry); and
the database pool, read at scrape time.

Every worker process keeps its own numbers; each series carries a `worker`
label (the worker's index, stable across restarts) so a scraper that
reaches several workers through one address sees distinct series rather
than counters that jump between processes. Sum over `worker` to get the
service's totals.
"""
from __future__ import annotations

import bisect
import math
import threading
from typing import Iterable, Optional

import falcon

from placement_lite.db.engine import RetryableError
from placement_lite.api.auth import READS

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Seconds; fine at the low end, where a healthy service lives.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                   1.0, 2.5, 5.0, 10.0)
_METHODS = frozenset(falcon.constants.COMBINED_METHODS)


def _escape(value: str) -> str:
    return (str(value).replace("\\", "\\\\").replace("\n", "\\n")
            .replace('"', '\\"'))


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    body = ",".join(f'{k}="{_escape(v)}"' for k, v in pairs)
    return "{" + body + "}" if body else ""


def _number(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


class Histogram:
    def __init__(self, buckets=LATENCY_BUCKETS):
        self.buckets = tuple(buckets)
        self.counts = [0] * (len(self.buckets) + 1)
        self.total = 0.0
        self.n = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value
        self.n += 1


def _retry_reason(exc: BaseException) -> str:
    if isinstance(exc, RetryableError):
        return "concurrent_update"
    text = str(getattr(exc, "orig", exc)).lower()
    if "deadlock" in text:
        return "deadlock"
    if "lock wait" in text or "locked" in text or "busy" in text:
        return "lock_wait"
    return "serialization"


class Metrics:
    """Thread-safe counters and histograms for one process."""

    def __init__(self, worker: Optional[int] = None):
        self.worker = "0" if worker is None else str(worker)
        self._lock = threading.Lock()
        self.requests: dict[tuple[str, str, str], int] = {}
        self.latency: dict[tuple[str, str], Histogram] = {}
        self.candidates = Histogram()
        self.retries: dict[str, int] = {}
        self.db = None

    # Observers -------------------------------------------------------
    def observe_request(self, method: str, route: str, status: int,
                        seconds: float) -> None:
        # Callers choose the method; unknown ones share one series.
        method = method if method in _METHODS else "OTHER"
        with self._lock:
            key = (method, route, str(status))
            self.requests[key] = self.requests.get(key, 0) + 1
            hist = self.latency.get((method, route))
            if hist is None:
                hist = self.latency[(method, route)] = Histogram()
            hist.observe(seconds)

    def observe_candidate_search(self, seconds: float) -> None:
        """The candidate engine's search and summaries, without parsing
        and rendering (GET /allocation_candidates calls this)."""
        with self._lock:
            self.candidates.observe(seconds)

    def observe_retry(self, exc: BaseException) -> None:
        reason = _retry_reason(exc)
        with self._lock:
            self.retries[reason] = self.retries.get(reason, 0) + 1

    def attach(self, db) -> None:
        """Count the database's write retries and report its pool."""
        self.db = db
        db.on_retry.append(self.observe_retry)

    # Exposition --------------------------------------------------------
    def _pool(self) -> list[tuple[str, float]]:
        pool = getattr(getattr(self.db, "engine", None), "pool", None)
        out = []
        for name, attr in (("size", "size"), ("checked_out", "checkedout"),
                           ("idle", "checkedin"), ("overflow", "overflow")):
            fn = getattr(pool, attr, None)
            if callable(fn):
                try:
                    # QueuePool counts overflow from -size up; below zero
                    # means "none in use beyond the pool".
                    value = fn()
                    out.append((name, max(0, value) if name == "overflow" else value))
                except Exception:  # noqa: BLE001 - a pool without the figure
                    continue
        return out

    def render(self) -> str:
        w = ("worker", self.worker)
        lines: list[str] = []

        def family(name, kind, help_text):
            lines.append(f"# HELP {name} {help_text}")
            lines.append(f"# TYPE {name} {kind}")

        def histogram(name, labels, hist):
            cumulative = 0
            for bound, count in zip(self.buckets_of(hist), hist.counts):
                cumulative += count
                le = "+Inf" if math.isinf(bound) else _number(bound)
                lines.append(f"{name}_bucket{_labels(labels + [('le', le)])} {cumulative}")
            lines.append(f"{name}_sum{_labels(labels)} {_number(hist.total)}")
            lines.append(f"{name}_count{_labels(labels)} {hist.n}")

        with self._lock:
            family("placement_lite_http_requests_total", "counter",
                   "HTTP requests by method, route template and status.")
            for (method, route, status), count in sorted(self.requests.items()):
                lines.append("placement_lite_http_requests_total" + _labels(
                    [w, ("method", method), ("route", route), ("status", status)])
                    + f" {count}")
            family("placement_lite_http_request_duration_seconds", "histogram",
                   "Time from request to response, by method and route template.")
            for (method, route), hist in sorted(self.latency.items()):
                histogram("placement_lite_http_request_duration_seconds",
                          [w, ("method", method), ("route", route)], hist)
            family("placement_lite_allocation_candidates_seconds", "histogram",
                   "Time the candidate engine spent searching (and summarising) "
                   "for GET /allocation_candidates.")
            histogram("placement_lite_allocation_candidates_seconds", [w],
                      self.candidates)
            family("placement_lite_db_write_retries_total", "counter",
                   "Write transactions run again, by reason (concurrent_update "
                   "is a provider generation conflict).")
            for reason in sorted(set(self.retries) | {"concurrent_update"}):
                lines.append("placement_lite_db_write_retries_total" + _labels(
                    [w, ("reason", reason)]) + f" {self.retries.get(reason, 0)}")
        pool = self._pool()
        if pool:
            family("placement_lite_db_pool_connections", "gauge",
                   "Database connection pool of this worker, by state.")
            for state, value in pool:
                lines.append("placement_lite_db_pool_connections" + _labels(
                    [w, ("state", state)]) + f" {_number(value)}")
        return "\n".join(lines) + "\n"

    @staticmethod
    def buckets_of(hist: Histogram):
        return list(hist.buckets) + [math.inf]


class MetricsResource:
    """GET /metrics: served only when metrics are enabled; no auth."""

    policies: dict = {}
    public_methods = READS
    produces = None  # one text format, whatever a scraper's Accept says

    def __init__(self, services):
        self.metrics: Metrics = services.extras["metrics"]

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.content_type = CONTENT_TYPE
        resp.text = self.metrics.render()


ROUTES = [("/metrics", MetricsResource)]
