"""The OpenAPI document, and schemathesis against the running service.

The document must describe exactly the routes the service answers, load
as OpenAPI, and hold up when schemathesis throws generated requests at a
real `placement-lite serve`: no 5xx, and every error in the API-WG format
with its request id. The number of examples per operation is bounded so
the run stays well under a minute.
"""
from __future__ import annotations

import json
import time

import falcon
import falcon.testing
import pytest

from placement_lite.api import openapi
from placement_lite.app import create_app, routes
from placement_lite.config import Settings
from tests.backends import backend_id, backend_urls, fresh_database, fresh_url
from tests.servers import serve


@pytest.fixture
def db():
    """SQLite only: what these tests check does not depend on the backend
    (test_api.py, test_schema.py and test_workers.py cover the servers)."""
    with fresh_database("sqlite") as database:
        yield database


EXAMPLES_PER_OPERATION = 8
TIME_BUDGET_SECONDS = 45
# The document describes the latest microversion; ask for it.
HEADERS = {"X-Auth-Token": "admin", "OpenStack-API-Version": "placement latest"}
# Lease-policy endpoints answer Blazar's own shape, not the API-WG one.
OWN_ERROR_SHAPES = {("POST", "/v1/check-create", 403), ("POST", "/v1/check-update", 403),
                    ("POST", "/v1/on-end", 403)}


def _document(db, **overrides):
    client = falcon.testing.TestClient(create_app(Settings(db=db.url, **overrides), db))
    result = client.simulate_get("/openapi.json")
    assert result.status_code == 200, result.text
    return result.json


def test_document_is_public_and_lists_exactly_the_routes_served(db):
    doc = _document(db)
    assert doc["openapi"].startswith("3.")
    served = {}
    for template, resource in routes():
        for verb in ("GET", "PUT", "POST", "PATCH", "DELETE"):
            if callable(getattr(resource, f"on_{verb.lower()}", None)):
                served.setdefault(template, set()).add(verb.lower())
    documented = {path: set(item) for path, item in doc["paths"].items()}
    assert documented == served
    for path, item in doc["paths"].items():
        for verb, op in item.items():
            assert op["summary"] and op["operationId"], (verb, path)
            names = {p["name"] for p in op["parameters"] if "name" in p}
            for param in openapi._PARAM_RE.findall(path):
                assert param in names, (verb, path, param)
            if verb in ("put", "post", "patch") and "requestBody" in op:
                schema = op["requestBody"]["content"]["application/json"]["schema"]
                assert schema.get("type") == "object", (verb, path)


def test_metrics_route_is_documented_only_when_served(db):
    assert "/metrics" not in _document(db)["paths"]
    assert "/metrics" in _document(db, metrics=True)["paths"]


def test_public_operations_need_no_token(db):
    doc = _document(db)
    assert doc["paths"]["/healthcheck"]["get"]["security"] == []
    assert doc["paths"]["/openapi.json"]["get"]["security"] == []
    assert "security" not in doc["paths"]["/resource_providers"]["get"]
    # Per operation, not per path: public reads leave the writes guarded.
    doc = _document(db, quota_limits_public_read=True)
    assert doc["paths"]["/v3/registered_limits"]["get"]["security"] == []
    assert "security" not in doc["paths"]["/v3/registered_limits"]["post"]
    assert "security" not in _document(db)["paths"]["/v3/registered_limits"]["get"]


def test_every_overlay_entry_names_a_served_route():
    overlay = openapi._load_overlay()["paths"]
    served = {t for t, _r in routes()} | {"/metrics"}
    stale = set(overlay) - served
    assert not stale, f"openapi.yaml describes routes nobody serves: {sorted(stale)}"


def test_schema_references_resolve():
    served = {t for t, _r in routes()}
    for table in (openapi.BODIES, openapi.QUERIES):
        for (path, verb), schema in table.items():
            assert path in served, (path, verb)
            schema = openapi.latest(schema)
            assert isinstance(schema, dict) and schema.get("type") == "object", (
                path, verb)


def _check_response(case, response):
    method, path = case.operation.method.upper(), case.operation.path
    status = response.status_code
    where = f"{method} {case.formatted_path} -> {status}: {response.text[:300]}"
    assert status < 500, where
    if status < 400 or (method, path, status) in OWN_ERROR_SHAPES:
        return
    body = json.loads(response.text)
    if path.startswith("/v3"):
        # Keystone's shape, which Keystone's clients read.
        assert body["error"]["code"] == status, where
        assert body["error"]["title"] and isinstance(body["error"]["message"], str), where
        return
    (err,) = body["errors"]
    assert err["status"] == status, where
    assert err["title"] and isinstance(err["detail"], str), where
    assert err["request_id"] == response.headers["x-openstack-request-id"][0], where


@pytest.mark.parametrize("backend", backend_urls(), ids=backend_id)
def test_schemathesis_finds_no_server_errors(backend):
    schemathesis = pytest.importorskip("schemathesis")
    from hypothesis import HealthCheck, Phase, given, settings
    from schemathesis import checks

    with fresh_url(backend) as url, serve(url, "--metrics") as srv:
        schema = schemathesis.openapi.from_url(srv.base + "/openapi.json")
        deadline = time.monotonic() + TIME_BUDGET_SECONDS
        failures, calls = [], [0]
        for result in schema.get_all_operations():
            operation = result.ok()
            if time.monotonic() > deadline:
                break

            @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, database=None,
                      phases=[Phase.explicit, Phase.generate],
                      suppress_health_check=list(HealthCheck))
            @given(case=operation.as_strategy())
            def exercise(case):
                response = case.call(base_url=srv.base, headers=HEADERS, timeout=10)
                calls[0] += 1
                _check_response(case, response)
                if response.status_code < 500:
                    # Bodies match the documented schemas: the success
                    # shapes at 1.39, and the error format for the rest.
                    case.validate_response(response, checks=[
                        checks.response_schema_conformance])
            try:
                exercise()
            except (AssertionError, schemathesis.errors.SchemathesisError,
                    schemathesis.checks.Failure) as exc:
                failures.append(f"{operation.method.upper()} {operation.path}: {exc}")
        print(f"schemathesis: {calls[0]} requests")
        assert calls[0] > 50, f"only {calls[0]} requests were made"
        assert not failures, "\n".join(failures)
        assert "Traceback" not in srv.output, srv.output[-3000:]
