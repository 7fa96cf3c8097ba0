"""The /v1 lease-policy service, as Blazar's external filter calls it.

One test runs Blazar's own ExternalServiceFilter class (in a subprocess:
importing blazar pulls in eventlet and oslo.service, which this process
keeps out of) against a real waitress server on a loopback port. The
others post bodies in the exact shape that filter sends: json.dumps of
{"context": ..., "lease": ...} with naive isoformat datetimes, no lease id
on create, Content-Type application/json and the static X-Auth-Token.
"""
from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import textwrap

import pytest
import requests

from placement_lite.app import create_app
from placement_lite.config import Settings
from tests.live import served

TOKEN = "s3cret-lease-token"
ADMIN = {"x-auth-token": "admin", "content-type": "application/json"}


def app_for(db, **overrides):
    return create_app(Settings(db=db.url, lease_token=TOKEN, **overrides), db)


@pytest.fixture
def service(db):
    with served(app_for(
            db, lease_max_duration_hours=24, lease_exempt_projects=("vip",),
            lease_max_amount={"physical:host": 4, "floatingip": 2})) as base:
        yield base


def setup_budget(base, project, hours):
    def post(path, body):
        resp = requests.post(base + path, json=body, headers=ADMIN, timeout=10)
        assert resp.status_code == 201, resp.text
        return resp.json()
    service_id = post("/v3/services", {"service": {"type": "placement"}})[
        "service"]["id"]
    post("/v3/registered_limits", {"registered_limits": [{
        "service_id": service_id, "resource_name": "lease:physical:host:hours",
        "default_limit": 0}]})
    post("/v3/projects", {"project": {"id": project, "name": project}})
    post("/v3/limits", {"limits": [{
        "project_id": project, "service_id": service_id,
        "resource_name": "lease:physical:host:hours", "resource_limit": hours}]})


def now():
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None, microsecond=0)


def blazar_lease(project, start, hours, hosts=1, name="lease-1", lease_id=None,
                 extra=()):
    """A lease as Blazar's UsageEnforcement.format_lease builds it."""
    lease = {
        "name": name, "user_id": "u1", "project_id": project,
        "start_date": start, "end_date": start + dt.timedelta(hours=hours),
        "trust_id": "t1",
        "reservations": [{
            "resource_type": "physical:host", "min": hosts, "max": hosts,
            "hypervisor_properties": "", "resource_properties": "",
            "allocations": [{"id": f"h{i}", "hypervisor_hostname": f"c{i}"}
                            for i in range(hosts)]},
            *extra],
    }
    if lease_id:
        lease["id"] = lease_id
    return lease


def context(project):
    return {"user_id": "u1", "project_id": project,
            "auth_url": "http://keystone.example.com/identity/v3",
            "region_name": "RegionOne"}


class Encoder(json.JSONEncoder):
    # What Blazar's ISODateTimeEncoder does.
    def default(self, o):
        if isinstance(o, dt.datetime):
            return o.isoformat()
        return super().default(o)


def send(base, endpoint, body, token=TOKEN):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["X-Auth-Token"] = token
    return requests.post(base + "/v1/" + endpoint,
                         data=json.dumps(body, cls=Encoder), headers=headers,
                         timeout=10)


def ledger(base, project):
    resp = requests.get(base + "/quota/lease-ledger",
                        params={"project_id": project},
                        headers={"x-auth-token": "admin"}, timeout=10)
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_max_duration_and_exemptions(service):
    start = now() + dt.timedelta(hours=1)
    body = {"context": context("p1"), "lease": blazar_lease("p1", start, 25)}
    resp = send(service, "check-create", body)
    assert resp.status_code == 403
    assert resp.json()["message"].startswith(
        "Your lease exceeds the maximum length of 24 hours.")
    body["lease"] = blazar_lease("p1", start, 24)
    assert send(service, "check-create", body).status_code == 204
    vip = {"context": context("vip"), "lease": blazar_lease("vip", start, 100)}
    assert send(service, "check-create", vip).status_code == 204
    # An update that stretches the lease is held to the same rule.
    update = {"context": context("p1"),
              "current_lease": blazar_lease("p1", start, 24, lease_id="L1"),
              "lease": blazar_lease("p1", start, 30, lease_id="L1")}
    resp = send(service, "check-update", update)
    assert resp.status_code == 403
    assert "maximum length of 24 hours" in resp.json()["message"]


