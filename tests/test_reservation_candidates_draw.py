"""GET /allocation_candidates naming a reservation's marker class
(docs/reservations.md, "Using a reservation"), through the HTTP API on
every configured backend, as Blazar and nova use it: the flavor names
CUSTOM_RESERVATION_<ID>, the scheduler takes an allocation request from
the answer and claims it verbatim; the answer offers exactly the room the
reservation has left, where the claim will draw from it.

Times are the database's (db/clock.py), read when a test starts.
"""
from __future__ import annotations

import uuid as uuidlib

import pytest

from placement_lite.ledger import marker
from tests.reservation_api import (
    ADMIN, HOUR, client_for, code, db_now, provider, put_allocations, reserve)
from tests.reservation_rows import move_window


@pytest.fixture
def client(db):
    return client_for(db)


def _host(client, **inventory) -> str:
    return provider(client, **(inventory or {"VCPU": 8, "MEMORY_MB": 8192}))


def _candidates(client, query, version="1.39"):
    got = client.simulate_get(
        "/allocation_candidates", query_string=query,
        headers={**ADMIN, "OpenStack-API-Version": f"placement {version}"})
    assert got.status_code == 200, got.text
    return got.json


def _flavor(rid, vcpu=2, memory=2048, **more):
    parts = [f"VCPU:{vcpu}", f"MEMORY_MB:{memory}"]
    parts += [f"{name}:{n}" for name, n in more.items()]
    return "resources=" + ",".join(parts + [f"{marker.class_name(rid)}:1"])


def _claim(client, request, project="lab"):
    """PUT an allocation request as nova does: verbatim, a new consumer."""
    return put_allocations(client, str(uuidlib.uuid4()), request["allocations"], project)


def _set_window(db, rid, start, end) -> None:
    with db.write() as conn:
        move_window(conn, rid, start, end)


def test_the_scheduler_finds_and_claims_exactly_the_reservations_room(db, client):
    a, b = _host(client), _host(client)
    now = db_now(db)
    rid = reserve(client, {a: {"VCPU": 4, "MEMORY_MB": 4096}}, now, now + HOUR)
    mark = marker.class_name(rid)

    found = _candidates(client, _flavor(rid))
    assert found["allocation_requests"] == [{
        "allocations": {a: {"resources": {"VCPU": 2, "MEMORY_MB": 2048, mark: 1}}},
        "mappings": {"": [a]}}]
    # capacity - used is what the reservation has left; the marker shows
    # what this request may take of it.
    assert found["provider_summaries"][a]["resources"] == {
        "VCPU": {"capacity": 8, "used": 4},
        "MEMORY_MB": {"capacity": 8192, "used": 4096},
        mark: {"capacity": 1, "used": 0}}
    assert set(found["provider_summaries"]) == {a}
    first = found["allocation_requests"][0]

    assert _claim(client, first).status_code == 204
    found = _candidates(client, _flavor(rid))
    assert [list(r["allocations"]) for r in found["allocation_requests"]] == [[a]]
    assert found["provider_summaries"][a]["resources"] == {
        "VCPU": {"capacity": 8, "used": 6},
        "MEMORY_MB": {"capacity": 8192, "used": 6144},
        mark: {"capacity": 2, "used": 1}}
    # More than is left is not offered.
    assert _candidates(client, _flavor(rid, vcpu=3))["allocation_requests"] == []

    assert _claim(client, found["allocation_requests"][0]).status_code == 204
    used_up = _candidates(client, _flavor(rid, vcpu=1, memory=1))
    assert used_up == {"allocation_requests": [], "provider_summaries": {}}
    # A stale answer's claim is refused: the reservation has nothing left.
    got = _claim(client, first)
    assert got.status_code == 409, got.text
    assert code(got) == "placement.reservation.overdrawn"

    # Requests naming no marker are answered as ever, on both hosts.
    plain = _candidates(client, "resources=VCPU:1")
    assert {rp for r in plain["allocation_requests"] for rp in r["allocations"]} == {a, b}
    assert mark not in plain["provider_summaries"][a]["resources"]


