"""The service's own edges, in process: healthcheck, request log lines,
request ids, and hostile input (size, nesting, encoding, floods)."""
from __future__ import annotations

import json
import logging
import time

import falcon
import falcon.testing
import pytest

from placement_lite import logs
from placement_lite.api import request as api_request
from placement_lite.app import create_app
from placement_lite.config import Settings
from placement_lite.db.engine import Database
from tests.backends import fresh_database


@pytest.fixture
def db():
    """SQLite only: what these tests check does not depend on the backend
    (test_api.py, test_schema.py and test_workers.py cover the servers)."""
    with fresh_database("sqlite") as database:
        yield database


ADMIN = {"X-Auth-Token": "admin"}


class Echo:
    """A route that reads its body the way every API resource does."""

    policies = {"POST": "placement:resource_providers:create"}

    def __init__(self, services):
        pass

    def on_post(self, req, resp):
        resp.media = {"got": api_request.json_body(req)}


def _client(db, **overrides):
    app = create_app(Settings(db=db.url, **overrides), db)
    app.add_route("/test-echo", Echo(None))
    return falcon.testing.TestClient(app)


def _api_error(result, status):
    assert result.status_code == status, result.text
    body = result.json
    (err,) = body["errors"]
    assert err["status"] == status
    assert err["request_id"] == result.headers["x-openstack-request-id"]
    assert err["title"] and err["detail"]
    return err


# -- healthcheck ------------------------------------------------------------

def test_healthcheck_needs_no_token_and_reports_the_database(db):
    result = _client(db).simulate_get("/healthcheck")
    assert result.status_code == 200
    assert result.json == {"status": "ok", "database": "ok",
                           "quota": {"enforced": False, "model": "flat"}}


def test_healthcheck_is_503_without_details_when_the_database_is_down(
        db, caplog, monkeypatch):
    client = falcon.testing.TestClient(create_app(Settings(db=db.url), db))
    # The database goes away after start: a server that refuses
    # connections (nothing listens on port 1) takes its place.
    url = "mysql+pymysql://placement:s3cret@127.0.0.1:1/placement"
    down = Database(url)
    monkeypatch.setattr(db, "engine", down.engine)
    try:
        with caplog.at_level(logging.ERROR):
            result = client.simulate_get("/healthcheck")
    finally:
        down.dispose()
    assert result.status_code == 503
    assert result.json == {"status": "error", "database": "unreachable"}
    for secret in ("s3cret", "placement:", "127.0.0.1", "pymysql", "Errno"):
        assert secret not in result.text
    # The operator finds the reason in the log, not the caller.
    assert "healthcheck" in caplog.text


# -- request ids and the log line ---------------------------------------------

def test_every_response_has_a_request_id(db):
    client = _client(db)
    for result in (client.simulate_get("/"), client.simulate_get("/nowhere"),
                   client.simulate_get("/resource_providers")):
        rid = result.headers["x-openstack-request-id"]
        assert rid.startswith("req-") and result.headers["openstack-request-id"] == rid


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_one_log_line_per_request(db, fmt, caplog):
    client = _client(db, log_format=fmt)
    with caplog.at_level(logging.INFO, logger="placement_lite.request"):
        result = client.simulate_get(
            "/resource_providers", headers={**ADMIN,
                                            "OpenStack-API-Version": "placement 1.14"})
    records = [r for r in caplog.records if r.name == "placement_lite.request"]
    assert len(records) == 1
    fields = records[0].access
    assert fields["request_id"] == result.headers["x-openstack-request-id"]
    assert (fields["method"], fields["path"], fields["status"],
            fields["microversion"]) == ("GET", "/resource_providers",
                                        result.status_code, "1.14")
    assert fields["ms"] >= 0
    line = logs.JsonFormatter().format(records[0])
    parsed = json.loads(line)
    assert parsed["status"] == result.status_code and parsed["level"] == "INFO"
    if fmt == "json":
        assert json.loads(records[0].getMessage())["request_id"] == fields["request_id"]
    else:
        assert fields["request_id"] in records[0].getMessage()


@pytest.fixture
def service_log():
    """The log as the service writes it (logs.configure, as the command
    line sets it up), into a buffer; the test's own handlers come back after."""
    import io
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    buffers = []

    def configure(fmt):
        buf = io.StringIO()
        logs.configure(fmt, "INFO", stream=buf)
        buffers.append(buf)
        return buf
    yield configure
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in saved[0]:
        root.addHandler(handler)
    root.setLevel(saved[1])