def test_max_amount_per_reservation(service):
    start = now() + dt.timedelta(hours=1)
    body = {"context": context("p1"), "lease": blazar_lease("p1", start, 2, hosts=5)}
    resp = send(service, "check-create", body)
    assert resp.status_code == 403
    assert resp.json()["message"] == (
        "Your lease asks for 5 hosts in one reservation; at most 4 hosts may "
        "be reserved at once.")
    fip = {"resource_type": "virtual:floatingip", "amount": 3,
           "network_id": "net"}
    body["lease"] = blazar_lease("p1", start, 2, hosts=1, extra=[fip])
    resp = send(service, "check-create", body)
    assert resp.status_code == 403
    assert "3 floating IPs" in resp.json()["message"]


def test_budget_charges_updates_and_refunds(service):
    setup_budget(service, "proj", 100)
    start = now() + dt.timedelta(minutes=1)
    # 2 hosts x 20 hours = 40 host-hours.
    lease = blazar_lease("proj", start, 20, hosts=2, name="big")
    assert send(service, "check-create",
                {"context": context("proj"), "lease": lease}).status_code == 204
    # 3 hosts x 24 hours = 72 more: only 60 are left.
    other = blazar_lease("proj", start, 24, hosts=3, name="other")
    resp = send(service, "check-create",
                {"context": context("proj"), "lease": other})
    assert resp.status_code == 403
    assert resp.json()["message"].startswith(
        "Your lease needs 72 host-hours, but project proj has only 60 of 100 "
        "host-hours left.")
    # Stretching the first lease to 23 hours charges the 6 extra host-hours.
    current = dict(lease, id="L1")
    longer = blazar_lease("proj", start, 23, hosts=2, name="big", lease_id="L1")
    assert send(service, "check-update", {
        "context": context("proj"), "current_lease": current,
        "lease": longer}).status_code == 204
    # It ends at once: everything unused comes back, never more than paid.
    assert send(service, "on-end", {"context": context("proj"),
                                    "lease": longer}).status_code == 204
    book = ledger(service, "proj")
    events = [(e["event"], round(e["hours"])) for e in book["entries"]]
    assert events[:2] == [("create", 40), ("update", 6)]
    assert events[2][0] == "end" and -46 <= events[2][1] <= -45
    assert book["balance"]["lease:physical:host:hours"] < 1
    # A second on-end refunds nothing more.
    assert send(service, "on-end", {"context": context("proj"),
                                    "lease": longer}).status_code == 204
    assert len(ledger(service, "proj")["entries"]) == 3


def test_malformed_bodies_are_400s(service):
    for body in ({}, {"context": {}}, {"context": context("p"), "lease": []},
                 {"context": context("p"), "lease": {"start_date": "soon",
                                                     "end_date": "later"}},
                 {"context": context("p"), "lease": {
                     "start_date": "2030-01-02T00:00:00",
                     "end_date": "2030-01-01T00:00:00"}},
                 {"context": context("p"), "lease": {
                     "start_date": "2030-01-01T00:00:00",
                     "end_date": "2030-01-02T00:00:00",
                     "reservations": [{"resource_type": "physical:host",
                                       "min": "many"}]}}):
        resp = send(service, "check-create", body)
        assert resp.status_code == 400, (body, resp.text)
        assert resp.json()["errors"][0]["detail"]
    resp = requests.post(service + "/v1/check-create", data="{not json",
                         headers={"Content-Type": "application/json",
                                  "X-Auth-Token": TOKEN}, timeout=10)
    assert resp.status_code == 400
    resp = send(service, "check-update", {"context": context("p"),
                                          "lease": blazar_lease("p", now(), 1)})
    assert resp.status_code == 400
    assert "current_lease" in resp.json()["errors"][0]["detail"]


