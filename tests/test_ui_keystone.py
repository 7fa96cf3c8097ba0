"""The console with --auth keystone: the token given on the login form is
validated by keystonemiddleware (against a fake Keystone) like any API
token, from the cookie, for /ui only."""
from __future__ import annotations

import falcon.testing
import pytest

from placement_lite.server import build_wsgi
from tests.test_keystone import FakeKeystone, _settings, db  # noqa: F401

pytest.importorskip("keystonemiddleware")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
COOKIE = "placement_lite_console"
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


@pytest.fixture
def keystone():
    with FakeKeystone() as ks:
        yield ks


@pytest.fixture
def client(db, keystone, tmp_path):  # noqa: F811
    return falcon.testing.TestClient(
        build_wsgi(_settings(db, keystone, tmp_path, ui=True), db))


def test_a_keystone_token_from_the_form_opens_the_console(client, keystone):
    admin = keystone.issue("p1", ["admin"])
    login = client.simulate_get("/ui/login")
    assert login.status_code == 200 and "Keystone token" in login.text
    r = client.simulate_post("/ui/login", body=f"token={admin}", headers=FORM)
    assert r.status_code == 303 and admin not in r.headers["location"]
    assert "HttpOnly" in r.headers["set-cookie"] and "SameSite=Strict" in r.headers["set-cookie"]
    before = keystone.validations
    page = client.simulate_get("/ui/", cookies={COOKIE: admin})
    assert page.status_code == 200, page.text
    assert "Fleet" in page.text
    assert keystone.validations > before  # Keystone, not the cookie, decided


def test_a_token_keystone_does_not_know_goes_back_to_the_form(client):
    r = client.simulate_get("/ui/", cookies={COOKIE: "forged"})
    assert r.status_code == 303 and r.headers["location"].endswith("/ui/login")
    # Identity headers sent by the browser are not trusted either.
    r = client.simulate_get("/ui/", cookies={COOKIE: "forged"}, headers={
        "X-Identity-Status": "Confirmed", "X-Roles": "admin", "X-User-Id": "mallory"})
    assert r.status_code == 303


def test_a_valid_token_without_rights_sees_the_refusal(client, keystone):
    member = keystone.issue("p1", ["member", "reader"])
    r = client.simulate_get("/ui/", cookies={COOKIE: member})
    assert r.status_code == 403
    assert "Policy does not allow placement:resource_providers:list" in r.text


def test_the_cookie_does_not_authenticate_the_api(client, keystone):
    admin = keystone.issue("p1", ["admin"])
    r = client.simulate_get("/resource_providers", cookies={COOKIE: admin})
    assert r.status_code == 401
