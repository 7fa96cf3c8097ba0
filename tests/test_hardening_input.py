"""Hostile input is a clear 400, never a 500 or a wrong ledger (issue 10).

NaN and the infinities are not JSON, and a capacity computed from one
compares false with everything (PostgreSQL stored it and then granted any
claim); lone surrogates cannot be encoded and were a 500; uuids in paths
are found however they are spelled; an echoed value is quoted short; and
validation errors start with Placement's own phrases. On every backend.
"""
from __future__ import annotations

import json
import math
import uuid as uuidlib

import falcon.testing
import pytest
from sqlalchemy import select

from placement_lite.api import echo, request
from placement_lite.api.errors import ApiError
from placement_lite.api.paths import canonical_uuid
from placement_lite.api.schemas import inventories as inv_schema
from placement_lite.app import create_app
from placement_lite.config import Settings
from placement_lite.db import tables as t
from placement_lite.ledger import capacity
from tests import factories

HEADERS = {"X-Auth-Token": "admin", "OpenStack-API-Version": "placement latest",
           "Content-Type": "application/json"}
PROJECT = "6c5b3a3c-7a0e-4a57-9d3c-1a2f6a6e8b10"
USER = "0f2b2a1e-3c51-4a3f-8f0d-6b1d1d2f9e21"


@pytest.fixture
def client(db):
    return falcon.testing.TestClient(create_app(Settings(db=db.url), db))


def call(client, method, path, raw=None, body=None, query=None, version=None):
    headers = dict(HEADERS)
    if version:
        headers["OpenStack-API-Version"] = f"placement {version}"
    if body is not None:
        raw = json.dumps(body)
    return client.simulate_request(method, path, headers=headers, body=raw,
                                   query_string=query)


def error_of(result, status=400) -> str:
    """The detail of an error response, in either documented shape."""
    assert result.status_code == status, result.text
    body = result.json
    if "error" in body:  # Keystone's shape on /v3
        assert body["error"]["code"] == status
        return body["error"]["message"]
    (err,) = body["errors"]
    assert err["status"] == status
    return err["detail"]


def new_provider(client, inventory: dict | None = None) -> str:
    rp = str(uuidlib.uuid4())
    assert call(client, "POST", "/resource_providers",
                body={"name": f"rp-{rp}", "uuid": rp}).status_code == 200
    if inventory:
        assert call(client, "PUT", f"/resource_providers/{rp}/inventories",
                    body={"resource_provider_generation": 0,
                          "inventories": inventory}).status_code == 200
    return rp


def claim(client, rp: str, consumer: str | None = None, **resources):
    return call(client, "PUT", f"/allocations/{consumer or uuidlib.uuid4()}", body={
        "allocations": {rp: {"resources": resources}},
        "project_id": PROJECT, "user_id": USER,
        "consumer_generation": None, "consumer_type": "INSTANCE"})


# -- NaN and the infinities ---------------------------------------------------

NOT_JSON = ["NaN", "Infinity", "-Infinity", "1e999", "-1e999"]


@pytest.mark.parametrize("constant", NOT_JSON)
def test_nan_and_infinities_are_refused_before_anything_is_stored(client, constant):
    rp = new_provider(client, {"VCPU": {"total": 4}})
    before = call(client, "GET", f"/resource_providers/{rp}/inventories").json
    raw = ('{"resource_provider_generation": 1, "inventories": {"VCPU": '
           '{"total": 4, "allocation_ratio": %s}}}' % constant)
    detail = error_of(call(client, "PUT", f"/resource_providers/{rp}/inventories",
                           raw=raw))
    assert detail.startswith("Malformed JSON: ")
    assert "at 'inventories/VCPU/allocation_ratio'" in detail
    assert "not a JSON number" in detail
    detail = error_of(call(client, "PUT", f"/resource_providers/{rp}/inventories/VCPU",
                           raw='{"resource_provider_generation": 1, "total": 4, '
                               '"allocation_ratio": %s}' % constant))
    assert "at 'allocation_ratio'" in detail
    assert call(client, "GET", f"/resource_providers/{rp}/inventories").json == before
    # A claim the NaN would have let through is still refused.
    assert claim(client, rp, VCPU=1000000).status_code == 409


