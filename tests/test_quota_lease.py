"""The lease-policy chain below HTTP: reading Blazar's bodies, order,
custom filters, and that a refusal late in the chain undoes the charges
made before it."""
from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import func, select

from placement_lite import errors
from placement_lite.api.resources.lease import lease_request
from placement_lite.config import Settings
from placement_lite.db import tables as t
from placement_lite.quota import catalog, enforce, lease, limits, models, projects

START = dt.datetime(2030, 1, 1)


def enforcer(settings):
    # The app builds one per process; each test here is its own process.
    return enforce.Enforcer(settings)


def body(project="p", hours=2, reservations=None, **lease_fields):
    raw = {"start_date": START.isoformat(),
           "end_date": (START + dt.timedelta(hours=hours)).isoformat(),
           "reservations": reservations if reservations is not None else [
               {"resource_type": "physical:host", "min": 1, "max": 3}],
           **lease_fields}
    return {"context": {"project_id": project, "user_id": "u"}, "lease": raw}


def test_amounts_follow_what_blazar_holds_or_asks():
    parsed = lease_request("create", body(reservations=[
        {"resource_type": "physical:host", "min": 1, "max": 3,
         "allocations": [{"id": "a"}, {"id": "b"}]},
        {"resource_type": "physical:host", "min": "1", "max": "4"},
        {"resource_type": "virtual:instance", "amount": 5, "vcpus": 2},
        {"resource_type": "virtual:floatingip", "amount": 2},
        {"resource_type": "virtual:floatingip"},
    ]))
    assert parsed.lease.amounts() == {"physical:host": 6,
                                      "virtual:instance": 5,
                                      "virtual:floatingip": 3}
    assert parsed.lease.hours == 2
    assert parsed.lease.id is None


@pytest.mark.parametrize("bad, words", [
    ([], "JSON object"),
    ({"lease": {}}, "'context' must be an object"),
    ({"context": {"project_id": "p"}, "lease": "x"}, "'lease' must be an object"),
    (body(start_date="2030-13-01T00:00:00"), "is not a date and time"),
    (body(reservations=[{"min": 1}]), "resource_type is missing"),
    (body(reservations=[{"resource_type": "physical:host", "max": -1}]),
     "must not be negative"),
    (body(reservations=[{"resource_type": "physical:host", "max": True}]),
     "whole number"),
    (body(reservations={"a": 1}), "must be a list"),
    (body(reservations=[{"resource_type": "physical:host",
                         "amount": 2 ** 31}]), "at most 2147483647"),
    (body(hours=24 * 365 * 5000, reservations=[
        {"resource_type": "physical:host", "amount": 2 ** 31 - 1}]),
     "more than can be accounted for"),
    (body(project="p" * 256), "longer than 255"),
    (body(name="n" * 256), "lease.name is longer than 255"),
])
def test_malformed_bodies_name_the_problem(bad, words):
    with pytest.raises(lease.MalformedLease, match=words):
        lease_request("create", bad)


def test_update_takes_the_id_of_the_current_lease():
    raw = body()
    raw["current_lease"] = dict(raw["lease"], id="L9")
    assert lease_request("update", raw).lease.id == "L9"


def test_timezone_aware_dates_become_naive_utc():
    parsed = lease_request("create", body(
        start_date="2030-01-01T02:00:00+02:00", end_date="2030-01-01T01:00:00Z"))
    assert parsed.lease.start == START and parsed.lease.hours == 1


class Refuser(lease.LeaseFilter):
    name = "refuser"
    seen: list = []

    def check(self, conn, req, now):
        Refuser.seen.append(req.project_id)
        raise lease.LeaseDenied("Leases are closed for maintenance today.")


class FakeEntryPoint:
    def __init__(self, name, target):
        self.name = name
        self.target = target

    def load(self):
        return self.target


def test_custom_filters_come_from_entry_points(monkeypatch):
    monkeypatch.setattr(lease.metadata, "entry_points",
                        lambda group: [FakeEntryPoint("refuser", Refuser)]
                        if group == lease.ENTRY_POINT_GROUP else [])
    chain = lease.LeasePolicy(Settings(lease_policy_filters=(
        "max_duration", "refuser")), enforcer(Settings()))
    assert [type(f) for f in chain.filters] == [lease.MaxDuration, Refuser]
    with pytest.raises(ValueError, match="unknown lease policy filter 'nope'"):
        lease.LeasePolicy(Settings(lease_policy_filters=("nope",)),
                          enforcer(Settings()))


def test_a_late_refusal_rolls_back_earlier_charges(db, monkeypatch):
    monkeypatch.setattr(lease.metadata, "entry_points",
                        lambda group: [FakeEntryPoint("refuser", Refuser)])
    settings = Settings(db=db.url, lease_policy_filters=("budget", "refuser"))
    chain = lease.LeasePolicy(settings, enforcer(settings), clock=lambda: START)
    req = lease_request("create", body(project="late"))
    Refuser.seen.clear()
    with pytest.raises(lease.LeaseDenied, match="maintenance"):
        db.run_write(lambda conn: chain.run(conn, req))
    assert Refuser.seen == ["late"]
    with db.read() as conn:
        assert conn.scalar(select(func.count()).select_from(t.lease_ledger)) == 0
    # The same chain without the refuser charges 3 hosts x 2 hours.
    settings = Settings(db=db.url, lease_policy_filters=("budget",))
    chain = lease.LeasePolicy(settings, enforcer(settings), clock=lambda: START)
    db.run_write(lambda conn: chain.run(conn, req))
    with db.read() as conn:
        book = lease.ledger(conn, "late")
    assert lease.balance(book) == {"lease:physical:host:hours": 6}


def test_budget_under_strict_two_level_counts_the_tree(db):
    settings = Settings(db=db.url, quota_model="strict_two_level",
                        lease_policy_filters=("budget",))
    model = models.get_model("strict_two_level")
    with db.write() as conn:
        service = catalog.create_service(conn, type="placement")["id"]
        limits.create_registered(conn, [{
            "service_id": service, "resource_name": "lease:physical:host:hours",
            "default_limit": 10}])
        projects.create(conn, external_id="top", name="top", max_depth=2)
        projects.create(conn, external_id="kid1", name="kid1", parent="top",
                        max_depth=2)
        projects.create(conn, external_id="kid2", name="kid2", parent="top",
                        max_depth=2)
        limits.create_limits(conn, [{
            "project_id": "top", "service_id": service,
            "resource_name": "lease:physical:host:hours",
            "resource_limit": 12}], model)
    chain = lease.LeasePolicy(settings, enforcer(settings), clock=lambda: START)

    def ask(project, hosts, hours):
        req = lease_request("create", body(
            project=project, hours=hours,
            reservations=[{"resource_type": "physical:host", "amount": hosts}]))
        db.run_write(lambda conn: chain.run(conn, req))

    ask("kid1", 2, 4)  # 8 host-hours
    with pytest.raises(lease.LeaseDenied) as info:
        ask("kid2", 1, 5)  # kid2's own 10 allows it; the tree (12) does not
    assert "the projects under top together have only 4 of 12" in info.value.detail
    ask("kid2", 1, 4)
    with pytest.raises(errors.Forbidden):
        ask("top", 1, 1)
