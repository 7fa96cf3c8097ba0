"""GET /metrics: Prometheus text, by route and status; retries; the pool."""
from __future__ import annotations

import re

import falcon.testing
import pytest

from placement_lite.api.metrics import Metrics
from placement_lite.app import create_app
from placement_lite.config import Settings
from placement_lite.db.engine import RetryableError
from placement_lite.ledger import providers
from tests import servers
from tests.backends import fresh_database


@pytest.fixture
def db():
    """SQLite only: what these tests check does not depend on the backend
    (test_api.py, test_schema.py and test_workers.py cover the servers)."""
    with fresh_database("sqlite") as database:
        yield database


ADMIN = {"X-Auth-Token": "admin"}
SAMPLE = re.compile(r'^([a-z_]+)(\{.*\})? (-?[0-9.e+Inf]+)$')


def _parse(text):
    """{(name, labels): value}, checking every line is valid exposition."""
    samples, typed = {}, set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            typed.add(line.split()[2])
            continue
        if line.startswith("# HELP ") or not line:
            continue
        match = SAMPLE.match(line)
        assert match, f"not exposition format: {line!r}"
        name, labels, value = match.groups()
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        assert base in typed or name in typed, f"{name} has no TYPE line"
        samples[(name, labels or "")] = float(value)
    return samples


def _client(db, **overrides):
    return falcon.testing.TestClient(
        create_app(Settings(db=db.url, metrics=True, **overrides), db))


def test_metrics_are_404_unless_enabled(db):
    client = falcon.testing.TestClient(create_app(Settings(db=db.url), db))
    assert client.simulate_get("/metrics").status_code == 404


def test_requests_are_counted_by_route_and_status(db):
    client = _client(db)
    client.simulate_get("/resource_providers", headers=ADMIN)
    client.simulate_get("/resource_providers", headers=ADMIN)
    client.simulate_get("/resource_providers")  # 401
    client.simulate_get("/resource_providers/3b4e9d8e-0000-4000-8000-000000000000",
                        headers=ADMIN)  # 404 on a templated route
    result = client.simulate_get("/metrics")  # no token needed
    assert result.status_code == 200
    assert result.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = _parse(result.text)
    count = 'placement_lite_http_requests_total{worker="0",method="GET",route="%s",status="%s"}'
    assert samples[tuple(re.match(r"(\w+)(.*)", count % ("/resource_providers", 200))
                         .groups())] == 2
    assert samples[tuple(re.match(r"(\w+)(.*)", count % ("/resource_providers", 401))
                         .groups())] == 1
    assert samples[tuple(re.match(r"(\w+)(.*)", count % (
        "/resource_providers/{uuid}", 404)).groups())] == 1
    hist = 'placement_lite_http_request_duration_seconds_count'
    assert samples[(hist, '{worker="0",method="GET",route="/resource_providers"}')] == 3
    inf = samples[("placement_lite_http_request_duration_seconds_bucket",
                   '{worker="0",method="GET",route="/resource_providers",le="+Inf"}')]
    assert inf == 3


def test_candidate_searches_are_timed(db):
    client = _client(db)
    result = client.simulate_get("/allocation_candidates", query_string="resources=VCPU:1",
                                 headers={**ADMIN, "OpenStack-API-Version": "placement 1.10"})
    assert result.status_code == 200, result.text
    samples = _parse(client.simulate_get("/metrics").text)
    assert samples[("placement_lite_allocation_candidates_seconds_count",
                    '{worker="0"}')] == 1


def test_retries_and_pool_are_reported(db):
    client = _client(db)
    attempts = []

    def unit(conn):
        attempts.append(1)
        if len(attempts) == 1:
            raise RetryableError("generation conflict")
    db.run_write(unit)
    samples = _parse(client.simulate_get("/metrics").text)
    assert samples[("placement_lite_db_write_retries_total",
                    '{worker="0",reason="concurrent_update"}')] == 1
    pool = {labels: v for (name, labels), v in samples.items()
            if name == "placement_lite_db_pool_connections"}
    assert '{worker="0",state="checked_out"}' in pool


