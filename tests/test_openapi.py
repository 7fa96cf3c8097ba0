"""/openapi.json is a valid OpenAPI 3.1 document, and its request bodies
are the service's.

- A real validator (openapi-spec-validator) checks the whole document,
  under the settings that change it.
- Every route that reads a JSON body says so in the document, and no
  other: each write route of a small world is sent a malformed body, and
  the routes that refuse it as malformed JSON are exactly those with a
  requestBody.
- The bodies the service takes (one or more per route, building that
  world) are valid against the document's schema for the route, Blazar's
  digit-string counts included.
"""
from __future__ import annotations

import contextlib
import io
import json
from wsgiref.util import setup_testing_defaults

import falcon.testing
import jsonschema
import pytest

from placement_lite.api.request import PHRASE_MALFORMED
from placement_lite.app import create_app
from placement_lite.config import Settings
from tests.backends import fresh_database

spec_validator = pytest.importorskip(
    "openapi_spec_validator", reason="pip install openapi-spec-validator")
schema_validator = pytest.importorskip("openapi_schema_validator")

RP, RP2 = "c0c0c0c0-0000-4000-8000-00000000000a", "c0c0c0c0-0000-4000-8000-00000000000b"
AGG = "a9a9a9a9-0000-4000-8000-00000000000a"
C1, C2, C3 = (f"5e5e5e5e-0000-4000-8000-00000000000{n}" for n in (1, 2, 3))
# A pending reservation and an active one.
R1, R2 = "7e7e7e7e-0000-4000-8000-00000000000a", "7e7e7e7e-0000-4000-8000-00000000000b"
WRITES = ("put", "post", "patch")


def _document(**settings) -> dict:
    with fresh_database("sqlite") as db:
        client = falcon.testing.TestClient(create_app(Settings(db=db.url, **settings), db))
        result = client.simulate_get("/openapi.json")
    assert result.status_code == 200, result.text
    return result.json


@pytest.mark.parametrize("settings", [
    {}, {"metrics": True}, {"lease_token": "secret"},
    {"quota_limits_public_read": True}], ids=["default", "metrics", "lease-token",
                                              "public-limits"])
def test_the_document_is_valid_openapi(settings):
    doc = _document(**settings)
    assert doc["openapi"] == "3.1.0"
    spec_validator.validate(doc)


def test_the_validator_finds_what_was_wrong():
    """The stray key a comma made in one-line YAML (`{description:
    Refused, with a message.}`) is what the validator refuses."""
    doc = _document()
    doc["paths"]["/v1/check-create"]["post"]["responses"]["403"] = {
        "description": "Refused", "with a message.": None}
    with pytest.raises(spec_validator.validation.exceptions.OpenAPIValidationError):
        spec_validator.validate(doc)


def call(app, method: str, path: str, body=None, raw: bytes = None,
         token: str = "admin") -> tuple:
    """(status, parsed body) of one request straight through the WSGI app
    (falcon's test client refuses Placement's 201 without a body type)."""
    data = raw if raw is not None else (
        json.dumps(body).encode() if body is not None else b"")
    environ = {"REQUEST_METHOD": method.upper(), "PATH_INFO": path,
               "QUERY_STRING": "", "HTTP_X_AUTH_TOKEN": token,
               "HTTP_OPENSTACK_API_VERSION": "placement latest",
               "HTTP_ACCEPT": "application/json", "wsgi.input": io.BytesIO(data)}
    if data:
        environ.update(CONTENT_TYPE="application/json", CONTENT_LENGTH=str(len(data)))
    setup_testing_defaults(environ)
    seen = []
    answer = b"".join(app(environ, lambda status, headers, exc=None: seen.append(status)))
    return int(seen[0].split()[0]), (json.loads(answer) if answer else None)


class World:
    """A small cloud built through the API; each body the service took is
    kept with its route."""

    def __init__(self, app):
        self.app = app
        self.taken: list = []

    def send(self, verb, template, path, body):
        status, answer = call(self.app, verb, path, body)
        assert status < 300, (verb, path, status, answer)
        self.taken.append((template, verb, body))
        return answer

    def generation(self, uuid=RP):
        return call(self.app, "GET", f"/resource_providers/{uuid}")[1]["generation"]