# A line break, a terminal escape (red), NUL, DEL, C1's NEL and CSI, and
# Unicode's line and paragraph separators, percent-encoded in the path as
# a caller sends them; the query string is the caller's too.
FORGING_PATH = "/ui/static/a%0aINJECTED%20LINE%1b[31m%00%7f%C2%85%C2%9b%E2%80%A8%E2%80%A9"
SHOWN_PATH = ("/ui/static/a\\nINJECTED LINE\\x1b[31m\\x00\\x7f\\x85\\x9b"
              "\\u2028\\u2029")
CONTROLS = [chr(c) for c in [*range(0x20), *range(0x7f, 0xa0), 0x2028, 0x2029]]


@pytest.mark.parametrize("path", [FORGING_PATH, "/resource_providers%0d%0aX: 1"])
def test_a_path_cannot_forge_a_text_log_line(db, service_log, path):
    buf = service_log("text")
    _client(db).simulate_get(path, query_string="name=a%0ab", headers=ADMIN)
    out = buf.getvalue()
    assert out.count("\n") == 1, out
    assert not any(c in out[:-1] for c in CONTROLS), repr(out)
    if path == FORGING_PATH:
        assert SHOWN_PATH in out


def test_a_path_cannot_forge_a_json_log_line(db, service_log):
    buf = service_log("json")
    result = _client(db).simulate_get(FORGING_PATH, headers=ADMIN)
    (line,) = buf.getvalue().splitlines()
    record = json.loads(line)
    assert record["request_id"] == result.headers["x-openstack-request-id"]
    assert record["path"] == SHOWN_PATH
    # Raw DEL is valid in a JSON string; the value a log reader prints must
    # hold no control character either.
    assert not any(c in line or c in record["path"] for c in CONTROLS), repr(line)


def test_log_escapes_leave_ordinary_text_alone():
    assert logs.printable("/resource_providers/é?name=x y\\z") == \
        "/resource_providers/é?name=x y\\z"
    # Escaping twice changes nothing more: values escaped where they are
    # logged pass the formatters unchanged.
    once = logs.printable("a\x1b\n\u2028")
    assert once == "a\\x1b\\n\\u2028" and logs.printable(once) == once


def test_json_formatter_keeps_ordinary_records_and_exceptions():
    try:
        raise ValueError("boom")
    except ValueError:
        import sys
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed %s",
                                   ("here",), sys.exc_info())
    parsed = json.loads(logs.JsonFormatter().format(record))
    assert parsed["message"] == "failed here" and "ValueError: boom" in parsed["exception"]


# -- hostile input ------------------------------------------------------------

def test_oversized_body_is_413(db):
    client = _client(db, max_body_bytes=1024)
    body = json.dumps({"pad": "x" * 2048})
    err = _api_error(client.simulate_post("/test-echo", body=body, headers={
        **ADMIN, "Content-Type": "application/json"}), 413)
    assert "1024" in err["detail"]
    # Refused before routing: no resource sees it, whatever the path.
    _api_error(client.simulate_post("/resource_providers", body=body, headers={
        **ADMIN, "Content-Type": "application/json"}), 413)
    ok = client.simulate_post("/test-echo", body='{"a": 1}', headers={
        **ADMIN, "Content-Type": "application/json"})
    assert ok.status_code == 200 and ok.json == {"got": {"a": 1}}


def test_default_body_limit_is_one_mebibyte():
    assert Settings().max_body_bytes == 1024 * 1024


def test_chunked_body_over_the_limit_is_413_under_waitress(db):
    """waitress de-chunks a body and sets its length; the limit applies."""
    import http.client
    import threading

    import waitress

    app = create_app(Settings(db=db.url, max_body_bytes=1024), db)
    app.add_route("/test-echo", Echo(None))
    server = waitress.create_server(app, host="127.0.0.1", port=0, threads=2)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        payload = json.dumps({"pad": "x" * 4096}).encode()
        conn = http.client.HTTPConnection("127.0.0.1", server.effective_port, timeout=10)
        conn.request("POST", "/test-echo", body=iter([payload[:2000], payload[2000:]]),
                     headers={**ADMIN, "Content-Type": "application/json"},
                     encode_chunked=True)
        resp = conn.getresponse()
        body = json.loads(resp.read())
        assert resp.status == 413 and body["errors"][0]["status"] == 413
        assert "the limit is 1024" in body["errors"][0]["detail"]
        conn.close()
    finally:
        server.close()


