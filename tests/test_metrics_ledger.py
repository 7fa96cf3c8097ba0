"""/metrics gauges of the ledger: the fleet's capacity per class and the
projects closest to their limits; one grouped query for the fleet
whatever its size, cached between scrapes."""
from __future__ import annotations

import uuid as uuidlib

import falcon.testing
import pytest
from sqlalchemy import event

from placement_lite import report
from placement_lite.api.metrics import LedgerGauges
from placement_lite.app import create_app
from placement_lite.config import Settings
from placement_lite.db import usage_summary
from placement_lite.ledger import fleet
from tests import factories
from tests.backends import backend_id, backend_urls, fresh_database
from tests.test_metrics import _parse
from tests.test_ui import ADMIN, build_world


@pytest.fixture
def db():
    with fresh_database("sqlite") as database:
        yield database


def _client(db, **kw):
    settings = Settings(db=db.url, metrics=True,
                        quota_model="strict_two_level", **kw)
    client = falcon.testing.TestClient(create_app(settings, db))

    def call(method, path, body=None):
        r = client.simulate_request(method, path, json=body, headers={
            **ADMIN})
        return r.status_code, (r.json if r.text else None)
    build_world(call)
    return client


def test_fleet_and_quota_gauges(db):
    samples = _parse(_client(db).simulate_get("/metrics").text)
    fleet_ = {(name, labels): v for (name, labels), v in samples.items()
              if name.startswith("placement_lite_fleet_")}
    assert fleet_[("placement_lite_fleet_capacity", '{resource_class="VCPU"}')] == 40
    assert fleet_[("placement_lite_fleet_used", '{resource_class="VCPU"}')] == 16
    assert fleet_[("placement_lite_fleet_free", '{resource_class="VCPU"}')] == 24
    assert fleet_[("placement_lite_fleet_capacity", '{resource_class="DISK_GB"}')] == 900
    assert fleet_[("placement_lite_fleet_used", '{resource_class="MEMORY_MB"}')] == 1536
    quota = {(name, labels): v for (name, labels), v in samples.items()
             if name.startswith("placement_lite_quota_")}
    assert quota[("placement_lite_quota_usage",
                  '{project="acme-dev",resource="class:VCPU"}')] == 10
    assert quota[("placement_lite_quota_limit",
                  '{project="acme-dev",resource="class:VCPU"}')] == 8
    assert quota[("placement_lite_quota_limit",
                  '{project="beta",resource="class:VCPU"}')] == 10


def test_project_gauges_are_bounded_and_can_be_turned_off(db):
    samples = _parse(_client(db, metrics_quota_top_n=1).simulate_get("/metrics").text)
    usage = [labels for (name, labels) in samples if name == "placement_lite_quota_usage"]
    # The one pair nearest (here over) its limit.
    assert usage == ['{project="acme-dev",resource="class:VCPU"}']


def test_project_gauges_off(db):
    text = _client(db, metrics_quota_top_n=0).simulate_get("/metrics").text
    assert "placement_lite_quota_" not in text
    assert "placement_lite_fleet_capacity" in text


def test_gauges_are_cached_between_scrapes(db):
    _client(db)
    now = [100.0]
    gauges = LedgerGauges(db, Settings(db=db.url), ttl=5.0, clock=lambda: now[0])
    first = gauges.render()
    now[0] += 4.9
    assert gauges.render() == first and gauges.reads == 1
    now[0] += 0.2
    gauges.render()
    assert gauges.reads == 2


