"""Which shape an error comes in: Keystone's under /v3, whatever refused
the request (routing, auth, body limits, Accept); API-WG JSON elsewhere,
as HTML or plain text when the caller's Accept asks for it."""
from __future__ import annotations

import falcon.testing
import pytest

from placement_lite.app import create_app
from placement_lite.config import Settings
from tests.backends import fresh_database

ADMIN = {"X-Auth-Token": "admin"}


@pytest.fixture(scope="module")
def client():
    """SQLite only: the shape of an error does not depend on the backend."""
    with fresh_database("sqlite") as db:
        yield falcon.testing.TestClient(
            create_app(Settings(db=db.url, max_body_bytes=1024), db))


def _keystone(result, status, title):
    assert result.status_code == status, result.text
    assert result.headers["content-type"] == "application/json"
    assert set(result.json) == {"error"}
    err = result.json["error"]
    assert set(err) == {"code", "title", "message"}
    assert err["code"] == status and err["title"] == title
    assert result.headers["x-openstack-request-id"].startswith("req-")
    return err["message"]


def test_v3_errors_from_every_layer_are_keystone_shaped(client):
    big = {"registered_limits": [{"description": "x" * 2000}]}
    message = _keystone(client.simulate_post("/v3/registered_limits", json=big,
                                             headers=ADMIN), 413, "Content Too Large")
    assert "the limit is 1024" in message
    message = _keystone(client.simulate_get("/v3/registered_limits"),
                        401, "Unauthorized")
    assert "x-auth-token" in message
    message = _keystone(client.simulate_get(
        "/v3/registered_limits", headers=dict(ADMIN, Accept="text/plain")),
        406, "Not Acceptable")
    assert message.startswith("Only application/json is provided")
    result = client.simulate_delete("/v3/registered_limits", headers=ADMIN)
    message = _keystone(result, 405, "Method Not Allowed")
    assert message.startswith("The method DELETE is not allowed for this resource.")
    assert result.headers["allow"] == "GET, POST"
    _keystone(client.simulate_post("/v3/registered_limits", json={"nope": 1},
                                   headers=ADMIN), 400, "Bad Request")
    # Keystone's clients always get JSON, whatever they said they accept.
    _keystone(client.simulate_get("/v3/nothing", headers=dict(ADMIN, Accept="text/html")),
              404, "Not Found")


def test_quota_and_lease_errors_keep_the_api_wg_shape(client):
    result = client.simulate_post("/quota/check", json={"nothing": "here"}, headers=ADMIN)
    assert result.status_code == 400
    (err,) = result.json["errors"]
    assert err["status"] == 400 and err["code"] and err["request_id"].startswith("req-")


@pytest.mark.parametrize("accept, media, marker", [
    (None, "application/json", '"errors"'),
    ("*/*", "application/json", '"errors"'),
    ("application/json", "application/json", '"errors"'),
    ("application/json, text/html", "application/json", '"errors"'),
    ("text/html", "text/html", "<h1>404 Not Found</h1>"),
    ("text/html,application/xml;q=0.9,*/*;q=0.8", "text/html", "<h1>404 Not Found</h1>"),
    ("text/plain", "text/plain", "404 Not Found\n\n"),
    ("image/png", "text/plain", "404 Not Found\n\n"),
])
def test_placement_errors_follow_accept(client, accept, media, marker):
    headers = dict(ADMIN)
    if accept:
        headers["Accept"] = accept
    result = client.simulate_get("/no/such/route", headers=headers)
    assert result.status_code == 404
    assert result.headers["content-type"].split(";")[0] == media
    assert marker in result.text
    assert "The resource could not be found." in result.text


def test_html_errors_escape_what_the_caller_sent(client):
    result = client.simulate_get("/<script>alert(1)</script>",
                                 headers=dict(ADMIN, Accept="text/html"))
    assert result.status_code == 404
    assert "<script>" not in result.text
    assert "&lt;script&gt;" in result.text
