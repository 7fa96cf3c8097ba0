"""No write, and no read that names one provider or one project, makes
SQLite scan a table that grows with the cloud.

SQLite, the default backend, plans without statistics, so a statement
MariaDB and PostgreSQL answer by index can be a full scan there: each
`PUT /resource_providers/{uuid}/inventories` once read every inventory
row of the cloud to find one provider's (its provider lookup outer-joined
a parenthesised join, which SQLite materialises whole), so loading slowed
as the cloud grew (the perfload loader: about 200 providers/s into a
small database, 100-113/s beside the benchmark's 8,000 providers). Each statement the routes below
send is planned again here (EXPLAIN QUERY PLAN, with the parameters it
was sent with), and a plan that scans one of the growing tables fails
the test, naming the statement.
"""
from __future__ import annotations

import re
import sqlite3
import uuid

import pytest
from falcon import testing

from placement_lite.app import create_app
from placement_lite.config import Settings
from tests.backends import fresh_database, statements_run

# Tables whose rows grow with providers, consumers and projects. The
# catalogues (classes, traits, consumer types, services, registered
# limits), the facts log's heads and the quota settings stay small
# whatever the cloud's size.
GROWING = {"resource_providers", "inventories", "allocations", "consumers",
           "resource_provider_traits", "resource_provider_aggregates",
           "placement_aggregates", "projects", "users", "usage_summary",
           "facts_changes", "project_limits", "quota_tree_locks", "lease_ledger",
           "reservations", "reservation_amounts"}
AGG = "5d0c9c9e-96c4-4f4b-9b8e-0d6c2a6c4f10"


def _client(db, **settings):
    app = create_app(Settings(db=db.url, **settings), db=db)
    return testing.TestClient(app, headers={
        "x-auth-token": "admin", "openstack-api-version": "placement latest"})


def _populated(client):
    # Some of everything, so that every route finds rows. Without
    # statistics SQLite plans alike at any size: a small world shows the
    # plans a large one would get.
    rps = [_provider(client, f"cn-{i}") for i in range(20)]
    for rp in rps[:10]:
        _ok(client.simulate_put(f"/allocations/{uuid.uuid4()}", json=_claim(
            rp, str(uuid.uuid4()), str(uuid.uuid4()))))
    return rps


@pytest.fixture
def world():
    with fresh_database("sqlite") as db:
        client = _client(db)
        yield db, client, _populated(client)


def _ok(resp, status=None):
    assert (resp.status_code < 300 if status is None
            else resp.status_code == status), resp.text
    return resp


def _provider(client, name, parent=None):
    rp = str(uuid.uuid4())
    body = {"name": name, "uuid": rp}
    if parent:
        body["parent_provider_uuid"] = parent
    _ok(client.simulate_post("/resource_providers", json=body))
    _ok(client.simulate_put(f"/resource_providers/{rp}/inventories", json={
        "resource_provider_generation": 0, "inventories": {
            "VCPU": {"total": 32}, "MEMORY_MB": {"total": 8192},
            "DISK_GB": {"total": 8192}}}))
    _ok(client.simulate_put(f"/resource_providers/{rp}/traits", json={
        "resource_provider_generation": 1,
        "traits": ["HW_CPU_X86_AVX2", "STORAGE_DISK_SSD"]}))
    _ok(client.simulate_put(f"/resource_providers/{rp}/aggregates", json={
        "resource_provider_generation": 2, "aggregates": [AGG]}))
    return rp


def _claim(rp, project, user, vcpu=1, generation=None):
    return {"allocations": {rp: {"resources": {"VCPU": vcpu}}},
            "project_id": project, "user_id": user,
            "consumer_generation": generation, "consumer_type": "INSTANCE"}


def _generation(client, rp):
    return _ok(client.simulate_get(f"/resource_providers/{rp}")).json["generation"]