@pytest.mark.parametrize("method,path,raw", [
    ("POST", "/resource_providers", '{"name": "x", "generation": NaN}'),
    ("PUT", "/allocations/7c8b3f4e-ef0e-4bcb-b9f2-7d1b0b8e4a10",
     '{"allocations": {}, "project_id": "p", "user_id": "u", '
     '"consumer_generation": Infinity, "consumer_type": "INSTANCE"}'),
    ("POST", "/allocations", '{"x": [1, 2, -Infinity]}'),
    ("POST", "/reshaper", '{"inventories": {}, "allocations": {}, "x": NaN}'),
    ("POST", "/quota/check", '{"project_id": "p", "deltas": {"VCPU": NaN}}'),
    ("POST", "/v3/registered_limits",
     '{"registered_limits": [{"service_id": "s", "resource_name": "VCPU", '
     '"default_limit": Infinity}]}'),
    ("POST", "/v3/limits", '{"limits": [{"project_id": "p", "service_id": "s", '
     '"resource_name": "VCPU", "resource_limit": NaN}]}'),
    ("POST", "/v1/check-create", '{"reservation": {"amount": NaN}}'),
])
def test_nan_is_malformed_json_on_every_route(client, method, path, raw):
    detail = error_of(call(client, method, path, raw=raw))
    assert detail.startswith("Malformed JSON: "), detail
    assert "not a JSON number" in detail


def test_the_schema_layer_refuses_non_finite_numbers_too():
    # Whatever parsed the body, "type: number" admits no NaN or infinity.
    for value in (math.nan, math.inf, -math.inf):
        with pytest.raises(ApiError) as caught:
            request.validate({"resource_provider_generation": 0, "total": 4,
                              "allocation_ratio": value}, inv_schema.UPDATE_ONE)
        assert "at 'allocation_ratio'" in caught.value.description
    request.validate({"resource_provider_generation": 0, "total": 4,
                      "allocation_ratio": 16.0}, inv_schema.UPDATE_ONE)


def test_a_non_finite_ratio_is_no_capacity():
    assert capacity.capacity_from(8, 0, math.nan) == 0
    assert capacity.capacity_from(8, 0, math.inf) == 0
    assert capacity.capacity_from(8, 0, -math.inf) == 0
    assert capacity.capacity_from(8, 2, 1.5) == 9


@pytest.mark.parametrize("ratio", [math.nan, math.inf])
def test_a_stored_non_finite_ratio_grants_nothing(db, client, ratio):
    """A row another tool wrote (PostgreSQL stores NaN, SQLite infinity):
    claims and candidates treat it as no capacity, and nothing is a 500."""
    try:
        with db.write() as conn:
            rp = factories.provider(conn)
            factories.inventory(conn, rp, "VCPU", 4, allocation_ratio=ratio)
            stored = conn.scalar(select(t.inventories.c.allocation_ratio).where(
                t.inventories.c.resource_provider_id == rp["id"]))
    except Exception as exc:  # the database refuses to hold it at all
        pytest.skip(f"{db.engine.dialect.name} cannot store {ratio}: {exc}")
    if stored is None or math.isfinite(stored):
        pytest.skip(f"{db.engine.dialect.name} stored {ratio} as {stored}")
    assert claim(client, rp["uuid"], VCPU=1).status_code == 409
    assert claim(client, rp["uuid"], VCPU=1000000).status_code == 409
    found = call(client, "GET", "/allocation_candidates", query="resources=VCPU:1")
    assert found.status_code == 200, found.text
    assert found.json["allocation_requests"] == []
    # Two classes take the engine's in-memory path for capacities.
    found = call(client, "GET", "/allocation_candidates",
                 query="resources=VCPU:1,MEMORY_MB:1")
    assert found.status_code == 200, found.text
    listed = call(client, "GET", "/resource_providers", query="resources=VCPU:1")
    assert listed.status_code == 200 and listed.json["resource_providers"] == []


# -- lone surrogates -------------------------------------------------------------