@pytest.mark.parametrize("depth", [40, 100_000])
def test_deeply_nested_json_is_400(db, depth):
    client = _client(db, max_body_bytes=1024 * 1024)
    body = "[" * depth + "]" * depth
    err = _api_error(client.simulate_post("/test-echo", body=body, headers={
        **ADMIN, "Content-Type": "application/json"}), 400)
    assert "nested deeper" in err["detail"]


@pytest.mark.parametrize("raw", [b'{"name": "\xff\xfe"}', b"\xc3\x28"])
def test_non_utf8_json_is_400(db, raw):
    client = _client(db)
    err = _api_error(client.simulate_post("/test-echo", body=raw, headers={
        **ADMIN, "Content-Type": "application/json"}), 400)
    assert "UTF-8" in err["detail"]


@pytest.mark.parametrize("body", ["{", "nonsense", '{"a": 1,}'])
def test_malformed_json_is_400(db, body):
    _api_error(_client(db).simulate_post("/test-echo", body=body, headers={
        **ADMIN, "Content-Type": "application/json"}), 400)


def test_wrong_media_type_is_415(db):
    _api_error(_client(db).simulate_post("/test-echo", body="{}", headers={
        **ADMIN, "Content-Type": "text/plain"}), 415)


def test_query_string_floods_are_refused_quickly(db):
    client = _client(db)
    query = "&".join(f"p{i}=v" for i in range(50_000))
    started = time.perf_counter()
    result = client.simulate_get("/resource_providers", query_string=query,
                                 headers=ADMIN)
    elapsed = time.perf_counter() - started
    err = _api_error(result, 400)
    assert "1000" in err["detail"]
    assert elapsed < 1.0, f"took {elapsed:.2f}s"
    # At the limit is fine (the route itself may then reject unknown names).
    few = "&".join(f"name=v{i}" for i in range(3))
    assert client.simulate_get("/resource_providers", query_string=few,
                               headers=ADMIN).status_code != 500


def test_noauth2_default_token_only_when_configured(db):
    plain = _client(db)
    assert plain.simulate_get("/resource_providers").status_code == 401
    lenient = _client(db, noauth2_default_token="admin")
    assert lenient.simulate_get("/resource_providers").status_code == 200
    # A token that is sent still decides.
    assert lenient.simulate_get("/resource_providers", headers={
        "X-Auth-Token": "someone"}).status_code == 403


@pytest.mark.parametrize("path,query", [
    ("/resource_providers", "name=a%00b"),
    ("/resource_providers", "%00=1"),
    ("/resource_providers/abc%00def", None),
    ("/usages", "project_id=%00"),
])
def test_nul_in_the_url_is_400(db, path, query):
    # PostgreSQL cannot compare against a NUL: refused before any query.
    result = _client(db).simulate_get(path, query_string=query, headers={
        **ADMIN, "OpenStack-API-Version": "placement latest"})
    err = _api_error(result, 400)
    assert "NUL" in err["detail"]


@pytest.mark.parametrize("body", ['{"name": "a\\u0000b"}', '{"a\\u0000": 1}',
                                  '{"x": [["\\u0000"]]}'])
def test_nul_in_a_json_body_is_400(db, body):
    err = _api_error(_client(db).simulate_post("/test-echo", body=body, headers={
        **ADMIN, "Content-Type": "application/json"}), 400)
    assert "NUL" in err["detail"]


@pytest.mark.parametrize("path,query,body", [
    ("/resource_providers", "name=a%00b", None),
    ("/allocation_candidates", "resources=VCPU:99999999999999999999", None),
    ("/resource_providers", "resources=VCPU:99999999999999999999", None),
    ("/resource_providers", None, {"name": "a\u0000b"}),
])
def test_values_a_database_cannot_hold_are_400_on_every_backend(backend, path, query, body):
    """PostgreSQL rejects NUL characters and integers past bigint with a
    driver error; the API must answer 400 before the database sees them."""
    with fresh_database(backend) as database:
        client = falcon.testing.TestClient(
            create_app(Settings(db=database.url), database))
        result = client.simulate_request(
            "POST" if body else "GET", path, query_string=query, json=body,
            headers={**ADMIN, "OpenStack-API-Version": "placement latest"})
        _api_error(result, 400)