def _planned(db, routes) -> tuple[dict, list]:
    """Run each (name, action) of `routes`; the statements each sent
    (BEGIN, COMMIT and ROLLBACK left out), and every plan line that scans
    a growing table, named by route and statement."""
    sent_by_route, found = {}, []
    with sqlite3.connect(db.url.split("///", 1)[1]) as raw:
        for name, action in routes:
            with statements_run(db, parameters=True) as run:
                action()
            sent = sent_by_route[name] = [
                (statement, parameters) for statement, parameters in run
                if not statement.lstrip().upper().startswith(("BEGIN", "COMMIT", "ROLLBACK"))]
            assert sent, f"{name}: no statement was seen"
            for statement, parameters in sent:
                scans = [line for _id, _parent, _unused, line in raw.execute(
                    "EXPLAIN QUERY PLAN " + statement, parameters)
                    if (m := re.match(r"SCAN (\w+)", line)) and m.group(1) in GROWING]
                if scans:
                    found.append(f"{name}: {scans} in {' '.join(statement.split())[:160]}")
    return sent_by_route, found


def _routes(client, rps):
    """The routes a scheduler, a compute host's report client and a
    loader call against one provider or one consumer, each once."""
    rp, other = rps[0], rps[1]
    project, user = str(uuid.uuid4()), str(uuid.uuid4())
    consumer = str(uuid.uuid4())
    yield "create a provider", lambda: _ok(client.simulate_post(
        "/resource_providers", json={"name": "new", "uuid": str(uuid.uuid4())}))
    yield "set inventories", lambda: _ok(client.simulate_put(
        f"/resource_providers/{rp}/inventories", json={
            "resource_provider_generation": _generation(client, rp), "inventories": {
                "VCPU": {"total": 64}, "MEMORY_MB": {"total": 8192},
                "DISK_GB": {"total": 8192}}}))
    yield "set one inventory", lambda: _ok(client.simulate_put(
        f"/resource_providers/{rp}/inventories/DISK_GB", json={
            "resource_provider_generation": _generation(client, rp), "total": 9000}))
    yield "delete one inventory", lambda: _ok(client.simulate_delete(
        f"/resource_providers/{other}/inventories/DISK_GB"))
    yield "set traits", lambda: _ok(client.simulate_put(
        f"/resource_providers/{rp}/traits", json={
            "resource_provider_generation": _generation(client, rp),
            "traits": ["HW_CPU_X86_AVX2"]}))
    yield "set aggregates", lambda: _ok(client.simulate_put(
        f"/resource_providers/{rp}/aggregates", json={
            "resource_provider_generation": _generation(client, rp),
            "aggregates": [AGG, str(uuid.uuid4())]}))
    yield "claim", lambda: _ok(client.simulate_put(
        f"/allocations/{consumer}", json=_claim(rp, project, user)))
    yield "resize the claim", lambda: _ok(client.simulate_put(
        f"/allocations/{consumer}", json=_claim(rp, project, user, 2, generation=1)))
    # What nova's report client reads of its compute host every period.
    yield "read the provider's tree", lambda: _ok(client.simulate_get(
        "/resource_providers", params={"in_tree": rp}))
    yield "read a provider by uuid", lambda: _ok(client.simulate_get(
        "/resource_providers", params={"uuid": rp}))
    for what in ("inventories", "traits", "aggregates"):
        yield f"read the provider's {what}", lambda what=what: _ok(client.simulate_get(
            f"/resource_providers/{rp}/{what}"))
    yield "read the consumer's allocations", lambda: _ok(client.simulate_get(
        f"/allocations/{consumer}"))
    yield "read the provider's allocations", lambda: _ok(client.simulate_get(
        f"/resource_providers/{rp}/allocations"))
    yield "read the provider's usages", lambda: _ok(client.simulate_get(
        f"/resource_providers/{rp}/usages"))
    yield "read the project's usages", lambda: _ok(client.simulate_get(
        "/usages", params={"project_id": project}))
    yield "delete the claim", lambda: _ok(client.simulate_delete(
        f"/allocations/{consumer}"))
    yield "delete the provider's traits", lambda: _ok(client.simulate_delete(
        f"/resource_providers/{other}/traits"))
    yield "claim for two consumers", lambda: _ok(client.simulate_post(
        "/allocations", json={c: {**_claim(other, project, user), "allocations": {
            other: {"resources": {"VCPU": 1}}}} for c in (str(uuid.uuid4()),
                                                          str(uuid.uuid4()))}))
    yield "rename a provider", lambda: _ok(client.simulate_put(
        f"/resource_providers/{rps[2]}", json={"name": "renamed"}))
    yield "delete a provider", lambda: _ok(client.simulate_delete(
        f"/resource_providers/{rps[-1]}"))