def test_the_static_token_is_required(service):
    body = {"context": context("p1"), "lease": blazar_lease("p1", now(), 1)}
    assert send(service, "check-create", body, token=None).status_code == 401
    assert send(service, "check-create", body, token="wrong").status_code == 401


BLAZAR_DRIVER = textwrap.dedent("""
    import datetime as dt, json, sys
    from oslo_config import cfg
    from blazar.enforcement.exceptions import ExternalServiceFilterException
    from blazar.enforcement.filters.external_service_filter import (
        ExternalServiceFilter)

    base, token = sys.argv[1], sys.argv[2]
    conf = cfg.ConfigOpts()
    conf([], project="blazar")
    conf.register_opts(ExternalServiceFilter.enforcement_opts, "enforcement")
    conf.set_override("external_service_base_endpoint", base, "enforcement")
    conf.set_override("external_service_token", token, "enforcement")
    f = ExternalServiceFilter(conf=conf)

    start = dt.datetime.utcnow().replace(microsecond=0) + dt.timedelta(hours=1)
    ctx = {"user_id": "u1", "project_id": "bp", "auth_url": "http://ks/v3",
           "region_name": "RegionOne"}

    def lease(hours, hosts, lease_id=None):
        out = {"name": "bl", "user_id": "u1", "project_id": "bp",
               "start_date": start, "end_date": start + dt.timedelta(hours=hours),
               "reservations": [{"resource_type": "physical:host",
                                 "min": hosts, "max": hosts,
                                 "hypervisor_properties": "",
                                 "resource_properties": "",
                                 "allocations": [{"id": str(i)}
                                                 for i in range(hosts)]}]}
        if lease_id:
            out["id"] = lease_id
        return out

    def outcome(call, *args):
        try:
            call(ctx, *args)
            return "allowed"
        except ExternalServiceFilterException as exc:
            return "denied: " + str(exc)

    print(json.dumps([
        outcome(f.check_create, lease(30, 1)),
        outcome(f.check_create, lease(5, 2)),
        outcome(f.check_update, lease(5, 2, "L"), lease(6, 2, "L")),
        outcome(f.check_update, lease(5, 2, "L"), lease(10, 2, "L")),
        outcome(f.on_end, lease(6, 2, "L")),
    ]))
""")


def test_blazars_own_external_service_filter(db):
    with served(app_for(db, lease_max_duration_hours=24)) as base:
        setup_budget(base, "bp", 14)
        # Blazar joins "check-create" onto its base: the base ends in /v1/.
        run = subprocess.run([sys.executable, "-c", BLAZAR_DRIVER,
                              base + "/v1/", TOKEN],
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        outcomes = json.loads(run.stdout.strip().splitlines()[-1])
    assert outcomes[0].startswith(
        "denied: Your lease exceeds the maximum length of 24 hours.")
    assert outcomes[1] == "allowed"            # 10 of 14 host-hours
    assert outcomes[2] == "allowed"            # +2: 12 of 14
    assert outcomes[3].startswith(             # +10 more: only 2 left
        "denied: Your lease needs 10 host-hours, but project bp has only 2 of "
        "14 host-hours left.")
    assert outcomes[4] == "allowed"


def test_without_a_lease_token_the_endpoints_need_an_identity(db):
    import falcon.testing

    client = falcon.testing.TestClient(create_app(Settings(db=db.url), db))
    payload = {"context": context("p1"), "lease": blazar_lease("p1", now(), 1)}
    raw = json.dumps(payload, cls=Encoder)
    headers = {"Content-Type": "application/json"}
    assert client.simulate_post("/v1/check-create", body=raw,
                                headers=headers).status_code == 401
    # A non-admin identity is refused by placement:lease:check (legacy).
    assert client.simulate_post("/v1/check-create", body=raw, headers={
        **headers, "X-Auth-Token": "someone:p1"}).status_code == 403
    assert client.simulate_post("/v1/check-create", body=raw, headers={
        **headers, "X-Auth-Token": "admin"}).status_code == 204
