"""Prometheus metrics, kept in process and written in the text format.

Collected: requests by method, route template and status; request latency
histograms by method and route; the candidate engine's search time
(reported by GET /allocation_candidates); write retries
(generation conflicts, database deadlocks and connections lost before
COMMIT, from Database.on_retry); and
the database pool, read at scrape time. Gauges of the ledger itself (the
fleet's capacity, used and free per resource class; the projects, and
under strict_two_level the trees, closest to their limits; how many
reservations lack room) come from
LedgerGauges, cached a few seconds.

Every worker process keeps its own numbers; each series carries a `worker`
label (the worker's index, stable across restarts) so a scraper that
reaches several workers through one address sees distinct series rather
than counters that jump between processes. Sum over `worker` to get the
service's totals.
"""
from __future__ import annotations

import bisect
import logging
import math
import threading
import time
from typing import Iterable, Optional

import falcon
from sqlalchemy.exc import SQLAlchemyError

from placement_lite.errors import RetryableError
from placement_lite.api.auth import READS

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Seconds; fine at the low end, where a healthy service lives.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                   1.0, 2.5, 5.0, 10.0)
_METHODS = frozenset(falcon.constants.COMBINED_METHODS)
LOG = logging.getLogger(__name__)


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
    if getattr(exc, "connection_invalidated", False):
        return "connection_lost"
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
        # The worker's copy of the providers' facts (candidates/snapshot.py),
        # when it keeps one.
        self.facts = None

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
        facts = self.facts
        if facts is not None:
            family("placement_lite_facts_copy_reads_total", "counter",
                   "Reads of this worker's copy of the providers' facts: whole, "
                   "or only the providers the facts log named (refresh).")
            for kind, count in (("whole", facts.loads), ("refresh", facts.refreshes)):
                lines.append("placement_lite_facts_copy_reads_total" + _labels(
                    [w, ("kind", kind)]) + f" {count}")
            family("placement_lite_facts_copy_checks_total", "counter",
                   "Checks of this worker's copy of the facts against the "
                   "database, by result: same, different (logged, and the copy "
                   "read whole again) or inconclusive (a write landed meanwhile).")
            for result, count in sorted(facts.checks.items()):
                lines.append("placement_lite_facts_copy_checks_total" + _labels(
                    [w, ("result", result)]) + f" {count}")
            family("placement_lite_facts_copy_providers", "gauge",
                   "Providers in this worker's copy of the facts, as last read.")
            latest = facts.latest()
            lines.append("placement_lite_facts_copy_providers" + _labels([w])
                         + f" {len(latest.uuid) if latest is not None else 0}")
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


class LedgerGauges:
    """The fleet's capacity, used and free per resource class, and the
    (project, resource) pairs closest to their limits, read from the
    database by a fixed number of grouped queries (the fleet in one) and
    cached for `ttl` seconds, so scrapes cost the database nothing more
    however often they come and however many providers there are.

    These describe the database, not the process: they carry no `worker`
    label, and every worker reports the same values (take max, not sum).
    """

    TTL = 5.0

    def __init__(self, db, settings, ttl: float = TTL, clock=time.monotonic):
        self.db = db
        self.settings = settings
        self.ttl = ttl
        self.clock = clock
        self._lock = threading.Lock()
        self._text = ""
        self._at: Optional[float] = None
        self.reads = 0  # how many times the database was read, for tests

    def render(self) -> str:
        with self._lock:
            now = self.clock()
            if self._at is None or now - self._at >= self.ttl:
                try:
                    self._text = self._read()
                except SQLAlchemyError:
                    # The process's own metrics still answer; the gauges
                    # are left out until the database answers again.
                    LOG.warning("metrics: could not read the ledger", exc_info=True)
                    self._text = ""
                self._at = now
            return self._text

    def _read(self) -> str:
        from placement_lite.ledger import fleet, reservation_room
        from placement_lite.quota import overview

        self.reads += 1
        with self.db.read() as conn:
            classes = fleet.class_summaries(conn)
            nearest = overview.nearest(conn, self.settings,
                                       self.settings.metrics_quota_top_n)
            short = reservation_room.count_short(conn)
        lines: list[str] = [
            "# HELP placement_lite_reservations_short Reservations that lack "
            "room at some instant from now on (an inventory shrank under them).",
            "# TYPE placement_lite_reservations_short gauge",
            f"placement_lite_reservations_short {short}"]
        for name, help_text, value in (
                ("placement_lite_fleet_capacity", "Capacity of the fleet per "
                 "resource class: the sum of (total - reserved) * allocation_ratio.",
                 lambda c: c.capacity),
                ("placement_lite_fleet_used", "Allocated amount per resource class.",
                 lambda c: c.used),
                ("placement_lite_fleet_free", "Capacity not allocated per "
                 "resource class (negative when over-committed).",
                 lambda c: c.free)):
            lines.append(f"# HELP {name} {help_text}")
            lines.append(f"# TYPE {name} gauge")
            for c in classes:
                lines.append(f"{name}{_labels([('resource_class', c.resource_class)])} "
                             f"{_number(value(c))}")
        if self.settings.metrics_quota_top_n > 0:
            for name, help_text, pairs, value in (
                    ("placement_lite_quota_usage", "Usage of the (project, resource) "
                     "pairs closest to their limits (metrics_quota_top_n of them).",
                     nearest.projects, lambda u: u.usage),
                    ("placement_lite_quota_limit", "The limit enforcement applies "
                     "to the same pairs (under strict_two_level, capped by the "
                     "parent's).", nearest.projects, lambda u: u.limit),
                    ("placement_lite_quota_tree_usage", "strict_two_level: usage "
                     "of the whole tree under a top-level project, for the "
                     "(project, resource) pairs closest to their limits.",
                     nearest.trees, lambda u: u.usage),
                    ("placement_lite_quota_tree_limit", "strict_two_level: the "
                     "top-level project's limit, which the whole tree's usage "
                     "may not exceed.", nearest.trees, lambda u: u.limit)):
                # The flat model has no trees: leave the families out
                # rather than announce series that never come.
                if not pairs and "_tree_" in name:
                    continue
                lines.append(f"# HELP {name} {help_text}")
                lines.append(f"# TYPE {name} gauge")
                for u in pairs:
                    lines.append(name + _labels([("project", u.project),
                                                 ("resource", u.resource)])
                                 + f" {_number(value(u))}")
        return "\n".join(lines) + "\n" if lines else ""


class MetricsResource:
    """GET /metrics: served only when metrics are enabled; no auth."""

    policies: dict = {}
    public_methods = READS
    produces = None  # one text format, whatever a scraper's Accept says

    def __init__(self, services):
        self.metrics: Metrics = services.metrics
        self.gauges = LedgerGauges(services.db, services.settings)

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.content_type = CONTENT_TYPE
        resp.text = self.metrics.render() + self.gauges.render()