def test_lone_surrogates_name_the_field_on_every_route_listed(client):
    rp = new_provider(client, {"VCPU": {"total": 4}})
    cases = [
        ("POST", "/resource_providers", '{"name": "bad\\ud800x"}', "name"),
        ("POST", "/resource_providers", '{"name": "ok", "\\udfffkey": 1}', "\\udfffkey"),
        ("PUT", f"/resource_providers/{rp}", '{"name": "\\ud800"}', "name"),
        ("PUT", f"/allocations/{uuidlib.uuid4()}",
         '{"allocations": {"%s": {"resources": {"VCPU": 1}}}, '
         '"project_id": "\\ud800", "user_id": "u", "consumer_generation": null, '
         '"consumer_type": "INSTANCE"}' % rp, "project_id"),
        ("PUT", f"/allocations/{uuidlib.uuid4()}",
         '{"allocations": {"%s": {"resources": {"VCPU": 1}}}, '
         '"project_id": "p", "user_id": "a\\udc00", "consumer_generation": null, '
         '"consumer_type": "INSTANCE"}' % rp, "user_id"),
        ("POST", "/v3/projects", '{"project": {"id": "\\ud800", "name": "p"}}',
         "project/id"),
        ("POST", "/v3/projects", '{"project": {"name": "p\\udbff"}}', "project/name"),
        ("POST", "/v3/services", '{"service": {"type": "\\ud800"}}', "service/type"),
        ("POST", "/quota/check", '{"project_id": "\\ud800", "deltas": {"VCPU": 1}}',
         "project_id"),
        ("POST", "/quota/check", '{"project_id": "p", "deltas": {"\\ud800": 1}}',
         "deltas/\\ud800"),
    ]
    for method, path, raw, field in cases:
        detail = error_of(call(client, method, path, raw=raw))
        assert detail.startswith("Malformed JSON: "), (path, detail)
        assert f"at '{field}'" in detail, (path, detail)
        assert "lone surrogate" in detail, (path, detail)
    # Nothing was stored or renamed.
    names = [p["name"] for p in call(client, "GET", "/resource_providers")
             .json["resource_providers"]]
    assert names == [f"rp-{rp}"]
    assert call(client, "GET", f"/resource_providers/{rp}/usages").json[
        "usages"] == {"VCPU": 0}
    assert call(client, "GET", "/v3/projects").json["projects"] == []


# -- uuids in paths --------------------------------------------------------------

def spellings(value: str) -> list[str]:
    return [value.upper(), value.replace("-", ""), value.replace("-", "").upper(),
            "{%s}" % value]


def test_canonical_uuid():
    value = "2290d4af-9e6e-400b-9d65-1ee01376f71a"
    for spelled in spellings(value) + [value, f"urn:uuid:{value}"]:
        assert canonical_uuid(spelled) == value
    for bad in ("", "nope", value + "0", value[:-1], "g" * 32, value + "x"):
        assert canonical_uuid(bad) is None, bad


def test_a_provider_is_found_however_its_uuid_is_spelled(client):
    rp = new_provider(client, {"VCPU": {"total": 8}})
    for spelled in spellings(rp):
        got = call(client, "GET", f"/resource_providers/{spelled}")
        assert got.status_code == 200, (spelled, got.text)
        assert got.json["uuid"] == rp
        for sub in ("inventories", "inventories/VCPU", "usages", "traits",
                    "aggregates", "allocations"):
            got = call(client, "GET", f"/resource_providers/{spelled}/{sub}")
            assert got.status_code == 200, (spelled, sub, got.text)
    # Writes through another spelling change the same provider.
    generation = call(client, "GET", f"/resource_providers/{rp}").json["generation"]
    got = call(client, "PUT", f"/resource_providers/{rp.upper()}/inventories/VCPU",
               body={"resource_provider_generation": generation, "total": 16})
    assert got.status_code == 200, got.text
    assert call(client, "GET", f"/resource_providers/{rp}/inventories/VCPU"
                ).json["total"] == 16
    assert call(client, "GET", "/resource_providers/not-a-uuid").status_code == 404


def test_a_consumer_is_found_however_its_uuid_is_spelled(client):
    rp = new_provider(client, {"VCPU": {"total": 8}})
    consumer = str(uuidlib.uuid4())
    assert claim(client, rp, consumer.upper(), VCPU=2).status_code == 204
    for spelled in spellings(consumer):
        got = call(client, "GET", f"/allocations/{spelled}")
        assert got.status_code == 200
        assert got.json["allocations"][rp]["resources"] == {"VCPU": 2}, spelled
    listed = call(client, "GET", f"/resource_providers/{rp}/allocations").json
    assert list(listed["allocations"]) == [consumer]
    assert call(client, "DELETE",
                f"/allocations/{consumer.replace('-', '')}").status_code == 204
    assert call(client, "GET", f"/resource_providers/{rp}/usages").json[
        "usages"] == {"VCPU": 0}


