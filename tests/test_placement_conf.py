"""Placement's own placement.conf, read as Placement reads it (issue 27):
a kolla-style file given to `serve --config-file` sets the database, the
bounds, CORS, proxy headers and policy; Placement's OS_<GROUP>__<OPTION>
variables win over the file, our own sources over both; each option that
changes nothing here, is not supported or does not exist is one start-up
line, and a bad value one refusal line with exit status 2."""
from __future__ import annotations

import logging
import re
import sqlite3
import subprocess
import sys
import uuid

import falcon.testing
import pytest

from placement_lite.app import build_wsgi
from placement_lite.config import ENV_PREFIX, Settings, load_settings
from placement_lite.db.engine import from_settings
from tests.backends import fresh_database
from tests.deployment_conf import write_kolla
from tests.servers import serve
from tests.test_startup import _refused, _run

V = "1.39"
# webob (under keystonemiddleware) still imports the deprecated cgi module.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _sqlite(path) -> str:
    return f"sqlite:///{path}"


def _conf(tmp_path, **kwargs):
    return write_kolla(tmp_path / "etc", _sqlite(tmp_path / "placement.sqlite"), **kwargs)


def _load(conf, environ=None, **cli):
    return load_settings({"config_file": [str(conf)], **cli}, environ=environ or {})


def _providers(served, count: int) -> None:
    for i in range(count):
        rp = str(uuid.uuid4())
        status, _h, body = served.request("POST", "/resource_providers", version=V,
                                          body={"name": f"cn{i}", "uuid": rp})
        assert status == 200, body
        status, _h, body = served.request(
            "PUT", f"/resource_providers/{rp}/inventories", version=V,
            body={"resource_provider_generation": 0,
                  "inventories": {"VCPU": {"total": 4}}})
        assert status == 200, body


def _candidates(served) -> int:
    status, _h, body = served.request("GET", "/allocation_candidates?resources=VCPU:1",
                                      version=V)
    assert status == 200, body
    return len(body["allocation_requests"])


_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \S+ (INFO|WARNING) ")


def _refused_after_the_log(out, *fragments, status):
    """A refusal that comes once logging is up: the start-up log's lines
    about the placement.conf, then the one refusal line."""
    others = [line for line in out.stderr.splitlines() if not _LOG_LINE.match(line)]
    assert len(others) == 1, out.stderr
    assert out.returncode == status and "Traceback" not in out.stderr, out.stderr
    for fragment in fragments:
        assert fragment in others[0], others[0]


def _lines(served, fragment: str) -> list[str]:
    return [line for line in served.lines if fragment in line]


# -- a kolla placement.conf, served ------------------------------------------

