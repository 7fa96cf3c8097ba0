"""`--auth keystone`: keystonemiddleware's auth_token in front of the app,
validating tokens against a small fake Keystone on a loopback port."""
from __future__ import annotations

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import falcon.testing
import pytest

from placement_lite.api import keystone
from placement_lite.config import Settings
from placement_lite.server import build_wsgi
from tests.backends import fresh_database


@pytest.fixture
def db():
    """SQLite only: what these tests check does not depend on the backend
    (test_api.py, test_schema.py and test_workers.py cover the servers)."""
    with fresh_database("sqlite") as database:
        yield database


pytest.importorskip("keystonemiddleware")
# webob (under keystonemiddleware) still imports the deprecated cgi module.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SERVICE_TOKEN = "service-secret"


class FakeKeystone:
    """Answers version discovery and GET /v3/auth/tokens for known tokens."""

    def __init__(self):
        self.tokens: dict[str, dict] = {}
        self.validations = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status, body, headers=()):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers:
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                base = outer.url
                v3 = {"id": "v3.14", "status": "stable",
                      "updated": "2020-04-07T00:00:00Z",
                      "links": [{"rel": "self", "href": base + "/v3/"}],
                      "media-types": [{"base": "application/json",
                                       "type": "application/vnd.openstack.identity-v3+json"}]}
                path = self.path.rstrip("/")
                if path == "":
                    return self._send(300, {"versions": {"values": [v3]}})
                if path == "/v3":
                    return self._send(200, {"version": v3})
                if path.startswith("/v3/auth/tokens"):
                    if self.headers.get("X-Auth-Token") != SERVICE_TOKEN:
                        return self._send(401, {"error": {"code": 401}})
                    subject = self.headers.get("X-Subject-Token")
                    outer.validations += 1
                    if subject in outer.tokens:
                        return self._send(200, outer.tokens[subject],
                                          [("X-Subject-Token", subject)])
                    return self._send(404, {"error": {"code": 404,
                                                      "message": "token not found"}})
                return self._send(404, {"error": {"code": 404}})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)

    def issue(self, project_id, roles, user_id=None, system=False, domain_scope=None,
              **extra):
        """A v3 token body, as Keystone returns it from GET /v3/auth/tokens
        (`extra`: more token fields, e.g. is_admin_project=False)."""
        domain = {"id": "default", "name": "Default"}
        user_id = user_id or uuid.uuid4().hex
        token = {
            "methods": ["password"],
            "issued_at": "2020-01-01T00:00:00.000000Z",
            "expires_at": "2099-01-01T00:00:00.000000Z",
            "user": {"id": user_id, "name": f"user-{user_id[:6]}", "domain": domain},
            "roles": [{"id": uuid.uuid4().hex, "name": r} for r in roles],
            "catalog": [],
        }
        if system:
            token["system"] = {"all": True}
        elif domain_scope:
            token["domain"] = {"id": domain_scope, "name": domain_scope}
        else:
            token["project"] = {"id": project_id, "name": f"project-{project_id}",
                                "domain": domain}
        token.update(extra)
        token_id = uuid.uuid4().hex
        self.tokens[token_id] = {"token": token}
        return token_id

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_keystone():
    with FakeKeystone() as ks:
        yield ks


def _ini(ks, tmp_path):
    ini = tmp_path / "keystone.ini"
    ini.write_text("[keystone_authtoken]\n"
                   "auth_type = admin_token\n"
                   f"endpoint = {ks.url}/v3\n"
                   f"token = {SERVICE_TOKEN}\n"
                   f"www_authenticate_uri = {ks.url}/v3\n"
                   "service_token_roles_required = true\n")
    return str(ini)


def _settings(db, ks, tmp_path, **overrides):
    return Settings(db=db.url, auth="keystone", keystone_config_file=_ini(ks, tmp_path),
                    **overrides)


def test_valid_token_passes_and_identity_reaches_policy(db, fake_keystone, tmp_path):
    app = build_wsgi(_settings(db, fake_keystone, tmp_path), db)
    client = falcon.testing.TestClient(app)
    admin = fake_keystone.issue("p1", ["admin"])
    result = client.simulate_get("/resource_providers", headers={"X-Auth-Token": admin})
    assert result.status_code == 200, result.text
    # A valid token without the admin role is refused by the legacy policy.
    member = fake_keystone.issue("p1", ["member", "reader"])
    result = client.simulate_get("/resource_providers", headers={"X-Auth-Token": member})
    assert result.status_code == 403, result.text
    assert fake_keystone.validations >= 2


def test_invalid_or_missing_token_is_401_in_the_api_format(db, fake_keystone, tmp_path):
    client = falcon.testing.TestClient(
        build_wsgi(_settings(db, fake_keystone, tmp_path), db))
    for headers in ({"X-Auth-Token": "forged"}, {}):
        result = client.simulate_get("/resource_providers", headers=headers)
        assert result.status_code == 401, result.text
        (err,) = result.json["errors"]
        assert err["status"] == 401 and err["request_id"].startswith("req-")
        assert result.headers["www-authenticate"] == f'Keystone uri="{fake_keystone.url}/v3"'


