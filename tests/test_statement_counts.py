"""SQL statements per request on the hot routes, pinned on every backend.

Counted by the server itself (PLACEMENT_LITE_COUNT_STATEMENTS on: each
response carries x-placement-lite-statements). A change that adds a round
trip to one of these routes shows here, not in a timing; lower a pin when
a route gets cheaper. SQLite's counts include the BEGIN the engine issues
itself for every transaction (one per read or write transaction).
"""
from __future__ import annotations

import uuid

import pytest
from falcon import testing

from placement_lite.app import create_app
from placement_lite.config import Settings
from placement_lite.db import migrate
from placement_lite.db.engine import COUNT_STATEMENTS_ENV, Database
from placement_lite.ledger import standards

HEADER = "x-placement-lite-statements"
AGG = "2ad0b2a8-5f5c-4d35-9d25-6b5b0d1f4c11"


@pytest.fixture
def client(db, monkeypatch):
    monkeypatch.setenv(COUNT_STATEMENTS_ENV, "1")
    counted = Database(db.url)
    migrate.upgrade(counted.engine)
    standards.sync(counted)
    app = create_app(Settings(db=db.url), db=counted)
    yield testing.TestClient(app, headers={
        "x-auth-token": "admin", "openstack-api-version": "placement latest"})
    counted.dispose()


def _count(client, method, path, body=None, status=None):
    resp = client.simulate_request(method, path, json=body)
    assert resp.status_code < 300 if status is None else resp.status_code == status, \
        resp.text
    return int(resp.headers[HEADER])


def _transactions(db, n):
    """The BEGINs SQLite's engine sends itself (n transactions)."""
    return n if db.backend == "sqlite" else 0


def _facts_logged(db):
    """What a write that changes providers' facts adds to log them in one
    shard (db/facts_log.flush): the head's bump (its reply carries the new
    serial back, on MariaDB too) and the change rows' insert, one
    statement on PostgreSQL. Claims change no facts and pay none of it."""
    return 1 if db.backend == "postgresql" else 2


def _provider(client, name):
    rp = str(uuid.uuid4())
    client.simulate_post("/resource_providers", json={"name": name, "uuid": rp})
    client.simulate_put(f"/resource_providers/{rp}/inventories", json={
        "resource_provider_generation": 0,
        "inventories": {"VCPU": {"total": 32}, "MEMORY_MB": {"total": 8192}}})
    return rp


def _claim(rp, project, user, vcpu=1):
    return {"allocations": {rp: {"resources": {"VCPU": vcpu}}},
            "project_id": project, "user_id": user,
            "consumer_generation": None, "consumer_type": "INSTANCE"}


def test_off_by_default(db):
    app = create_app(Settings(db=db.url), db=db)
    resp = testing.TestClient(app).simulate_get("/")
    assert resp.status_code == 200
    assert HEADER not in resp.headers


def _load(client, rp, name):
    """The perfload loader's four writes for one provider: their counts."""
    inventory = {"VCPU": {"total": 32}, "MEMORY_MB": {"total": 8192},
                 "DISK_GB": {"total": 8192}}
    return [
        _count(client, "POST", "/resource_providers", {"name": name, "uuid": rp}),
        _count(client, "PUT", f"/resource_providers/{rp}/inventories", {
            "resource_provider_generation": 0, "inventories": inventory}),
        _count(client, "PUT", f"/resource_providers/{rp}/traits", {
            "resource_provider_generation": 1,
            "traits": ["HW_CPU_X86_AVX2", "STORAGE_DISK_SSD"]}),
        _count(client, "PUT", f"/resource_providers/{rp}/aggregates", {
            "resource_provider_generation": 2, "aggregates": [AGG]})]