def test_another_project_is_offered_the_room_but_its_claim_is_refused(db, client):
    a = _host(client)
    now = db_now(db)
    rid = reserve(client, {a: {"VCPU": 4, "MEMORY_MB": 4096}}, now, now + HOUR)
    # The request names no project (nova's does not): the claim decides.
    request = _candidates(client, _flavor(rid))["allocation_requests"][0]
    got = _claim(client, request, project="other")
    assert got.status_code == 409, got.text
    assert code(got) == "placement.reservation.other_project"
    assert _claim(client, request).status_code == 204


def test_a_class_the_reservation_does_not_hold_there_is_not_offered_there(db, client):
    a = _host(client, VCPU=8, MEMORY_MB=8192, DISK_GB=100)
    now = db_now(db)
    rid = reserve(client, {a: {"VCPU": 4, "MEMORY_MB": 4096}}, now, now + HOUR)
    # DISK_GB would land on A, where the claim could not draw it.
    found = _candidates(client, _flavor(rid, DISK_GB=10))
    assert found == {"allocation_requests": [], "provider_summaries": {}}
    # From a sharing provider it is offered, claimed plainly there.
    disk = provider(client, DISK_GB=100)
    agg = str(uuidlib.uuid4())
    for rp in (a, disk):
        gen = client.simulate_get(f"/resource_providers/{rp}", headers=ADMIN
                                  ).json["generation"]
        got = client.simulate_put(f"/resource_providers/{rp}/aggregates", headers=ADMIN,
                                  json={"aggregates": [agg],
                                        "resource_provider_generation": gen})
        assert got.status_code == 200, got.text
    got = client.simulate_put(f"/resource_providers/{disk}/traits", headers=ADMIN, json={
        "traits": ["MISC_SHARES_VIA_AGGREGATE"], "resource_provider_generation":
            client.simulate_get(f"/resource_providers/{disk}", headers=ADMIN
                                ).json["generation"]})
    assert got.status_code == 200, got.text
    found = _candidates(client, _flavor(rid, DISK_GB=10))
    mark = marker.class_name(rid)
    assert [r["allocations"] for r in found["allocation_requests"]] == [{
        a: {"resources": {"VCPU": 2, "MEMORY_MB": 2048, mark: 1}},
        disk: {"resources": {"DISK_GB": 10}}}]
    assert _claim(client, found["allocation_requests"][0]).status_code == 204


def test_a_reservation_not_active_or_gone_offers_nothing(db, client):
    a = _host(client)
    now = db_now(db)
    rid = reserve(client, {a: {"VCPU": 4, "MEMORY_MB": 4096}}, now + HOUR, now + 2 * HOUR)
    empty = {"allocation_requests": [], "provider_summaries": {}}
    assert _candidates(client, _flavor(rid)) == empty  # pending
    _set_window(db, rid, now - 2 * HOUR, now - HOUR)
    assert _candidates(client, _flavor(rid)) == empty  # ended
    _set_window(db, rid, now - HOUR, now + HOUR)
    assert len(_candidates(client, _flavor(rid))["allocation_requests"]) == 1
    _set_window(db, rid, now - 2 * HOUR, now - HOUR)
    assert client.simulate_delete(f"/reservations/{rid}", headers=ADMIN).status_code == 204
    # Its class is gone with it; the request is still answered, empty.
    assert _candidates(client, _flavor(rid)) == empty
    # Another unknown class in the request is still a 400, as ever.
    got = client.simulate_get("/allocation_candidates", headers=ADMIN,
                              query_string=_flavor(rid, CUSTOM_NOPE=1))
    assert got.status_code == 400, got.text