def test_identity_headers_sent_by_a_caller_are_not_trusted(db, fake_keystone, tmp_path):
    client = falcon.testing.TestClient(
        build_wsgi(_settings(db, fake_keystone, tmp_path), db))
    result = client.simulate_get("/resource_providers", headers={
        "X-Auth-Token": "forged", "X-Identity-Status": "Confirmed",
        "X-Roles": "admin", "X-User-Id": "mallory"})
    assert result.status_code == 401


def test_public_paths_and_preflight_need_no_token(db, fake_keystone, tmp_path):
    settings = _settings(db, fake_keystone, tmp_path, metrics=True,
                         cors_allowed_origin=("http://ui.example.com",),
                         cors_allow_headers=("x-auth-token",))
    client = falcon.testing.TestClient(build_wsgi(settings, db))
    for path in ("/", "/healthcheck", "/metrics"):
        assert client.simulate_get(path).status_code == 200, path
    result = client.simulate_options("/resource_providers", headers={
        "Origin": "http://ui.example.com", "Access-Control-Request-Method": "GET",
        "Access-Control-Request-Headers": "x-auth-token"})
    assert result.status_code == 200
    assert result.headers["access-control-allow-origin"] == "http://ui.example.com"


def test_settings_options_win_over_the_file(db, fake_keystone, tmp_path):
    settings = _settings(db, fake_keystone, tmp_path)
    settings = Settings(**{**settings.__dict__, "keystone_authtoken": {
        "www_authenticate_uri": "https://keystone.example.com/v3"}})
    client = falcon.testing.TestClient(build_wsgi(settings, db))
    result = client.simulate_get("/resource_providers")
    assert result.headers["www-authenticate"] == 'Keystone uri="https://keystone.example.com/v3"'


def test_project_scoped_rules_see_the_token_project(db, fake_keystone, tmp_path):
    client = falcon.testing.TestClient(build_wsgi(
        _settings(db, fake_keystone, tmp_path, policy_profile="secure-rbac"), db))
    reader = fake_keystone.issue("proj-a", ["reader"])
    own = client.simulate_get("/usages", query_string="project_id=proj-a",
                              headers={"X-Auth-Token": reader,
                                       "OpenStack-API-Version": "placement 1.9"})
    other = client.simulate_get("/usages", query_string="project_id=proj-b",
                                headers={"X-Auth-Token": reader,
                                         "OpenStack-API-Version": "placement 1.9"})
    if own.status_code == 404 and other.status_code == 404:
        pytest.skip("GET /usages is not served by this build")
    assert own.status_code == 200, own.text
    assert other.status_code == 403, other.text


def test_wrap_refuses_to_run_without_delayed_decision_off(db, fake_keystone, tmp_path):
    options = keystone._options(_settings(db, fake_keystone, tmp_path))
    options["delay_auth_decision"] = "false"
    wrapped = keystone.wrap(lambda env, start: [], None, options)
    # Whatever the operator wrote, auth_token defers to the API's own 401.
    assert wrapped.protocol._delay_auth_decision is True


def test_served_with_auth_keystone(fake_keystone, tmp_path):
    """The command an operator runs: `serve --auth keystone --keystone-config-file`."""
    from tests.servers import serve

    valid = fake_keystone.issue("p1", ["admin"])
    with serve(f"sqlite:///{tmp_path / 'ks.sqlite'}", "--auth", "keystone",
               "--keystone-config-file", _ini(fake_keystone, tmp_path),
               "--workers", "2") as srv:
        assert "auth: keystone" in srv.output
        status, _h, _b = srv.request("GET", "/resource_providers", token=valid)
        assert status == 200
        status, headers, body = srv.request("GET", "/resource_providers", token="forged")
        assert status == 401 and body["errors"][0]["status"] == 401
        assert headers["WWW-Authenticate"].startswith("Keystone uri=")
        assert srv.request("GET", "/healthcheck", token=None)[0] == 200


@pytest.mark.parametrize("profile", ["secure-rbac", "legacy"])
def test_a_system_scoped_token_is_refused_on_placement_routes(db, fake_keystone,
                                                             tmp_path, profile):
    """Placement's rules are all project-scoped: a system admin's token is
    a 403 there whatever its roles, and still an admin on /v3, as on
    Keystone."""
    client = falcon.testing.TestClient(build_wsgi(
        _settings(db, fake_keystone, tmp_path, policy_profile=profile), db))
    system_admin = fake_keystone.issue(None, ["admin", "member", "reader"], system=True)
    project_admin = fake_keystone.issue("p1", ["admin", "member", "reader"])
    refused = client.simulate_get("/resource_providers",
                                  headers={"X-Auth-Token": system_admin})
    assert refused.status_code == 403, refused.text
    assert "this token is system-scoped" in refused.text
    assert client.simulate_get("/resource_providers",
                               headers={"X-Auth-Token": project_admin}).status_code == 200
    listed = client.simulate_get("/v3/registered_limits",
                                 headers={"X-Auth-Token": system_admin})
    assert listed.status_code == 200, listed.text
    domain_admin = fake_keystone.issue(None, ["admin"], domain_scope="default")
    refused = client.simulate_get("/resource_providers",
                                  headers={"X-Auth-Token": domain_admin})
    assert refused.status_code == 403, refused.text
    assert "this token is domain-scoped" in refused.text