def test_worker_label_and_escaping():
    metrics = Metrics(worker=3)
    metrics.observe_request("GET", 'odd"route\\', 200, 0.002)
    text = metrics.render()
    assert 'worker="3",method="GET",route="odd\\"route\\\\",status="200"} 1' in text
    _parse(text)


@pytest.mark.parametrize("value,bucket", [(0.0005, "0.001"), (0.003, "0.005"),
                                          (20.0, "+Inf")])
def test_histogram_buckets_are_cumulative(value, bucket):
    metrics = Metrics()
    metrics.observe_request("GET", "/x", 200, value)
    samples = _parse(metrics.render())
    key = ("placement_lite_http_request_duration_seconds_bucket",
           '{worker="0",method="GET",route="/x",le="%s"}' % bucket)
    assert samples[key] == 1
    assert samples[("placement_lite_http_request_duration_seconds_bucket",
                    '{worker="0",method="GET",route="/x",le="+Inf"}')] == 1


def test_unknown_methods_share_one_series():
    metrics = Metrics()
    for method in ("BREW", "X-ANYTHING", "GET"):
        metrics.observe_request(method, "unmatched", 405, 0.001)
    text = metrics.render()
    assert 'method="OTHER",route="unmatched",status="405"} 2' in text
    assert "BREW" not in text


def test_the_facts_copy_is_reported(db):
    """How often a worker read its copy of the providers' facts, whole or
    refreshed from the log, and how many providers it holds."""
    client = _client(db)
    version = {**ADMIN, "OpenStack-API-Version": "placement 1.39"}

    def provider(name):
        rp = client.simulate_post("/resource_providers", json={"name": name},
                                  headers=version).json["uuid"]
        assert client.simulate_put(f"/resource_providers/{rp}/inventories", json={
            "resource_provider_generation": 0,
            "inventories": {"VCPU": {"total": 4}}}, headers=version).status_code == 200

    def reads():
        samples = _parse(client.simulate_get("/metrics").text)
        return (samples[("placement_lite_facts_copy_reads_total",
                         '{worker="0",kind="whole"}')],
                samples[("placement_lite_facts_copy_reads_total",
                         '{worker="0",kind="refresh"}')],
                samples[("placement_lite_facts_copy_providers", '{worker="0"}')])

    assert reads() == (0, 0, 0)
    provider("cn1")
    path = "/allocation_candidates?resources=VCPU:1"
    for _ in range(2):
        assert client.simulate_get(path, headers=version).status_code == 200
    assert reads() == (1, 0, 1)
    provider("cn2")
    assert client.simulate_get(path, headers=version).status_code == 200
    assert reads() == (1, 1, 2)


def test_no_facts_copy_no_series(db):
    client = _client(db, facts_in_memory=False)
    assert "facts_copy" not in client.simulate_get("/metrics").text


@pytest.mark.parametrize("workers", [1, 2])
def test_a_serving_worker_reads_the_facts_copy_at_start(db, workers):
    """A served worker reads its copy of the facts in the background as it
    starts, not on the first candidates request (which would wait seconds
    at 100,000 providers); no candidates request is made here."""
    with db.write() as conn:
        providers.create_provider(conn, "cn1")
    with servers.serve(db.url, "--metrics", "--workers", str(workers)) as srv:
        def whole_reads():
            status, _headers, text = srv.request("GET", "/metrics")
            assert status == 200
            samples = _parse(text)
            return sorted((labels, value) for (name, labels), value in samples.items()
                          if name in ("placement_lite_facts_copy_reads_total",
                                      "placement_lite_facts_copy_providers")
                          and 'kind="refresh"' not in labels)

        # Each worker answers /metrics for itself: ask until one has read.
        found = servers.wait_until(lambda: [
            v for v in whole_reads() if v[1]] or None, timeout=30)
        assert all(value == 1 for _labels, value in found), found