def test_provider_load_writes(client, db):
    """The perfload loader's four writes per provider, one transaction
    each: the provider is read in the write transaction, with what the
    write replaces (its inventory, its traits) where a generation check
    proves that read still holds."""
    tx = _transactions(db, 1)
    # Each of the four changes one provider's facts, so each also logs it
    # (since the facts log: two or three statements more each).
    log = _facts_logged(db)
    # The new provider's insert (unless its uuid or name is taken) and
    # its root pointer; inventory: provider with inventory, class ids,
    # generation, insert (returning the rows the answer shows); traits:
    # provider with traits, trait rows, generation, insert; aggregates:
    # provider, generation, the aggregates asked for with the provider's
    # (the first use creates the row, in a savepoint, and reads it back),
    # insert.
    assert _load(client, str(uuid.uuid4()), "cn1") == [
        2 + tx + log, 4 + tx + log, 4 + tx + log, 8 + tx + log]
    # Standard classes and traits, once read, are not read again; the
    # aggregate row exists.
    assert _load(client, str(uuid.uuid4()), "cn2") == [
        2 + tx + log, 3 + tx + log, 3 + tx + log, 4 + tx + log]


def test_claims(client, db):
    rp = _provider(client, "cn1")
    project, user = str(uuid.uuid4()), str(uuid.uuid4())
    # The first claim of a project also creates its project and user rows.
    _count(client, "PUT", f"/allocations/{uuid.uuid4()}", _claim(rp, project, user),
           status=204)
    tx = _transactions(db, 1)
    # Where an UPDATE returns rows (PostgreSQL, SQLite), the one adding
    # the claim to `used` gives the capacity check its rows; MariaDB/MySQL
    # read them in a statement of their own.
    check_read = 0 if db.engine.dialect.update_returning else 1
    # One of them the usage summary's upsert; the consumer's project, user
    # and type are found by the statement that inserts the consumer. A
    # claim changes no provider's facts: nothing for the facts log (and
    # none of its head locks).
    assert _count(client, "PUT", f"/allocations/{uuid.uuid4()}",
                  _claim(rp, project, user), status=204) == 8 + check_read + tx
    # A claim that does not fit is refused after the capacity check,
    # without writing its allocations.
    assert _count(client, "PUT", f"/allocations/{uuid.uuid4()}",
                  _claim(rp, project, user, vcpu=32), status=409) == 6 + check_read + tx
    # Once the process holds a copy of the facts (a candidates request
    # made it), the provider's id comes from it: one statement fewer.
    _count(client, "GET", "/allocation_candidates?resources=VCPU:1")
    assert _count(client, "PUT", f"/allocations/{uuid.uuid4()}",
                  _claim(rp, project, user), status=204) == 7 + check_read + tx


def test_usages(client, db):
    rp = _provider(client, "cn1")
    project, user = str(uuid.uuid4()), str(uuid.uuid4())
    for _ in range(3):
        client.simulate_put(f"/allocations/{uuid.uuid4()}", json=_claim(rp, project, user))
    tx = _transactions(db, 1)
    # One statement over the usage summary, the ids joined in.
    assert _count(client, "GET", f"/usages?project_id={project}") == 1 + tx
    assert _count(client, "GET", f"/usages?project_id={project}&user_id={user}") == 1 + tx
    assert _count(client, "GET", f"/usages?project_id={project}&consumer_type=all") == 1 + tx
    assert _count(client, "GET", f"/resource_providers/{rp}/usages") == 2 + tx
    # An unknown project is answered from the id lookup alone.
    assert _count(client, "GET", f"/usages?project_id={uuid.uuid4()}") == 1 + tx


def test_candidates_stay_bounded(client, db):
    """The candidate engine is tuned elsewhere: here only a ceiling, the
    same for 3 providers and for 30 (no statement per provider)."""
    for i in range(3):
        rp = _provider(client, f"cn{i}")
    path = "/allocation_candidates?resources=VCPU:1,MEMORY_MB:256"
    _count(client, "GET", path)
    few = _count(client, "GET", path)
    for i in range(3, 30):
        _provider(client, f"cn{i}")
    _count(client, "GET", path)
    many = _count(client, "GET", path)
    assert many == few
    assert few <= 12
    assert rp