def _placement(w: World) -> None:
    w.send("post", "/resource_providers", "/resource_providers",
           {"name": "cn1", "uuid": RP})
    w.send("post", "/resource_providers", "/resource_providers",
           {"name": "cn2", "uuid": RP2, "parent_provider_uuid": RP})
    w.send("put", "/resource_providers/{uuid}", f"/resource_providers/{RP2}",
           {"name": "cn1-child", "parent_provider_uuid": RP})
    w.send("put", "/resource_providers/{uuid}/inventories",
           f"/resource_providers/{RP}/inventories",
           {"resource_provider_generation": w.generation(), "inventories": {
               "VCPU": {"total": 16, "allocation_ratio": 4.0, "max_unit": 16},
               "MEMORY_MB": {"total": 8192, "reserved": 512}}})
    w.send("post", "/resource_providers/{uuid}/inventories",
           f"/resource_providers/{RP}/inventories",
           {"resource_class": "DISK_GB", "total": 100,
            "resource_provider_generation": w.generation()})
    w.send("put", "/resource_providers/{uuid}/inventories/{resource_class}",
           f"/resource_providers/{RP}/inventories/DISK_GB",
           {"resource_provider_generation": w.generation(), "total": 200})
    w.send("put", "/resource_providers/{uuid}/inventories",
           f"/resource_providers/{RP2}/inventories",
           {"resource_provider_generation": w.generation(RP2),
            "inventories": {"VCPU": {"total": 8}}})
    w.send("put", "/resource_providers/{uuid}/aggregates",
           f"/resource_providers/{RP}/aggregates",
           {"aggregates": [AGG], "resource_provider_generation": w.generation()})
    w.send("post", "/resource_classes", "/resource_classes", {"name": "CUSTOM_GOLD"})
    assert call(w.app, "PUT", "/traits/CUSTOM_FAST")[0] == 201
    w.send("put", "/resource_providers/{uuid}/traits", f"/resource_providers/{RP}/traits",
           {"traits": ["CUSTOM_FAST", "HW_CPU_X86_AVX2"],
            "resource_provider_generation": w.generation()})
    w.send("put", "/allocations/{consumer_uuid}", f"/allocations/{C1}",
           {"allocations": {RP: {"resources": {"VCPU": 2, "MEMORY_MB": 1024}}},
            "project_id": "p1", "user_id": "u1", "consumer_generation": None,
            "consumer_type": "INSTANCE"})
    w.send("post", "/allocations", "/allocations", {
        C2: {"allocations": {RP: {"resources": {"VCPU": 1}}},
             "project_id": "p1", "user_id": "u1", "consumer_generation": None,
             "consumer_type": "INSTANCE"},
        C1: {"allocations": {RP: {"resources": {"VCPU": 2, "MEMORY_MB": 1024}}},
             "project_id": "p1", "user_id": "u1", "consumer_generation": 1,
             "consumer_type": "INSTANCE"}})
    # Move C1's VCPU to the child, and the child's inventory with it.
    w.send("post", "/reshaper", "/reshaper", {
        "inventories": {
            RP: {"resource_provider_generation": w.generation(),
                 "inventories": {"VCPU": {"total": 16, "allocation_ratio": 4.0},
                                 "MEMORY_MB": {"total": 8192, "reserved": 512},
                                 "DISK_GB": {"total": 200}}},
            RP2: {"resource_provider_generation": w.generation(RP2),
                  "inventories": {"VCPU": {"total": 8}}}},
        "allocations": {C1: {"allocations": {
            RP: {"resources": {"MEMORY_MB": 1024}},
            RP2: {"resources": {"VCPU": 2}}},
            "project_id": "p1", "user_id": "u1", "consumer_generation": 2,
            "consumer_type": "INSTANCE"}}})


