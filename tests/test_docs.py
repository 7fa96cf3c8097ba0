"""The error bodies README.md and docs/quota.md show are the service's:
each is asked for again here, the way the text says it comes about, and
compared whole (only the request id, `req-...` in the text, may differ).
A message reworded in the code fails here until the docs say it too."""
from __future__ import annotations

import contextlib
import copy
import json
import pathlib
import re
import uuid

import falcon.testing
import pytest

from placement_lite.app import create_app
from placement_lite.config import Settings
from tests.backends import fresh_database

ROOT = pathlib.Path(__file__).resolve().parent.parent
ADMIN = {"x-auth-token": "admin", "openstack-api-version": "placement latest"}
FENCE = re.compile(r"^( *)```json\n(.*?)^\1```", re.M | re.S)


def json_examples(name: str) -> list:
    """Every ```json block of the document that is one JSON value."""
    found = []
    for indent, body in FENCE.findall((ROOT / name).read_text(encoding="utf-8")):
        text = "\n".join(line[len(indent):] for line in body.splitlines())
        try:
            found.append(json.loads(text))
        except ValueError:
            pass  # a sketch with elisions, not a body
    return found


def shown(body: dict) -> dict:
    """`body` as the docs write it: request ids elided."""
    body = copy.deepcopy(body)
    for err in body.get("errors", ()):
        if "request_id" in err:
            err["request_id"] = "req-..."
    return body


def example(name: str, matches) -> dict:
    found = [doc for doc in json_examples(name) if matches(doc)]
    assert len(found) == 1, f"{name}: {len(found)} examples match, not one"
    return found[0]


@pytest.fixture
def client_with():
    with contextlib.ExitStack() as stack:
        def make(**settings):
            db = stack.enter_context(fresh_database("sqlite"))
            return falcon.testing.TestClient(
                create_app(Settings(db=db.url, **settings), db))
        yield make


def _ok(result):
    assert result.status_code < 300, result.text
    return result


def test_readmes_generation_conflict_is_the_traits_step_run_again(client_with):
    client = client_with()
    rp = "c0c0c0c0-0000-4000-8000-000000000001"
    traits = {"resource_provider_generation": 1, "traits": ["HW_CPU_X86_AVX2"]}
    # The walk-through, in its order.
    _ok(client.simulate_post("/resource_providers", headers=ADMIN,
                             json={"name": "cn1", "uuid": rp}))
    _ok(client.simulate_put(f"/resource_providers/{rp}/inventories", headers=ADMIN, json={
        "resource_provider_generation": 0,
        "inventories": {"VCPU": {"total": 16, "allocation_ratio": 4.0},
                        "MEMORY_MB": {"total": 65536, "reserved": 512},
                        "DISK_GB": {"total": 1000}}}))
    _ok(client.simulate_put(f"/resource_providers/{rp}/traits", headers=ADMIN, json=traits))
    _ok(client.simulate_put(f"/resource_providers/{rp}/aggregates", headers=ADMIN, json={
        "resource_provider_generation": 2,
        "aggregates": ["a9a9a9a9-0000-4000-8000-000000000001"]}))
    _ok(client.simulate_put("/allocations/5e5e5e5e-0000-4000-8000-000000000001",
                            headers=ADMIN, json={
                                "allocations": {rp: {"resources": {"VCPU": 2,
                                                                   "MEMORY_MB": 4096}}},
                                "project_id": "p1", "user_id": "u1",
                                "consumer_generation": None,
                                "consumer_type": "INSTANCE"}))
    again = client.simulate_put(f"/resource_providers/{rp}/traits", headers=ADMIN,
                                json=traits)
    assert again.status_code == 409
    doc = example("README.md", lambda d: any(
        e.get("code") == "placement.concurrent_update" for e in d.get("errors", ())))
    assert doc == shown(again.json)


def test_quota_docs_v3_refusal_is_keystones_shape(client_with):
    client = client_with(quota_model="strict_two_level")
    for project in ({"id": "A", "name": "A"}, {"id": "B", "name": "B", "parent_id": "A"}):
        _ok(client.simulate_post("/v3/projects", headers=ADMIN, json={"project": project}))
    deep = client.simulate_post("/v3/projects", headers=ADMIN, json={
        "project": {"id": "D", "name": "D", "parent_id": "B"}})
    assert deep.status_code == 403
    assert example("docs/quota.md", lambda d: "error" in d) == deep.json


def test_quota_docs_lease_answers_are_the_services(client_with):
    client = client_with(lease_token="lease-secret", lease_max_duration_hours=24)
    headers = {"x-auth-token": "lease-secret"}

    def check(start, end, reservations=()):
        return client.simulate_post("/v1/check-create", headers=headers, json={
            "context": {"project_id": "p1"},
            "lease": {"start_date": start, "end_date": end,
                      "reservations": list(reservations)}})

    refused = check("2030-01-01T00:00:00", "2030-01-03T00:00:00")
    assert refused.status_code == 403
    assert example("docs/quota.md", lambda d: "message" in d) == refused.json
    malformed = check("2030-01-01T00:00:00", "2030-01-01T12:00:00",
                      [{"resource_type": "physical:host", "min": 3, "max": 2}])
    assert malformed.status_code == 400
    doc = example("docs/quota.md", lambda d: any(
        e.get("code") == "placement.lease.malformed" for e in d.get("errors", ())))
    assert doc == shown(malformed.json)


def test_quota_docs_refusal_beside_a_reservation_is_the_services():
    from placement_lite.db import tables as t
    from sqlalchemy import select
    from tests import factories

    start = 4099798800  # 2099-12-01T09:00:00Z
    with fresh_database("sqlite") as db:
        client = falcon.testing.TestClient(create_app(
            Settings(db=db.url, quota_enforce=True), db))
        service = _ok(client.simulate_post("/v3/services", headers=ADMIN, json={
            "service": {"type": "placement"}})).json["service"]["id"]
        _ok(client.simulate_post("/v3/registered_limits", headers=ADMIN, json={
            "registered_limits": [{"service_id": service, "default_limit": 10,
                                   "resource_name": "class:VCPU"}]}))
        rp = _ok(client.simulate_post("/resource_providers", headers=ADMIN,
                                      json={"name": "cn1"})).json["uuid"]
        _ok(client.simulate_put(f"/resource_providers/{rp}/inventories",
                                headers=ADMIN, json={
                                    "resource_provider_generation": 0,
                                    "inventories": {"VCPU": {"total": 64}}}))

        def claim(amount):
            return client.simulate_put(
                f"/allocations/{uuid.uuid4()}", headers=ADMIN, json={
                    "allocations": {rp: {"resources": {"VCPU": amount}}},
                    "project_id": "p1", "user_id": "u1",
                    "consumer_generation": None, "consumer_type": "INSTANCE"})

        _ok(claim(4))
        with db.write() as conn:
            rp_id = conn.scalar(select(t.resource_providers.c.id).where(
                t.resource_providers.c.uuid == rp))
            factories.reservation(conn, "p1", start, start + 8 * 3600,
                                  {rp_id: {"VCPU": 6}})
        refused = claim(1)
    assert refused.status_code == 403
    doc = example("docs/quota.md", lambda d: any(
        "at" in o for e in d.get("errors", ()) for o in e.get("over_limit", ())))
    assert doc == shown(refused.json)