# -- what errors say ------------------------------------------------------------

def test_uuid_errors_in_bodies_say_not_a_valid_uuid(client):
    rp = new_provider(client)
    for method, path, body, field in [
        ("POST", "/resource_providers", {"name": "x", "uuid": "this is not a uuid"},
         "uuid"),
        ("PUT", f"/resource_providers/{rp}/aggregates",
         {"aggregates": ["harry"], "resource_provider_generation": 0}, "aggregates/0"),
        ("POST", "/resource_providers", {"name": "y", "parent_provider_uuid": "nope"},
         "parent_provider_uuid"),
    ]:
        detail = error_of(call(client, method, path, body=body))
        assert detail.startswith("JSON does not validate: "), detail
        assert "is not a valid UUID" in detail and f"at '{field}'" in detail, detail
        assert "[0-9a-fA-F]" not in detail, detail
    detail = error_of(call(client, "PUT", f"/allocations/{uuidlib.uuid4()}", body={
        "allocations": {"nice_house_friend": {"resources": {"VCPU": 1}}},
        "project_id": PROJECT, "user_id": USER, "consumer_generation": None,
        "consumer_type": "INSTANCE"}))
    assert "'nice_house_friend' does not match any of the regexes" in detail
    assert "not a valid UUID" in detail and "[0-9a-fA-F]" not in detail


def test_validation_errors_start_with_placements_phrases(client):
    detail = error_of(call(client, "POST", "/resource_providers",
                           body={"name": "x" * 201}))
    assert detail.startswith("JSON does not validate: ")
    assert "Failed validating 'maxLength' in schema['properties']['name']" in detail
    detail = error_of(call(client, "POST", "/resource_providers",
                           body={"name": "x", "bogus": 1}))
    assert detail.startswith(
        "JSON does not validate: Additional properties are not allowed ('bogus' was "
        "unexpected)")
    detail = error_of(call(client, "GET", "/resource_providers", query="bogus=1"))
    assert detail.startswith("Invalid query string parameters: Additional properties")
    detail = error_of(call(client, "GET", "/resource_providers", query="uuid=nope"))
    assert detail.startswith("Invalid query string parameters: 'nope' is not a "
                             "valid UUID")
    detail = error_of(call(client, "GET", "/usages", query="project_id=p&bogus=1"))
    assert detail.startswith("Invalid query string parameters: ")


LONG = "z" * 5000


def test_echoed_values_are_quoted_short(client):
    rp = new_provider(client)
    results = [
        call(client, "POST", "/resource_providers", body={"name": "x", "uuid": LONG}),
        call(client, "POST", "/resource_providers", body={"name": LONG}),
        call(client, "PUT", f"/resource_providers/{rp}/aggregates",
             body={"aggregates": [LONG] * 3, "resource_provider_generation": 0}),
        call(client, "PUT", f"/resource_providers/{rp}/aggregates",
             body={"aggregates": list(range(10000)), "resource_provider_generation": 0}),
        call(client, "POST", "/resource_providers",
             body={"name": "x", **{f"k{i}": 1 for i in range(2000)}}),
        call(client, "GET", f"/resource_providers/{LONG}"),
        call(client, "GET", f"/resource_providers/{LONG}/inventories"),
        call(client, "GET", "/resource_providers", query=f"uuid={LONG}"),
        call(client, "GET", "/resource_providers", query=f"member_of={LONG}"),
        call(client, "GET", "/allocation_candidates", query=f"resources={LONG}:1"),
        call(client, "GET", f"/traits/{LONG}"),
        call(client, "PUT", f"/allocations/{LONG}"),
        call(client, "GET", "/resource_providers", query=f"{LONG}=1"),
    ]
    for result in results:
        assert 400 <= result.status_code < 500, result.text[:300]
        detail = error_of(result, result.status_code)
        assert "z" * 300 not in detail, detail
        assert len(detail) < 1500, (len(detail), detail[:300])


def test_bound_cuts_long_runs_and_long_details():
    assert echo.bound("short detail") == "short detail"
    cut = echo.bound(f"No resource provider with uuid {LONG} found.")
    assert cut.startswith("No resource provider with uuid zzz")
    assert "(5000 characters)" in cut and cut.endswith(" found.")
    assert len(echo.bound("word " * 3000)) < 2100
    assert echo.quote("a\ud800") == "'a\\ud800'"
    assert echo.quote(10 ** 5000).startswith("<an integer of about")