def test_candidates_from_the_copy_of_the_facts(client, db):
    """With the process's copy of the facts current, a flat request reads
    the facts log's heads and the `used` of one slice of providers (the
    copy knows aggregates and trees by uuid). A write of facts costs the
    next request only the log's read and the providers it names."""
    for i in range(30):
        rp = _provider(client, f"cn{i}")
    client.simulate_put(f"/resource_providers/{rp}/aggregates", json={
        "resource_provider_generation": 1, "aggregates": [AGG]})
    path = "/allocation_candidates?resources=VCPU:1,MEMORY_MB:256"
    _count(client, "GET", path)
    assert _count(client, "GET", path) == 2 + _transactions(db, 1)
    assert _count(client, "GET", path + f"&member_of={AGG}") == 2 + _transactions(db, 1)
    assert _count(client, "GET", path + f"&in_tree={rp}") == 2 + _transactions(db, 1)
    _provider(client, "cn-new")
    # The request's own two, the log's changes since the copy, the new
    # provider's row, inventory, traits, aggregates and reservation
    # windows (candidates/ahead.py), and the class names (it holds
    # inventory).
    assert _count(client, "GET", path) == 2 + 1 + 5 + 1 + _transactions(db, 1)


def test_a_repeated_bounded_answer_reads_usage_in_one_statement(client, db):
    """A bounded answer over the copy reads `used` for a slice of trees at
    a time until the bound is met; the same request again reads as many
    trees as the last one went through, in one statement. Trees that
    cannot serve the request whatever they use (here, disks) are not
    read at all (candidates/viable.py)."""
    for i in range(40):
        rp = str(uuid.uuid4())
        client.simulate_post("/resource_providers", json={"name": f"disk{i}", "uuid": rp})
        client.simulate_put(f"/resource_providers/{rp}/inventories", json={
            "resource_provider_generation": 0, "inventories": {"DISK_GB": {"total": 100}}})
    # Forty compute nodes with VCPU, all of it used: they can serve VCPU,
    # so their usage must be read, and they give no candidate.
    owner = str(uuid.uuid4())
    for i in range(40):
        rp = _provider(client, f"full{i}")
        _count(client, "PUT", f"/allocations/{uuid.uuid4()}", _claim(rp, owner, owner, 32))
    for i in range(10):
        _provider(client, f"cn{i}")
    path = "/allocation_candidates?resources=VCPU:1&limit=5"
    _count(client, "GET", "/allocation_candidates?resources=DISK_GB:1")  # the copy
    # The first slice of viable trees (32, all full) holds no candidate: a
    # second is read.
    assert _count(client, "GET", path) == 3 + _transactions(db, 1)
    assert _count(client, "GET", path) == 2 + _transactions(db, 1)
    resp = client.simulate_get(path)
    assert len(resp.json["allocation_requests"]) == 5


def _reservation(rp, vcpu=1, start="2098-01-01T00:00:00Z", end="2098-01-02T00:00:00Z"):
    return {"project_id": "p1", "user_id": "u1", "start": start, "end": end,
            "allocations": {rp: {"resources": {"VCPU": vcpu}}}}


def test_reservations(client, db):
    rp = _provider(client, "cn1")
    # The first creates the owner's project and user rows.
    client.simulate_post("/reservations", json=_reservation(rp))
    tx = _transactions(db, 1)
    # The provider's id; now, the id's, project's and user's rows in one;
    # the provider's lock; the inventory rows' `booked` (Galera's write
    # set); inventories; the windows overlapping; the two inserts. Quota,
    # off here: the deployment's enforcement, and the lease hours' entry
    # (recorded whether or not anything is enforced). Its marker class
    # (ledger/draws.py): whether it exists is read in the first round
    # trip, and creating it is one insert. The facts log (each process's
    # copy keeps the windows ahead: candidates/ahead.py): the provider's
    # entry.
    made = client.simulate_post("/reservations", json=_reservation(rp, 2))
    assert made.status_code == 201, made.text
    assert int(made.headers[HEADER]) == 8 + 2 + 1 + _facts_logged(db) + tx
    rid = made.json["id"]
    # The row (owners and now with it), its amounts, then inventories and
    # the windows that give `short`.
    assert _count(client, "GET", f"/reservations/{rid}") == 4 + tx
    assert _count(client, "GET", "/reservations") == 4 + tx
    # A claim where something is reserved ahead reads the windows once
    # more than one where nothing is (test_claims; the first of a type
    # creates rows of its own).
    check_read = 0 if db.engine.dialect.update_returning else 1
    _count(client, "PUT", f"/allocations/{uuid.uuid4()}", _claim(rp, "p1", "u1"))
    assert _count(client, "PUT", f"/allocations/{uuid.uuid4()}",
                  _claim(rp, "p1", "u1"), status=204) == 8 + 1 + check_read + tx
