"""CORS settings beyond the gabbit (gabbits/cors.yaml): off by default,
wildcard origins, and preflights that never reach auth or routing."""
from __future__ import annotations

import falcon.testing
import pytest

from placement_lite.app import create_app
from placement_lite.config import Settings
from tests.backends import fresh_database


@pytest.fixture
def db():
    """SQLite only: what these tests check does not depend on the backend
    (test_api.py, test_schema.py and test_workers.py cover the servers)."""
    with fresh_database("sqlite") as database:
        yield database


PREFLIGHT = {"Origin": "http://ui.example.com",
             "Access-Control-Request-Method": "PUT",
             "Access-Control-Request-Headers": "X-Auth-Token, Content-Type"}


def _client(db, **overrides):
    return falcon.testing.TestClient(create_app(Settings(db=db.url, **overrides), db))


def test_off_unless_an_origin_is_configured(db):
    client = _client(db)
    result = client.simulate_options("/resource_providers", headers=PREFLIGHT)
    assert "access-control-allow-origin" not in result.headers
    result = client.simulate_get("/", headers={"Origin": "http://ui.example.com"})
    assert "access-control-allow-origin" not in result.headers


def test_wildcard_echoes_the_origin_and_allows_simple_headers(db):
    client = _client(db, cors_allowed_origin=("*",), cors_allow_headers=("x-auth-token",))
    result = client.simulate_options("/resource_providers", headers=PREFLIGHT)
    assert result.status_code == 200
    assert result.headers["access-control-allow-origin"] == "http://ui.example.com"
    assert result.headers["access-control-allow-methods"] == "PUT"
    # content-type is a simple header; x-auth-token was configured.
    assert result.headers["access-control-allow-headers"] == "x-auth-token,content-type"


def test_preflight_to_any_path_is_answered_without_auth(db):
    client = _client(db, cors_allowed_origin=("http://ui.example.com/",),
                     cors_allow_headers=("X-Auth-Token",))
    for path in ("/resource_providers/nope", "/no/such/route"):
        result = client.simulate_options(path, headers=PREFLIGHT)
        assert result.status_code == 200, result.text
        assert result.headers["access-control-allow-origin"] == "http://ui.example.com"
        assert result.text == ""


def test_headers_are_matched_without_regard_to_case(db):
    client = _client(db, cors_allowed_origin=("http://ui.example.com",),
                     cors_allow_headers=("OpenStack-API-Version",))
    headers = dict(PREFLIGHT, **{"Access-Control-Request-Headers": "openstack-api-version"})
    result = client.simulate_options("/", headers=headers)
    assert result.headers["access-control-allow-headers"] == "openstack-api-version"


def test_without_cors_options_is_a_405_that_does_not_list_itself(db):
    client = _client(db)
    result = client.simulate_options("/resource_providers", headers=PREFLIGHT)
    assert result.status_code == 405, result.text
    assert result.headers["allow"] == "GET, POST"
    assert "The method OPTIONS is not allowed for this resource." in \
        result.json["errors"][0]["detail"]
    result = client.simulate_delete("/", headers={"X-Auth-Token": "admin"})
    assert result.status_code == 405
    assert result.headers["allow"] == "GET"