def test_no_route_on_one_provider_scans_a_growing_table(world):
    db, client, rps = world
    _, found = _planned(db, _routes(client, rps))
    assert not found, "\n".join(found)


def _reservation(db, project, rp):
    """A reservation of the project's for the next hour, written straight
    in: its claims then read its windows."""
    from sqlalchemy import select
    from placement_lite.db import clock, tables as t
    from tests import factories
    with db.write() as conn:
        now = clock.now(conn)
        rp_id = conn.scalar(select(t.resource_providers.c.id).where(
            t.resource_providers.c.uuid == rp))
        factories.reservation(conn, project, now + 60, now + 3600,
                              {rp_id: {"VCPU": 1}})


def _quota_routes(client, rps, db):
    """What a claim under enforcement, and quota code asking about one
    project, send."""
    service = _ok(client.simulate_post("/v3/services", json={
        "service": {"type": "placement", "name": "placement"}})).json["service"]["id"]
    _ok(client.simulate_post("/v3/registered_limits", json={"registered_limits": [
        {"service_id": service, "resource_name": name, "default_limit": 1000}
        for name in ("class:VCPU", "consumers:INSTANCE")]}))
    for i in range(5):
        _ok(client.simulate_post("/v3/projects", json={"project": {
            "id": f"top-{i}", "name": f"top-{i}"}}))
        _ok(client.simulate_post("/v3/projects", json={"project": {
            "id": f"child-{i}", "name": f"child-{i}", "parent_id": f"top-{i}"}}))
        _ok(client.simulate_post("/v3/limits", json={"limits": [{
            "project_id": f"top-{i}", "service_id": service,
            "resource_name": "class:VCPU", "resource_limit": 2000}]}))
        _ok(client.simulate_put(f"/allocations/{uuid.uuid4()}", json=_claim(
            rps[i], f"child-{i}", "user")))
    _reservation(db, "child-0", rps[0])
    consumer = str(uuid.uuid4())
    yield "claim", lambda: _ok(client.simulate_put(
        f"/allocations/{consumer}", json=_claim(rps[0], "child-0", "user")))
    yield "resize the claim", lambda: _ok(client.simulate_put(
        f"/allocations/{consumer}", json=_claim(rps[0], "child-0", "user", 2,
                                                generation=1)))
    yield "ask before claiming", lambda: _ok(client.simulate_post(
        "/quota/check", json={"project_id": "child-0",
                              "deltas": {"class:VCPU": 3}}))
    yield "read the project's limits", lambda: _ok(client.simulate_get(
        "/v3/limits", params={"project_id": "child-0"}))
    yield "read the project", lambda: _ok(client.simulate_get("/v3/projects/child-0"))
    yield "delete the claim", lambda: _ok(client.simulate_delete(
        f"/allocations/{consumer}"))


@pytest.mark.parametrize("model", ["flat", "strict_two_level"])
def test_no_quota_route_on_one_project_scans_a_growing_table(model):
    with fresh_database("sqlite") as db:
        client = _client(db, quota_enforce=True, quota_model=model)
        sent, found = _planned(db, _quota_routes(client, _populated(client), db))
    # The claims ran the quota check (it reads the project's limits): the
    # plans above are those of an enforced claim.
    assert any("FROM project_limits" in statement for statement, _p in sent["claim"])
    # ... and read child-0's reservations: their plans are checked too.
    assert any("FROM reservations JOIN reservation_amounts" in statement
               for statement, _p in sent["claim"])
    assert not found, "\n".join(found)