@pytest.mark.parametrize("backend", backend_urls(), ids=backend_id)
@pytest.mark.parametrize("providers", [5, 60])
def test_fleet_summary_is_one_query_whatever_the_fleet(backend, providers):
    with fresh_database(backend) as database:
        with database.engine.begin() as conn:
            for i in range(providers):
                rp = factories.provider_with(conn, VCPU=8, MEMORY_MB=1024)
                if i % 2:
                    factories.inventory(conn, rp, "DISK_GB", 100, reserved=10,
                                        allocation_ratio=1.5)
        statements = []
        event.listen(database.engine, "before_cursor_execute",
                     lambda *a, **k: statements.append(a[2]))
        with database.read() as conn:
            statements.clear()
            found = {c.resource_class: c for c in fleet.class_summaries(conn)}
            selects = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
        assert len(selects) == 1
        assert found["VCPU"].capacity == 8 * providers
        assert found["DISK_GB"].providers == providers // 2
        assert found["DISK_GB"].capacity == 135 * (providers // 2)
        assert found["VCPU"].histogram[-1] == providers  # all free


@pytest.mark.parametrize("backend", backend_urls(), ids=backend_id)
def test_histogram_edges(backend):
    """Each provider in exactly one bucket: no capacity, over-committed
    (an inventory shrunk under its allocations), exact tenths, all free."""
    from sqlalchemy import insert
    from placement_lite.db import tables as t
    with fresh_database(backend) as database:
        with database.engine.begin() as conn:
            project = conn.execute(insert(t.projects).values(external_id="p")
                                   ).inserted_primary_key[0]
            user = conn.execute(insert(t.users).values(external_id="u")
                                ).inserted_primary_key[0]

            def holding(total, used, reserved=0):
                rp = factories.provider(conn)
                factories.inventory(conn, rp, "VCPU", total, reserved=reserved,
                                    max_unit=max(total, 1))
                if used:
                    consumer = conn.execute(insert(t.consumers).values(
                        uuid=str(uuidlib.uuid4()), project_id=project,
                        user_id=user, generation=0)).inserted_primary_key[0]
                    conn.execute(insert(t.allocations).values(
                        resource_provider_id=rp["id"], consumer_id=consumer,
                        resource_class_id=factories.class_id(conn, "VCPU"), used=used))
                    usage_summary.rebuild(conn)
            holding(10, 0, reserved=10)   # no capacity, unused: bucket 0
            holding(10, 3, reserved=10)   # no capacity, used: bucket 0
            holding(10, 12)               # over-committed: bucket 0
            holding(10, 10)               # full: bucket 0
            holding(10, 9)                # 10 % free: bucket 1
            holding(10, 5)                # 50 % free: bucket 5
            holding(10, 1)                # 90 % free: bucket 9
            holding(10, 0)                # all free: bucket 9
        with database.read() as conn:
            (vcpu,) = fleet.class_summaries(conn)
        assert vcpu.histogram == (4, 1, 0, 0, 0, 1, 0, 0, 0, 2)
        assert vcpu.providers == 8 and vcpu.capacity == 60
        assert vcpu.used == 3 + 12 + 10 + 9 + 5 + 1
        assert vcpu.free == 60 - 40


def _issue_26_world(db, model):
    """Issue 26: child B (default limit 40) uses 24 VCPU; its parent A's
    limit is lowered to 16. Returns the test client and a caller."""
    settings = Settings(db=db.url, metrics=True, quota_enforce=True,
                        quota_model=model)
    client = falcon.testing.TestClient(create_app(settings, db))

    def ok(method, path, body=None, want=(200, 201, 204)):
        r = client.simulate_request(method, path, json=body, headers=ADMIN)
        assert r.status_code in want, (method, path, r.status_code, r.text)
        return r.json if r.text else None

    rp = str(uuidlib.uuid4())
    ok("POST", "/resource_providers", {"name": "cn", "uuid": rp})
    ok("PUT", f"/resource_providers/{rp}/inventories", {
        "resource_provider_generation": 0,
        "inventories": {"VCPU": {"total": 64}}})
    sid = ok("POST", "/v3/services", {"service": {"type": "placement"}})[
        "service"]["id"]
    ok("POST", "/v3/registered_limits", {"registered_limits": [
        {"service_id": sid, "resource_name": "class:VCPU", "default_limit": 40}]})
    ok("POST", "/v3/projects", {"project": {"id": "A", "name": "A"}})
    ok("POST", "/v3/projects", {"project": {"id": "B", "name": "B", "parent_id": "A"}})
    ok("PUT", f"/allocations/{uuidlib.uuid4()}", {
        "allocations": {rp: {"resources": {"VCPU": 24}}},
        "project_id": "B", "user_id": "u", "consumer_generation": None,
        "consumer_type": "INSTANCE"})
    ok("POST", "/v3/limits", {"limits": [
        {"project_id": "A", "service_id": sid, "resource_name": "class:VCPU",
         "resource_limit": 16}]})
    return client, ok


def _quota_series(client):
    return {(name, labels): v for (name, labels), v in
            _parse(client.simulate_get("/metrics").text).items()
            if name.startswith("placement_lite_quota_")}


def test_strict_two_level_gauges_show_the_limit_enforcement_applies(db):
    client, ok = _issue_26_world(db, "strict_two_level")
    quota = _quota_series(client)
    b = '{project="B",resource="class:VCPU"}'
    a = '{project="A",resource="class:VCPU"}'
    # B's own default is 40, but its parent caps it at 16: what a claim,
    # POST /quota/check and the report all hold B to.
    assert quota[("placement_lite_quota_usage", b)] == 24
    assert quota[("placement_lite_quota_limit", b)] == 16
    # The tree's usage against the top project's limit, labelled by the top.
    assert quota[("placement_lite_quota_tree_usage", a)] == 24
    assert quota[("placement_lite_quota_tree_limit", a)] == 16
    # A uses nothing itself: no per-project pair for it.
    assert ("placement_lite_quota_usage", a) not in quota

    check = ok("POST", "/quota/check", {"project_id": "B",
                                        "deltas": {"class:VCPU": 1}},
               want=(403,))
    assert {o["limit"] for o in check["errors"][0]["over_limit"]} == {16}
    # The report (and the console, which reads the same function) agrees.
    with db.read() as conn:
        data = report.collect(conn, Settings(db=db.url,
                                             quota_model="strict_two_level"))
    (tree,) = [tr for tr in data["quota"]["trees"] if tr["root"] == "A"]
    (vcpu,) = [r for r in tree["resources"] if r["resource"] == "class:VCPU"]
    (line_b,) = [p for p in vcpu["projects"] if p["project"] == "B"]
    assert line_b["limit"] == quota[("placement_lite_quota_limit", b)]
    assert vcpu["tree"]["limit"] == quota[("placement_lite_quota_tree_limit", a)]
    assert vcpu["tree"]["usage"] == quota[("placement_lite_quota_tree_usage", a)]

def test_flat_gauges_keep_each_projects_own_limit(db):
    client, _ok = _issue_26_world(db, "flat")
    quota = _quota_series(client)
    b = '{project="B",resource="class:VCPU"}'
    assert quota[("placement_lite_quota_usage", b)] == 24
    assert quota[("placement_lite_quota_limit", b)] == 40
    # No tree under the flat model.
    assert not [k for k in quota if k[0].startswith("placement_lite_quota_tree_")]


def test_the_short_reservations_gauge_counts_reservations_left_without_room(db):
    from sqlalchemy import update

    from placement_lite.db import clock, tables as t
    from placement_lite.ledger import reservations

    gauges = LedgerGauges(db, Settings(db=db.url), ttl=0.0)

    def short():
        return _parse(gauges.render())[("placement_lite_reservations_short", "")]

    assert short() == 0
    with db.write() as conn:
        rp = factories.provider_with(conn, VCPU=8)
        now = clock.now(conn)
    for hours in ((1, 3), (2, 4), (5, 6)):
        db.run_write(lambda conn, h=hours: reservations.create(
            conn, None, "p", "u", now + h[0] * 3600, now + h[1] * 3600,
            {rp["uuid"]: {"VCPU": 4}}))
    assert short() == 0
    with db.write() as conn:
        conn.execute(update(t.inventories).values(total=6))
    # The first two overlap (8 reserved, room 6); the third is alone (4).
    assert short() == 2