def test_a_nested_host_offers_the_child_the_reservation_holds_on(db, client):
    host = provider(client)
    numa0 = provider(client, parent=host, VCPU=4, MEMORY_MB=4096)
    numa1 = provider(client, parent=host, VCPU=4, MEMORY_MB=4096)
    now = db_now(db)
    rid = reserve(client, {numa1: {"VCPU": 2, "MEMORY_MB": 2048}}, now, now + HOUR)
    mark = marker.class_name(rid)
    found = _candidates(client, _flavor(rid, vcpu=2, memory=1024))
    assert [r["allocations"] for r in found["allocation_requests"]] == [
        {numa1: {"resources": {"VCPU": 2, "MEMORY_MB": 1024, mark: 1}}}]
    # The whole tree is summarised; the marker only where it may go.
    sums = found["provider_summaries"]
    assert set(sums) == {host, numa0, numa1}
    assert mark not in sums[numa0]["resources"]
    assert sums[numa1]["resources"]["VCPU"] == {"capacity": 4, "used": 2}
    assert sums[numa0]["resources"]["VCPU"] == {"capacity": 4, "used": 0}

    # A numbered group naming the marker, beside a plain group.
    query = ("resources1=VCPU:2,MEMORY_MB:1024," + mark + ":1"
             "&resources2=VCPU:1&group_policy=isolate")
    found = _candidates(client, query)
    assert [(r["allocations"], r["mappings"]) for r in found["allocation_requests"]] == [(
        {numa1: {"resources": {"VCPU": 2, "MEMORY_MB": 1024, mark: 1}},
         numa0: {"resources": {"VCPU": 1}}},
        {"1": [numa1], "2": [numa0]})]
    assert _claim(client, found["allocation_requests"][0]).status_code == 204
    # Nothing left: the numbered group is no longer offered.
    assert _candidates(client, query)["allocation_requests"] == []


def test_limit_and_several_providers(db, client):
    a, b, c = _host(client), _host(client), _host(client)
    now = db_now(db)
    held = {"VCPU": 2, "MEMORY_MB": 2048}
    rid = reserve(client, {a: held, b: held}, now, now + HOUR)
    mark = marker.class_name(rid)
    found = _candidates(client, _flavor(rid))
    assert {rp for r in found["allocation_requests"] for rp in r["allocations"]} == {a, b}
    assert set(found["provider_summaries"]) == {a, b}
    one = _candidates(client, _flavor(rid) + "&limit=1")
    assert len(one["allocation_requests"]) == 1
    (only,) = one["allocation_requests"][0]["allocations"]
    assert set(one["provider_summaries"]) == {only}
    assert one["provider_summaries"][only]["resources"][mark] == {"capacity": 1, "used": 0}
    assert c not in found["provider_summaries"]


def test_requests_naming_markers_wrongly_are_refused(db, client):
    a = _host(client)
    now = db_now(db)
    r1 = reserve(client, {a: {"VCPU": 2}}, now, now + HOUR)
    r2 = reserve(client, {a: {"VCPU": 2}}, now, now + HOUR, project="other")
    m1, m2 = marker.class_name(r1), marker.class_name(r2)
    for query in (f"resources=VCPU:1,{m1}:1,{m2}:1",
                  f"resources=VCPU:1,{m1}:1&resources1=VCPU:1,{m1}:1&group_policy=none",
                  f"resources={m1}:1"):
        got = client.simulate_get("/allocation_candidates", headers=ADMIN,
                                  query_string=query)
        assert got.status_code == 400, (query, got.text)
        assert code(got) == "placement.query.bad_value"


def test_old_microversions_list_the_marker_too(db, client):
    a = _host(client)
    now = db_now(db)
    rid = reserve(client, {a: {"VCPU": 4, "MEMORY_MB": 4096}}, now, now + HOUR)
    mark = marker.class_name(rid)
    found = _candidates(client, _flavor(rid), version="1.10")
    assert found["allocation_requests"] == [{"allocations": [{
        "resource_provider": {"uuid": a},
        "resources": {"VCPU": 2, "MEMORY_MB": 2048, mark: 1}}]}]
    assert found["provider_summaries"][a]["resources"][mark] == {"capacity": 1, "used": 0}


def test_a_random_sample_draws_too(db):
    client = client_for(db, randomize_allocation_candidates=True)
    hosts = [_host(client) for _ in range(3)]
    now = db_now(db)
    rid = reserve(client, {rp: {"VCPU": 2, "MEMORY_MB": 2048} for rp in hosts},
                  now, now + HOUR)
    mark = marker.class_name(rid)
    seen = set()
    for _ in range(12):
        (request,) = _candidates(client, _flavor(rid) + "&limit=1")["allocation_requests"]
        ((rp, resources),) = request["allocations"].items()
        assert resources["resources"][mark] == 1
        seen.add(rp)
    assert seen <= set(hosts)