def test_serve_runs_on_a_kolla_placement_conf(tmp_path):
    conf = _conf(tmp_path)
    with serve(None, "--config-file", str(conf)) as srv:
        # [placement_database] connection: the file's SQLite database.
        assert f"database: sqlite:///{tmp_path / 'placement.sqlite'}" in srv.output
        assert (tmp_path / "placement.sqlite").exists()
        _providers(srv, 3)
        # [placement] max_allocation_candidates = 2
        assert _candidates(srv) == 2
        # [oslo_middleware] enable_proxy_headers_parsing: the Location the
        # caller can follow is the proxy's.
        status, headers, _b = srv.request(
            "POST", "/resource_providers", version=V, body={"name": "behind"},
            headers={"X-Forwarded-Proto": "https",
                     "X-Forwarded-Host": "placement.example.com"})
        assert status == 200
        assert headers["Location"].startswith(
            "https://placement.example.com/resource_providers/")
        # [cors] allowed_origin, with Placement's default allow_headers.
        status, headers, _b = srv.request("OPTIONS", "/resource_providers", token=None,
                                          headers={
            "Origin": "https://horizon.example.com",
            "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "X-Auth-Token,OpenStack-API-Version"})
        assert headers["Access-Control-Allow-Origin"] == "https://horizon.example.com"
        # Each option that is not read is named, once, in one line.
        for fragment in ("[DEFAULT] log_dir, state_path", "[oslo_concurrency] lock_path",
                         "[placement_database] max_retries",
                         "[oslo_messaging_notifications] driver",
                         "[profiler] enabled"):
            found = _lines(srv, fragment)
            assert len(found) == 1, (fragment, srv.output)
            assert "WARNING" in found[0] and "not supported here" in found[0]
        accepted = _lines(srv, "[workarounds] optimize_for_wide_provider_trees")
        assert len(accepted) == 1 and "INFO" in accepted[0] and "accepted" in accepted[0]
        assert "Traceback" not in srv.output


def test_placements_environment_form_wins_over_the_file_and_our_flags_over_both(
        tmp_path):
    conf = _conf(tmp_path)
    elsewhere = tmp_path / "from-environment.sqlite"
    env = {"OS_PLACEMENT_DATABASE__CONNECTION": _sqlite(elsewhere),
           "OS_PLACEMENT__MAX_ALLOCATION_CANDIDATES": "3"}
    with serve(None, "--config-file", str(conf), env=env) as srv:
        assert f"database: {_sqlite(elsewhere)}" in srv.output
        assert not (tmp_path / "placement.sqlite").exists()
        _providers(srv, 4)
        assert _candidates(srv) == 3
    flagged = tmp_path / "from-flag.sqlite"
    with serve(_sqlite(flagged), "--config-file", str(conf),
               "--max-allocation-candidates", "1", env=env) as srv:
        assert f"database: {_sqlite(flagged)}" in srv.output
        _providers(srv, 2)
        assert _candidates(srv) == 1


def test_each_source_wins_over_the_ones_below_it(tmp_path):
    """flags > PLACEMENT_LITE_* > our YAML > OS_<GROUP>__<OPTION> >
    placement.conf > defaults, one setting followed down the chain."""
    conf = _conf(tmp_path, max_candidates=10)
    yaml_file = tmp_path / "ours.yaml"
    yaml_file.write_text("max_allocation_candidates: 30\n")
    both = [str(conf), str(yaml_file)]
    placement_env = {"OS_PLACEMENT__MAX_ALLOCATION_CANDIDATES": "20"}
    ours_env = {ENV_PREFIX + "MAX_ALLOCATION_CANDIDATES": "40"}
    chain = [({"max_allocation_candidates": "50"}, {**placement_env, **ours_env}, both, 50),
             ({}, {**placement_env, **ours_env}, both, 40),
             ({}, placement_env, both, 30),
             ({}, placement_env, [str(conf)], 20)]
    for cli, env, given, expected in chain:
        settings = load_settings({"config_file": given, **cli}, environ=env)
        assert settings.max_allocation_candidates == expected, (cli, env, given)
    assert _load(conf).max_allocation_candidates == 10
    assert load_settings({}, environ={}).max_allocation_candidates == 1000
    # The source of each is named as the operator gave it.
    settings = _load(conf, placement_env)
    assert settings.describe("max_allocation_candidates") == (
        "OS_PLACEMENT__MAX_ALLOCATION_CANDIDATES=20 (environment)")
    assert settings.describe("db_pool_size") == (
        f"[placement_database] max_pool_size = 6 (in {conf})")


def test_config_show_says_where_each_value_came_from(tmp_path):
    conf = _conf(tmp_path)
    out = _run("config", "show", "--config-file", str(conf), "--port", "9999",
               env={"OS_PLACEMENT__MAX_ALLOCATION_CANDIDATES": "7",
                    ENV_PREFIX + "THREADS": "3"})
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line for line in out.stdout.splitlines() if "  <- " in line}
    assert rows["port"].endswith("9999  <- --port")
    assert rows["threads"].endswith("3  <- PLACEMENT_LITE_THREADS (environment)")
    assert rows["max_allocation_candidates"].endswith(
        "7  <- OS_PLACEMENT__MAX_ALLOCATION_CANDIDATES (environment: Placement's "
        "[placement] max_allocation_candidates)")
    assert rows["db_pool_size"].endswith(f"6  <- [placement_database] max_pool_size in {conf}")
    assert rows["policy_profile"].endswith(
        f"legacy  <- [oslo_policy] enforce_new_defaults in {conf}")
    assert rows["workers"].endswith("1  <- default")
    assert "[keystone_authtoken], handed to keystonemiddleware as it is: auth_type, " \
        "auth_url, memcache_secret_key" in out.stdout
    assert "kolla-secret" not in out.stdout  # names, never values
    assert "warning: [oslo_concurrency] lock_path" in out.stdout


def test_serve_help_says_which_source_wins(capsys, monkeypatch):
    from placement_lite import cli
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit):
        cli.main(["serve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert ("Each setting is taken from the first of: its flag; its PLACEMENT_LITE_* "
            "variable; our YAML settings file; Placement's own configuration") in text
    assert "`placement-lite config show`" in text


# -- refusals and start-up lines --------------------------------------------

@pytest.mark.parametrize("option, value, message", [
    ("max_allocation_candidates", "many", "must be a whole number"),
    ("max_allocation_candidates", "0",
     "max_allocation_candidates must be at least 1, or -1 for no bound"),
    ("allocation_candidates_generation_strategy", "sideways",
     "must be one of depth-first, breadth-first"),
    ("randomize_allocation_candidates", "perhaps", "must be true or false"),
])
def test_a_bad_value_is_one_line_and_exit_2(tmp_path, option, value, message):
    conf = _conf(tmp_path, extra=f"\n[placement]\n{option} = {value}\n")
    out = _run("serve", "--config-file", str(conf))
    _refused(out, f"[placement] {option} = {value} (in {conf}): {message}", status=2)
    assert not (tmp_path / "placement.sqlite").exists()


def test_a_bad_value_in_the_environment_form_is_one_line(tmp_path):
    out = _run("serve", "--config-file", str(_conf(tmp_path)),
               env={"OS_API__AUTH_STRATEGY": "none"})
    _refused(out, "OS_API__AUTH_STRATEGY=none (environment): must be one of "
             "keystone, noauth2", status=2)


def test_a_bad_keystone_authtoken_value_is_refused_at_start(tmp_path):
    pytest.importorskip("keystonemiddleware")
    conf = _conf(tmp_path, extra="\n[keystone_authtoken]\nhttp_connect_timeout = soon\n")
    out = _run("serve", "--config-file", str(conf))
    _refused(out, f"[keystone_authtoken] http_connect_timeout = soon (in {conf}): "
             "must be a whole number", status=2)


def test_a_placement_conf_without_a_connection_is_refused(tmp_path):
    conf = tmp_path / "placement.conf"
    conf.write_text("[api]\nauth_strategy = noauth2\n")
    out = _run("serve", "--config-file", str(conf))
    _refused(out, f"[placement_database] connection is not set in {conf}",
             "OS_PLACEMENT_DATABASE__CONNECTION", status=2)


def test_placements_own_database_is_refused_with_the_way_out(tmp_path):
    """The trap of the move: the conf still names Placement's database."""
    theirs = tmp_path / "placement.sqlite"
    with sqlite3.connect(theirs) as conn:
        conn.execute("CREATE TABLE alembic_version (version_num VARCHAR(32))")
        conn.execute("INSERT INTO alembic_version VALUES ('a082b8bb98d0')")
        conn.execute("CREATE TABLE resource_providers (id INTEGER PRIMARY KEY)")
    out = _run("serve", "--config-file", str(_conf(tmp_path)))
    _refused_after_the_log(out, "placement-lite: cannot start: [placement_database] "
                           f"connection = {_sqlite(theirs)} (in ",
             "alembic revision a082b8bb98d0", "OpenStack Placement's own",
             "placement-lite db import --from URL --db NEW_URL", status=2)
    with sqlite3.connect(theirs) as conn:  # untouched
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [
            ("a082b8bb98d0",)]


def test_unknown_and_unsupported_options_are_each_one_line(tmp_path):
    conf = _conf(tmp_path, extra="\n[placement]\nmax_alocation_candidates = 3\n"
                 "allocation_candidates_generation_strategy = breadth-first\n"
                 "[frobnicator]\nspeed = 11\n"
                 "[keystone_authtoken]\nmemcache_servr = x\n")
    notes = _load(conf, {"OS_PLACEMENT__NO_SUCH": "1"}).deployment.notes
    text = [line for _level, line in notes]

    def one(fragment):
        found = [line for line in text if fragment in line]
        assert len(found) == 1, (fragment, text)
        return found[0]
    assert one("[placement] max_alocation_candidates").endswith(
        "Placement has no such option; ignored (did you mean max_allocation_candidates?)")
    assert "neither Placement nor placement-lite reads a section [frobnicator]" in one(
        "[frobnicator] speed")
    assert "not supported" in one("allocation_candidates_generation_strategy = breadth")
    assert "Placement has no such option" in one(
        "[placement] no_such (OS_PLACEMENT__NO_SUCH, environment)")
    try:
        import keystonemiddleware  # noqa: F401
    except ImportError:
        pass  # the section is then checked by nothing but auth_token itself
    else:
        assert "keystonemiddleware" in one("[keystone_authtoken] memcache_servr")
    levels = {line: level for level, line in notes}
    assert levels[one("[frobnicator]")] == logging.WARNING
    assert levels[one("[oslo_policy] enforce_scope")] == logging.INFO


def test_two_yaml_files_are_refused_but_a_yaml_and_a_placement_conf_mix(tmp_path):
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text("threads: 3\n")
    second.write_text("workers: 2\n")
    with pytest.raises(ValueError, match="one YAML settings file at most"):
        load_settings({"config_file": [str(first), str(second)]}, environ={})
    settings = load_settings({"config_file": [str(_conf(tmp_path)), str(first)]},
                             environ={})
    assert settings.threads == 3 and settings.db_pool_size == 6


def test_a_config_dir_is_read_after_the_files_in_name_order(tmp_path):
    conf = _conf(tmp_path)
    extra = tmp_path / "conf.d"
    extra.mkdir()
    (extra / "20-late.conf").write_text("[placement]\nmax_allocation_candidates = 9\n")
    (extra / "10-early.conf").write_text("[placement]\nmax_allocation_candidates = 8\n"
                                         "randomize_allocation_candidates = true\n")
    settings = _load(conf, config_dir=[str(extra)])
    assert settings.max_allocation_candidates == 9
    assert settings.randomize_allocation_candidates is True
    assert settings.deployment.files[0] == str(conf)


# -- what each option becomes ------------------------------------------------

def test_the_database_options_reach_the_pool(tmp_path):
    conf = _conf(tmp_path)
    settings = _load(conf, db="mysql+pymysql://placement@127.0.0.1/placement")
    assert (settings.db_pool_size, settings.db_max_overflow,
            settings.db_recycle_seconds) == (6, 12, 600)
    db = from_settings(settings)  # no connection is opened
    try:
        pool = db.engine.pool
        assert (pool.size(), pool._max_overflow, pool._recycle) == (6, 12, 600)
        assert pool._timeout == 30.0
    finally:
        db.dispose()


def test_connection_parameters_are_added_to_the_url(tmp_path):
    conf = _conf(tmp_path, extra="\n[placement_database]\n"
                 "connection_parameters = charset=utf8mb4&read_timeout=5\n")
    settings = _load(conf)
    assert settings.db == (f"{_sqlite(tmp_path / 'placement.sqlite')}"
                           "?charset=utf8mb4&read_timeout=5")


def test_a_placement_conf_means_placements_defaults_for_who_may_do_what(tmp_path):
    """A file written for Placement assumes Placement's auth and policy
    defaults where it says nothing."""
    conf = tmp_path / "placement.conf"
    conf.write_text(f"[placement_database]\nconnection = {_sqlite(tmp_path / 'x.db')}\n")
    settings = _load(conf)
    assert settings.auth == "keystone"
    assert settings.policy_profile == "secure-rbac"
    assert settings.describe("auth") == (
        "[api] auth_strategy = keystone (Placement's default, a placement.conf "
        "being read)")
    # Our own defaults stay ours without one.
    plain = load_settings({}, environ={})
    assert (plain.auth, plain.policy_profile) == ("noauth2", "legacy")


def test_auth_strategy_under_its_deprecated_default_group_still_counts(tmp_path):
    conf = tmp_path / "placement.conf"
    conf.write_text("[DEFAULT]\nauth_strategy = noauth2\n[placement_database]\n"
                    f"connection = {_sqlite(tmp_path / 'x.db')}\n")
    settings = _load(conf)
    assert settings.auth == "noauth2"
    assert any("deprecated" in line for _l, line in settings.deployment.notes)


def test_the_policy_file_is_found_beside_the_placement_conf(tmp_path):
    conf = _conf(tmp_path, extra="\n[oslo_policy]\npolicy_file = placement-policy.yaml\n")
    assert _load(conf).policy_file is None  # not there: the defaults apply, as in Placement
    rules = conf.parent / "placement-policy.yaml"
    rules.write_text('"placement:traits:list": "role:reader"\n')
    settings = _load(conf)
    assert settings.policy_file == str(rules)
    # Placement's default name, policy.yaml, is looked for there too.
    default = _conf(tmp_path / "other")
    (default.parent / "policy.yaml").write_text("{}\n")
    assert _load(default).policy_file == str(default.parent / "policy.yaml")


def test_a_consumer_written_without_an_owner_gets_the_configured_one(tmp_path):
    conf = _conf(tmp_path, extra="\n[placement]\nincomplete_consumer_project_id = "
                 "legacy-project\nincomplete_consumer_user_id = legacy-user\n")
    settings = _load(conf)
    with fresh_database("sqlite") as db:
        settings = Settings(**{**{n: getattr(settings, n) for n in settings.field_names()},
                               "db": db.url, "proxy_headers": False})
        client = falcon.testing.TestClient(build_wsgi(settings, db))
        admin = {"X-Auth-Token": "admin", "OpenStack-API-Version": "placement 1.7"}
        v120 = {**admin, "OpenStack-API-Version": "placement 1.20"}
        rp, consumer = str(uuid.uuid4()), str(uuid.uuid4())
        assert client.simulate_post("/resource_providers", headers=v120, json={
            "name": "cn", "uuid": rp}).status_code == 200
        assert client.simulate_put(f"/resource_providers/{rp}/inventories", headers=v120,
                                   json={"resource_provider_generation": 0,
                                         "inventories": {"VCPU": {"total": 4}}}
                                   ).status_code == 200
        result = client.simulate_put(f"/allocations/{consumer}", headers=admin, json={
            "allocations": [{"resource_provider": {"uuid": rp},
                             "resources": {"VCPU": 1}}]})
        assert result.status_code == 204, result.text
        result = client.simulate_get(f"/allocations/{consumer}", headers={
            **admin, "OpenStack-API-Version": "placement 1.12"})
        assert (result.json["project_id"], result.json["user_id"]) == (
            "legacy-project", "legacy-user")


def test_proxy_headers_are_read_only_when_turned_on():
    with fresh_database("sqlite") as db:
        forwarded = {"X-Auth-Token": "admin",
                     "Forwarded": 'for=198.51.100.7;proto=https;host="api.example.com"',
                     "X-Forwarded-Prefix": "/placement"}
        for on, expected in ((True, "https://api.example.com/placement/resource_providers/"),
                             (False, "http://falconframework.org/resource_providers/")):
            client = falcon.testing.TestClient(
                build_wsgi(Settings(db=db.url, proxy_headers=on), db))
            result = client.simulate_post("/resource_providers", headers={
                **forwarded, "OpenStack-API-Version": "placement 1.20"},
                json={"name": f"rp-{on}"})
            assert result.status_code == 200, result.text
            assert result.headers["location"].startswith(expected), result.headers


def test_our_own_rules_refuse_a_placement_conf_value_by_its_option(tmp_path):
    conf = _conf(tmp_path, extra="\n[placement_database]\nmax_pool_size = 0\n")
    with pytest.raises(ValueError) as err:
        _load(conf)
    assert str(err.value) == (f"[placement_database] max_pool_size = 0 (in {conf}): "
                              "db_pool_size must be at least 1")


def test_without_placement_configuration_oslo_config_is_not_imported(tmp_path):
    """Start-up stays as light as before for those who never had Placement."""
    code = ("import sys; from placement_lite.config import load_settings; "
            "load_settings({}, environ={}); print('oslo_config' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_memcached_servers_without_python_memcached_is_refused_at_start(tmp_path):
    """keystonemiddleware's token cache imports python-memcached only at the
    first request with a token; start-up says so before anything is served."""
    pytest.importorskip("keystonemiddleware")
    conf = _conf(tmp_path, auth_strategy="keystone")
    out = _run("serve", "--config-file", str(conf), block="memcache")
    _refused_after_the_log(out, "placement-lite: cannot start: [keystone_authtoken] "
                           "memcached_servers = 192.0.2.10:11211: keystonemiddleware's "
                           "token cache needs python-memcached", status=2)


def test_config_show_can_look_where_the_wsgi_entry_point_looks(tmp_path):
    directory = _conf(tmp_path).parent
    out = _run("config", "show", "--wsgi", env={"OS_PLACEMENT_CONFIG_DIR": str(directory)})
    assert out.returncode == 0, out.stderr
    assert f"  {directory / 'placement.conf'}" in out.stdout
    assert f"<- [placement_database] connection in {directory / 'placement.conf'}" \
        in out.stdout