def _quota(w: World) -> dict:
    """The /v3, /quota and /v1 bodies; the ids the /v3 routes made."""
    sid = w.send("post", "/v3/services", "/v3/services",
                 {"service": {"type": "placement", "name": "placement"}})["service"]["id"]
    w.send("post", "/v3/regions", "/v3/regions", {"region": {"id": "r1"}})
    eid = w.send("post", "/v3/endpoints", "/v3/endpoints", {"endpoint": {
        "service_id": sid, "interface": "public", "url": "http://placement:8778",
        "region_id": "r1"}})["endpoint"]["id"]
    w.send("patch", "/v3/endpoints/{endpoint_id}", f"/v3/endpoints/{eid}",
           {"endpoint": {"url": "https://placement:8778"}})
    rid = w.send("post", "/v3/registered_limits", "/v3/registered_limits", {
        "registered_limits": [{"service_id": sid, "resource_name": "class:VCPU",
                               "default_limit": 10}]})["registered_limits"][0]["id"]
    w.send("patch", "/v3/registered_limits/{registered_limit_id}",
           f"/v3/registered_limits/{rid}",
           {"registered_limit": {"default_limit": 20, "description": "cores"}})
    w.send("post", "/v3/projects", "/v3/projects",
           {"project": {"id": "p1", "name": "P1"}})
    w.send("patch", "/v3/projects/{project_id}", "/v3/projects/p1",
           {"project": {"description": "the first"}})
    lid = w.send("post", "/v3/limits", "/v3/limits", {"limits": [
        {"project_id": "p1", "service_id": sid, "resource_name": "class:VCPU",
         "resource_limit": 12}]})["limits"][0]["id"]
    w.send("patch", "/v3/limits/{limit_id}", f"/v3/limits/{lid}",
           {"limit": {"resource_limit": 14}})
    w.send("post", "/quota/check", "/quota/check",
           {"project_id": "p1", "deltas": {"class:VCPU": 2}})
    # Blazar's bodies, counts as digit strings as it sends them too.
    lease = {"id": "lease-1", "name": "l1", "start_date": "2030-01-01T00:00:00",
             "end_date": "2030-01-01T12:00:00Z", "reservations": [
                 {"resource_type": "physical:host", "min": "1", "max": " 2 ",
                  "allocations": []},
                 {"resource_type": "virtual:instance", "amount": 2}]}
    context = {"project_id": "p1", "user_id": "u1"}
    w.send("post", "/v1/check-create", "/v1/check-create",
           {"context": context, "lease": lease})
    w.send("post", "/v1/check-update", "/v1/check-update",
           {"context": context, "current_lease": lease,
            "lease": {**lease, "end_date": "2030-01-01T18:00:00"}})
    # An older Blazar: the project in the lease, not the context.
    w.send("post", "/v1/on-end", "/v1/on-end",
           {"context": {}, "lease": {**lease, "project_id": "p1"}})
    return {"registered_limit_id": rid, "limit_id": lid, "endpoint_id": eid}


def _reservations(w: World) -> None:
    w.send("post", "/reservations", "/reservations", {
        "id": R1, "project_id": "p1", "user_id": "u1",
        "start": "2098-01-01T00:00:00Z", "end": "2098-01-02T00:00:00",
        "allocations": {RP: {"resources": {"MEMORY_MB": 512}}}})
    w.send("post", "/reservations", "/reservations", {
        "id": R2, "project_id": "p1", "user_id": "u1",
        "start": "2000-01-01T00:00:00Z", "end": "2098-01-01T00:00:00+01:00",
        "allocations": {RP: {"resources": {"MEMORY_MB": 256}}}})
    w.send("put", "/reservations/{reservation_id}", f"/reservations/{R1}", {
        "generation": 1, "start": "2098-01-01T00:00:00Z",
        "end": "2098-01-03T00:00:00Z",
        "allocations": {RP: {"resources": {"MEMORY_MB": 1024}}}})


@pytest.fixture(scope="module")
def world():
    with contextlib.ExitStack() as stack:
        db = stack.enter_context(fresh_database("sqlite"))
        app = create_app(Settings(db=db.url), db)
        doc = call(app, "GET", "/openapi.json")[1]
        w = World(app)
        _placement(w)
        ids = _quota(w)
        _reservations(w)
        yield w, doc, ids


def _concrete(template: str, ids: dict) -> str:
    """A path of the world for a route template."""
    values = {"uuid": RP, "resource_class": "VCPU", "consumer_uuid": C3,
              "project_id": "p1", **ids}
    names = {"/resource_classes/{name}": "CUSTOM_GOLD", "/traits/{name}": "CUSTOM_FAST"}
    if template in names:
        return template.replace("{name}", names[template])
    # Only an active reservation can end; a pending one may change.
    values["reservation_id"] = R2 if template.endswith("/end") else R1
    return template.format(**values)


def _detail(body) -> str:
    body = body or {}
    if "errors" in body:
        return body["errors"][0]["detail"]
    return (body.get("error") or {}).get("message", "")