@pytest.mark.parametrize("path,body", [
    ("/resource_providers/{rp}/inventories/VCPU",
     {"resource_provider_generation": 2 ** 70, "total": 4}),
    ("/resource_providers/{rp}/aggregates",
     {"aggregates": [], "resource_provider_generation": -(2 ** 64)}),
    ("/resource_providers/{rp}/traits",
     {"traits": [], "resource_provider_generation": 10 ** 30}),
])
def test_integers_wider_than_a_column_are_400(client, path, body):
    rp = new_provider(client, {"VCPU": {"total": 4}})
    detail = error_of(call(client, "PUT", path.format(rp=rp), body=body))
    assert "out of range" in detail and "resource_provider_generation" in detail


@pytest.mark.parametrize("path", ["/v1/check-create", "/v1/check-update"])
def test_a_lease_resource_type_too_long_for_its_column_is_400(client, path):
    # Found by tests/test_fuzz.py: a 500 on MariaDB and PostgreSQL, whose
    # column holds 255 characters (SQLite does not enforce lengths).
    lease = {"id": "lease-1", "start_date": "2030-01-01 00:00",
             "end_date": "2030-01-02 00:00",
             "reservations": [{"resource_type": LONG, "amount": 1}]}
    body = {"context": {"project_id": "proj-a", "user_id": "user-a"},
            "lease": lease, "current_lease": lease}
    detail = error_of(call(client, "POST", path, body=body))
    assert "resource_type" in detail, detail


@pytest.mark.parametrize("path,query,named", [
    ("/resource_providers", "name=%ED%A0%80", "'name'"),
    ("/usages", "project_id=a%ED%B0%80b", "'project_id'"),
    ("/allocation_candidates", "resources=VCPU:1&required=%FF", "'required'"),
    ("/resource_providers", "%ED%A0%80=1", "name of parameter"),
    ("/resource_providers/%ED%A0%80", None, "'%ED%A0%80'"),
    ("/traits/CUSTOM_%ED%A0%80", None, "'CUSTOM_%ED%A0%80'"),
    ("/v3/projects/%ED%A0%80", None, "'%ED%A0%80'"),
])
def test_a_url_that_is_not_utf8_is_400_naming_the_parameter(db, path, query, named):
    """A lone surrogate's bytes, percent-encoded, are not text: a 400 as
    Placement answers for an undecodable query string, not a lookup of
    replacement characters (a 404, or a 200 that found nothing)."""
    from tests.live import served
    import urllib.error
    import urllib.request
    with served(create_app(Settings(db=db.url), db)) as base:
        req = urllib.request.Request(
            base + path + (f"?{query}" if query else ""),
            headers={"X-Auth-Token": "admin",
                     "OpenStack-API-Version": "placement latest"})
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(req, timeout=10)
        raw = caught.value.read()
    assert caught.value.code == 400
    body = json.loads(raw)
    detail = body["error"]["message"] if "error" in body else body["errors"][0]["detail"]
    assert "not UTF-8" in detail and named in detail, detail
    if query:
        assert detail.startswith("Invalid query string parameters: ")


def test_uniqueness_of_a_long_array_is_checked_in_linear_time(client):
    """jsonschema compares unhashable items pairwise: 10,000 distinct
    objects in an aggregates list cost minutes of CPU in one request."""
    import time
    rp = new_provider(client)
    items = [{"a": i} for i in range(3000)]
    started = time.monotonic()
    detail = error_of(call(client, "PUT", f"/resource_providers/{rp}/aggregates",
                           body={"aggregates": items, "resource_provider_generation": 0}))
    assert time.monotonic() - started < 3, time.monotonic() - started
    assert detail.startswith("JSON does not validate: ")
    # Still refused when items repeat, however they are spelled.
    for repeated in (["a", "b", "a"], [{"x": [1, 2]}, {"x": [1, 2.0]}], [1, 1.0]):
        with pytest.raises(ApiError) as caught:
            request.validate(repeated, {"type": "array", "uniqueItems": True})
        assert "non-unique" in caught.value.description
    for distinct in ([1, True], [0, False], [{"a": 1}, {"a": "1"}], [[1], [1, 1]]):
        request.validate(distinct, {"type": "array", "uniqueItems": True})