def test_a_limits_route_missing_a_piece_fails_when_its_class_is_made():
    from placement_lite.api.resources.limits import Collection, Member

    with pytest.raises(TypeError, match="Half does not give list_rows, shape"):
        class Half(Collection):
            key = "halves"
    with pytest.raises(TypeError, match="Row does not give delete_row"):
        class Row(Member):
            key = "row"
            get_row = shape = staticmethod(lambda *a: {})


# -- [keystone_authtoken] from Placement's own placement.conf (issue 27) ------

def _placement_conf(ks, tmp_path, extra: str = "") -> str:
    """A placement.conf as a deployment tool writes it for Placement, its
    [keystone_authtoken] aimed at the fake Keystone."""
    conf = tmp_path / "etc" / "placement.conf"
    conf.parent.mkdir(exist_ok=True)
    conf.write_text(
        "[api]\nauth_strategy = keystone\n"
        f"[placement_database]\nconnection = sqlite:///{tmp_path / 'from-conf.sqlite'}\n"
        "[oslo_policy]\nenforce_new_defaults = false\n"
        "[keystone_authtoken]\nservice_type = placement\n"
        f"www_authenticate_uri = {ks.url}/v3\nauth_type = admin_token\n"
        f"endpoint = {ks.url}/v3\ntoken = {SERVICE_TOKEN}\nregion_name = RegionOne\n"
        "service_token_roles_required = true\ntoken_cache_time = 123\n"
        "http_connect_timeout = 7\n" + extra, encoding="utf-8")
    return str(conf)


def test_the_placement_conf_section_reaches_auth_token_as_it_is(db, fake_keystone,
                                                               tmp_path):
    from placement_lite.config import load_settings

    conf = _placement_conf(fake_keystone, tmp_path)
    settings = load_settings({"config_file": [conf], "db": db.url}, environ={
        "OS_KEYSTONE_AUTHTOKEN__HTTP_CONNECT_TIMEOUT": "9"})
    assert settings.auth == "keystone"  # [api] auth_strategy
    app = build_wsgi(settings, db)
    # auth_token's own look-up answers with the file's values, typed, and
    # the environment form over them.
    seen = app.protocol._conf
    assert seen.get("token_cache_time") == 123
    assert seen.get("service_token_roles_required") is True
    assert seen.get("region_name") == "RegionOne"
    assert seen.get("http_connect_timeout") == 9
    client = falcon.testing.TestClient(app)
    valid = fake_keystone.issue("p1", ["admin"])
    assert client.simulate_get("/resource_providers",
                               headers={"X-Auth-Token": valid}).status_code == 200
    refused = client.simulate_get("/resource_providers", headers={"X-Auth-Token": "forged"})
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == f'Keystone uri="{fake_keystone.url}/v3"'


def test_our_own_keystone_options_win_over_the_placement_conf(db, fake_keystone, tmp_path):
    from placement_lite.config import load_settings

    settings = load_settings(
        {"config_file": [_placement_conf(fake_keystone, tmp_path)], "db": db.url},
        environ={"OS_KEYSTONE_AUTHTOKEN__WWW_AUTHENTICATE_URI": "https://env.example/v3",
                 "PLACEMENT_LITE_KEYSTONE_AUTHTOKEN": "{token_cache_time: '5'}"})
    app = build_wsgi(settings, db)
    assert app.protocol._conf.get("token_cache_time") == 5
    result = falcon.testing.TestClient(app).simulate_get("/resource_providers")
    assert result.headers["www-authenticate"] == 'Keystone uri="https://env.example/v3"'


def test_served_from_a_placement_conf_with_keystone(fake_keystone, tmp_path):
    """`serve --config-file placement.conf` and nothing else: Keystone
    auth, the database and the policy defaults all come from the file."""
    from tests.servers import serve

    valid = fake_keystone.issue("p1", ["admin"])
    conf = _placement_conf(fake_keystone, tmp_path)
    with serve(None, "--config-file", conf) as srv:
        assert "auth: keystone" in srv.output
        assert f"database: sqlite:///{tmp_path / 'from-conf.sqlite'}" in srv.output
        assert srv.request("GET", "/resource_providers", token=valid)[0] == 200
        status, headers, _b = srv.request("GET", "/resource_providers", token="forged")
        assert status == 401
        assert headers["WWW-Authenticate"] == f'Keystone uri="{fake_keystone.url}/v3"'
        assert srv.request("GET", "/", token=None)[0] == 200