def test_exactly_the_routes_that_read_a_body_document_one(world):
    w, doc, ids = world
    documented, reads = set(), set()
    for template, item in doc["paths"].items():
        for verb, op in item.items():
            if verb not in WRITES:
                continue
            if "requestBody" in op:
                documented.add((template, verb))
            status, answer = call(w.app, verb, _concrete(template, ids), raw=b"{")
            if status == 400 and _detail(answer).startswith(PHRASE_MALFORMED):
                reads.add((template, verb))
            else:
                # It answered without reading the body: the path was found.
                assert status < 300, (verb, template, status, answer)
    assert ("/v1/check-create", "post") in reads
    assert ("/traits/{name}", "put") not in reads
    assert reads == documented, (sorted(reads - documented), sorted(documented - reads))


def _schema(doc: dict, template: str, verb: str) -> dict:
    op = doc["paths"][template][verb]
    body = op["requestBody"]
    assert body["required"] is True
    return body["content"]["application/json"]["schema"]


def test_bodies_the_service_takes_are_valid_against_the_document(world):
    w, doc, _ids = world
    taken = {(t, v) for t, v, _b in w.taken}
    with_body = {(t, v) for t, item in doc["paths"].items()
                 for v, op in item.items() if "requestBody" in op}
    # Every documented body was sent at least once, and taken.
    assert with_body <= taken, sorted(with_body - taken)
    for template, verb, body in w.taken:
        schema = _schema(doc, template, verb)
        schema_validator.validate(body, schema, cls=schema_validator.OAS31Validator)


def test_the_document_refuses_what_the_service_refuses(world):
    """Not a schema that takes anything: bodies the service refuses for
    their shape are refused by the document too."""
    w, doc, _ids = world
    refused = [
        ("/resource_providers", "post", {"name": "x" * 201}),
        ("/resource_providers/{uuid}/inventories", "put", {"inventories": {}}),
        ("/allocations/{consumer_uuid}", "put", {"allocations": {}}),
        ("/v3/limits", "post", {"limits": []}),
        ("/quota/check", "post", {"project_id": "p1", "deltas": {"class:VCPU": -1}}),
        ("/v1/check-create", "post", {"context": {"project_id": "p1"},
                                      "lease": {"start_date": "2030-01-01T00:00:00"}}),
        ("/v1/check-create", "post", {"context": {}, "lease": {
            "start_date": "2030-01-01T00:00:00", "end_date": "2030-01-02T00:00:00"}}),
        ("/v1/check-update", "post", {"context": {"project_id": "p1"}, "lease": {
            "start_date": "2030-01-01T00:00:00", "end_date": "2030-01-02T00:00:00",
            "reservations": [{"resource_type": "physical:host", "min": "one"}]}}),
    ]
    for template, verb, body in refused:
        status, answer = call(w.app, verb, _concrete(template, {}), body)
        assert status == 400, (template, body, status, answer)
        with pytest.raises(jsonschema.ValidationError):
            schema_validator.validate(body, _schema(doc, template, verb),
                                      cls=schema_validator.OAS31Validator)


def _resolved(doc: dict, node):
    """`node` with every local $ref replaced by what it names."""
    if isinstance(node, dict):
        if "$ref" in node:
            target = doc
            for part in node["$ref"].lstrip("#/").split("/"):
                target = target[part]
            return _resolved(doc, target)
        return {k: _resolved(doc, v) for k, v in node.items()}
    if isinstance(node, list):
        return [_resolved(doc, v) for v in node]
    return node


def test_a_lease_refusal_is_the_documented_403():
    with contextlib.ExitStack() as stack:
        db = stack.enter_context(fresh_database("sqlite"))
        app = create_app(Settings(db=db.url, lease_max_duration_hours=24), db)
        doc = call(app, "GET", "/openapi.json")[1]
        status, refused = call(app, "POST", "/v1/check-create", {
            "context": {"project_id": "p1"},
            "lease": {"start_date": "2030-01-01T00:00:00",
                      "end_date": "2030-01-03T00:00:00"}})
        assert status == 403 and set(refused) == {"message"}
        # A caller the lease rule refuses: the API-WG shape, also documented.
        status, policy = call(app, "POST", "/v1/check-create", {}, token="someone:p1")
        assert status == 403 and "errors" in policy
    for path in ("/v1/check-create", "/v1/check-update", "/v1/on-end"):
        answer = _resolved(doc, doc["paths"][path]["post"]["responses"]["403"])
        schema = answer["content"]["application/json"]["schema"]
        for body in (refused, policy):
            schema_validator.validate(body, schema, cls=schema_validator.OAS31Validator)
