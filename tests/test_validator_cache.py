"""Validators are cached by what a schema says, not by which object holds
it: GET /resource_providers builds its query schema per request, and a
cache keyed by object identity grew by one validator per request."""
from __future__ import annotations

import falcon.testing
import pytest

from placement_lite.api import request
from placement_lite.app import create_app
from placement_lite.config import Settings


@pytest.fixture
def client(db):
    return falcon.testing.TestClient(create_app(Settings(db=db.url), db))


def test_a_thousand_requests_leave_the_cache_size_constant(client, backend):
    if backend != "sqlite":
        pytest.skip("the cache is per process; one backend shows it")
    headers = {"x-auth-token": "admin"}
    versions = ["1.14", "1.18", "1.31", "1.39"]

    def ask(n):
        version = versions[n % len(versions)]
        result = client.simulate_get(
            "/resource_providers", params={"name": f"rp{n}"},
            headers={**headers, "openstack-api-version": f"placement {version}"})
        assert result.status_code == 200, result.text

    for n in range(40):
        ask(n)
    warmed = request.validator_cache_size()
    for n in range(1000):
        ask(n)
    assert request.validator_cache_size() == warmed


def test_equal_schemas_share_one_validator():
    first = {"type": "object", "properties": {"a": {"type": "integer"}}}
    second = {"properties": {"a": {"type": "integer"}}, "type": "object"}
    assert request._validator(first) is request._validator(second)


def test_the_cache_is_bounded():
    for n in range(request.VALIDATOR_CACHE_SIZE + 50):
        request._validator({"type": "object", "maxProperties": n})
    assert request.validator_cache_size() <= request.VALIDATOR_CACHE_SIZE


def test_a_schema_asked_for_again_is_not_serialised_again(monkeypatch):
    schema = {"type": "object", "properties": {"once": {"type": "string"}}}
    first = request._validator(schema)
    calls = []
    real = request.json.dumps
    monkeypatch.setattr(request.json, "dumps", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert request._validator(schema) is first
    assert calls == []
    # An equal document in another object is found by its text.
    assert request._validator(dict(schema)) is first
    assert calls == [1]
    for n in range(request.VALIDATOR_CACHE_SIZE + 50):
        request._validator({"type": "object", "minProperties": n})
    assert len(request._BY_OBJECT) <= request.VALIDATOR_CACHE_SIZE
