"""Start-up: every way `serve` can fail is one line on stderr naming the
setting and the fix, a non-zero exit, and nothing said about listening;
noauth2 stays on loopback unless the operator says otherwise; quota
enforcement is the deployment's, stored in the database, so processes
started with different flags still answer alike."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid

import falcon.testing
import pytest

from placement_lite import errors
from placement_lite.app import create_app
from placement_lite.config import Settings, load_settings
from placement_lite.quota import enforce
from tests.backends import backend_id, backend_urls, fresh_database, fresh_url
from tests.servers import serve

ADMIN = {"X-Auth-Token": "admin"}
V128 = {**ADMIN, "OpenStack-API-Version": "placement 1.28"}

# Runs the command line in a fresh interpreter; BLOCK names modules to make
# unimportable there (a driver that is "not installed" whatever this
# machine has).
_MAIN = ("import os, sys\n"
         "for name in filter(None, os.environ.get('BLOCK', '').split(',')):\n"
         "    sys.modules[name] = None\n"
         "from placement_lite.cli import main\n"
         "sys.exit(main(sys.argv[1:]))\n")


def _run(*args: str, env: dict | None = None, block: str = "",
         timeout: float = 60) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items()
                if not k.startswith("PLACEMENT_LITE_")}
    full_env.update(env or {}, BLOCK=block)
    return subprocess.run([sys.executable, "-c", _MAIN, *args], env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def _refused(out: subprocess.CompletedProcess, *fragments: str, status=None):
    """The one-line refusal every start-up failure must be."""
    assert out.returncode != 0, (out.stdout, out.stderr)
    if status is not None:
        assert out.returncode == status, out.stderr
    assert "Traceback" not in out.stderr and "listening" not in out.stderr + out.stdout
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    line = lines[0]
    assert line.startswith("placement-lite: cannot start: "), line
    for fragment in fragments:
        assert fragment in line, line
    return line


@pytest.fixture
def sqlite_path(tmp_path):
    return f"sqlite:///{tmp_path / 'placement.sqlite'}"


# -- each start-up failure ---------------------------------------------------

@pytest.mark.parametrize("auth", ["noauth2", "keystone"])
def test_port_in_use(sqlite_path, auth):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    try:
        # keystone: refused before its middleware logs a line of its own.
        out = _run("serve", "--db", sqlite_path, "--port", str(port), "--auth", auth,
                   "--keystone-authtoken", "www_authenticate_uri=http://k/")
    finally:
        taken.close()
    _refused(out, f"--port {port}", f"127.0.0.1:{port} is already in use",
             "choose another port", status=1)


def test_malformed_db_url():
    out = _run("serve", "--db", "::not-a-url")
    _refused(out, "--db ::not-a-url", "must be a database URL such as", status=2)


def test_unknown_database_backend():
    out = _run("serve", "--db", "nosuchdb://host/placement")
    _refused(out, "--db nosuchdb://host/placement", "no database backend named",
             status=2)


def test_missing_driver():
    out = _run("serve", "--db", "mysql://root:s3cret@127.0.0.1/placement",
               block="MySQLdb")
    line = _refused(out, "--db mysql://root:***@127.0.0.1/placement",
                    "driver is not installed", "'MySQLdb'",
                    "pip install mysqlclient", "mysql+pymysql://", status=2)
    assert "s3cret" not in line


def test_unreachable_database():
    # Nothing listens on port 1.
    out = _run("serve", "--db", "mysql+pymysql://root:s3cret@127.0.0.1:1/placement")
    line = _refused(out, "--db mysql+pymysql://root:***@127.0.0.1:1/placement",
                    "cannot use the database", "Can't connect",
                    "check that the server is running", status=1)
    assert "s3cret" not in line


def test_unwritable_sqlite_path():
    # /proc is a directory no one can create a file in.
    path = "/proc/placement.sqlite"
    out = _run("serve", "--db", f"sqlite:///{path}")
    _refused(out, f"--db sqlite:///{path}", f"cannot create or write the SQLite "
             f"database {path}", "choose a path in a directory this user can write",
             status=1)


@pytest.mark.parametrize("command", [["serve"], ["db", "upgrade"],
                                     ["db", "import", "--from", "sqlite://"]])
@pytest.mark.parametrize("given", ["flag", "environment"])
def test_a_sqlite_path_in_a_missing_directory_is_refused(tmp_path, command, given):
    """A typo in --db must not become a new, empty database (and
    directories) that the service then serves."""
    path = tmp_path / "no" / "such" / "dir" / "x.db"
    url = f"sqlite:///{path}"
    if given == "flag":
        out = _run(*command, "--db", url)
        named = f"--db {url}"
    else:
        out = _run(*command, env={"PLACEMENT_LITE_DB": url})
        named = f"PLACEMENT_LITE_DB={url} (environment)"
    _refused(out, named, f"the directory {path.parent} does not exist",
             "create it first", status=2)
    assert not (tmp_path / "no").exists()


def test_a_sqlite_path_under_a_file_is_refused(tmp_path):
    (tmp_path / "a-file").write_text("")
    path = tmp_path / "a-file" / "placement.sqlite"
    out = _run("serve", "--db", f"sqlite:///{path}")
    _refused(out, f"--db sqlite:///{path}", f"{path.parent} is not a directory",
             status=2)


def _home(tmp_path) -> dict:
    return {"HOME": str(tmp_path), "XDG_DATA_HOME": ""}


def test_serve_without_db_creates_the_default_directory(tmp_path):
    """The README's quick start: `placement-lite serve` on a fresh account."""
    with serve(None, env=_home(tmp_path)) as srv:
        assert srv.request("GET", "/healthcheck", token=None)[0] == 200
    assert (tmp_path / ".local" / "share" / "placement-lite"
            / "placement-lite.sqlite").is_file()


READ_ONLY = [["report"], ["db", "check"], ["db", "version"],
             ["db", "compare", "--from", "sqlite://"], ["quota", "enforcement"]]


@pytest.mark.parametrize("command", READ_ONLY, ids=" ".join)
def test_read_only_commands_never_create_a_database(tmp_path, command):
    path = tmp_path / "typo.sqlite"
    out = _run(*command, "--db", f"sqlite:///{path}")
    _refused(out, f"--db sqlite:///{path}", f"no database at {path}", status=1)
    assert list(tmp_path.iterdir()) == []
    # Nor at the default location, nor its directories.
    out = _run(*command, env=_home(tmp_path))
    _refused(out, "no database at "
             f"{tmp_path}/.local/share/placement-lite/placement-lite.sqlite", status=1)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", READ_ONLY, ids=" ".join)
def test_read_only_commands_in_a_missing_directory_say_no_database(tmp_path, command):
    path = tmp_path / "no" / "x.sqlite"
    out = _run(*command, "--db", f"sqlite:///{path}")
    _refused(out, f"no database at {path}", status=1)
    assert not (tmp_path / "no").exists()


def test_bad_yaml_config(tmp_path):
    path = tmp_path / "settings.yaml"
    path.write_text("port: 8778\nthreads: [4\n")
    out = _run("serve", "--config-file", str(path))
    _refused(out, f"--config-file {path}", "not valid YAML at line 3", status=2)


def test_bad_value_in_the_config_file(tmp_path):
    path = tmp_path / "settings.yaml"
    path.write_text("threads: 0\n")
    out = _run("serve", "--config-file", str(path))
    _refused(out, f"threads: 0 (in {path}): threads must be at least 1", status=2)


def test_a_non_number_port_is_one_line(sqlite_path):
    out = _run("serve", "--db", sqlite_path, "--port", "abc")
    _refused(out, "--port abc: port must be a whole number", status=2)


def test_an_unknown_variable_in_the_environment(sqlite_path):
    # Spelled in two parts: the repository's scan of names must not read
    # the typo as a variable something uses.
    typo = "PLACEMENT_LITE_" + "PROT"
    out = _run("serve", "--db", sqlite_path, env={typo: "9999"})
    _refused(out, f"{typo} (environment): no such setting; did you mean "
             "PLACEMENT_LITE_PORT?", status=2)


@pytest.mark.parametrize("block", ["keystonemiddleware",
                                   # Without keystonemiddleware, its
                                   # keystoneauth1 is usually missing too
                                   # (oslo.config is not: oslo.policy needs it).
                                   "keystonemiddleware,keystoneauth1"])
def test_keystone_auth_without_keystonemiddleware(tmp_path, block):
    db = tmp_path / "placement.sqlite"
    out = _run("serve", "--db", f"sqlite:///{db}", "--auth", "keystone",
               "--port", "0", block=block)
    _refused(out, "--auth keystone", "keystonemiddleware is not installed",
             "pip install 'placement-lite[keystone]'", "--auth noauth2", status=2)
    assert not db.exists()


def test_bad_value_in_the_environment(sqlite_path):
    out = _run("serve", "--db", sqlite_path, env={"PLACEMENT_LITE_THREADS": "0"})
    _refused(out, "PLACEMENT_LITE_THREADS=0 (environment): threads must be at "
             "least 1", status=2)


@pytest.mark.parametrize("host, fragments, status", [
    ("http://0.0.0.0", ["--host http://0.0.0.0", "not a URL"], 2),
    ("nosuch.invalid", ["--host nosuch.invalid", "cannot listen there"], 2),
    # TEST-NET-1: an address, but not one of this machine's.
    ("192.0.2.1", ["--host 192.0.2.1", "not an address of this machine"], 2),
])
def test_bad_host(sqlite_path, host, fragments, status):
    out = _run("serve", "--db", sqlite_path, "--host", host,
               "--insecure-noauth2-on-open-address")
    _refused(out, *fragments, status=status)


def test_missing_policy_file(sqlite_path, tmp_path):
    missing = tmp_path / "policy.yaml"
    out = _run("serve", "--db", sqlite_path, "--policy-file", str(missing))
    _refused(out, f"--policy-file {missing}", "no such file", status=2)


def test_unreadable_policy_file(sqlite_path, tmp_path):
    bad = tmp_path / "policy.yaml"
    bad.write_text("rule: [\n")
    out = _run("serve", "--db", sqlite_path, "--policy-file", str(bad))
    _refused(out, f"--policy-file {bad}", "not a usable policy file", status=2)


@pytest.mark.parametrize("flag, value, message", [
    ("--port", "99999", "--port 99999: port must be between 1 and 65535"),
    ("--threads", "0", "--threads 0: threads must be at least 1"),
    ("--max-body-bytes", "-1", "--max-body-bytes -1: max_body_bytes must be greater than 0"),
    ("--workers", "0", "--workers 0: workers must be at least 1"),
    ("--workers", "-3", "--workers -3: workers must be at least 1"),
    ("--log-level", "LOUD", "--log-level LOUD: log_level must be one of"),
])
def test_flag_bounds_refuse_to_start(sqlite_path, flag, value, message):
    _refused(_run("serve", "--db", sqlite_path, flag, value), message, status=2)


# -- noauth2 on an open address ------------------------------------------------

def test_noauth2_on_an_open_address_is_refused(sqlite_path):
    out = _run("serve", "--db", sqlite_path, "--host", "0.0.0.0", "--port", "0")
    _refused(out, "--host 0.0.0.0", "noauth2", "--insecure-noauth2-on-open-address",
             "--auth keystone", status=2)


def test_noauth2_refusal_names_the_environment(sqlite_path):
    out = _run("serve", "--db", sqlite_path, "--port", "0",
               env={"PLACEMENT_LITE_HOST": "0.0.0.0"})
    _refused(out, "PLACEMENT_LITE_HOST=0.0.0.0 (environment)", status=2)


def test_noauth2_on_an_open_address_when_said_out_loud(sqlite_path):
    with serve(sqlite_path, "--host", "0.0.0.0",
               "--insecure-noauth2-on-open-address") as srv:
        line = srv.wait_for_line("listening on")
        assert "auth: noauth2 (INSECURE" in line
        assert "noauth2 on an open address" in srv.output
        assert srv.request("GET", "/healthcheck", token=None)[0] == 200


def test_the_startup_line_names_auth_and_quota_enforcement(sqlite_path):
    # The flag allows an open address; on loopback there is nothing to warn of.
    with serve(sqlite_path, "--insecure-noauth2-on-open-address") as srv:
        line = srv.wait_for_line("listening on")
        assert "auth: noauth2 (development" in line
        assert "loopback only" in line
        assert "quota enforcement: off, model flat" in line
        assert "INSECURE" not in srv.output


def test_loopback_names_are_fine_for_noauth2(sqlite_path):
    with serve(sqlite_path, "--host", "localhost") as srv:
        assert srv.request("GET", "/healthcheck", token=None)[0] == 200


# -- quota enforcement is the deployment's ---------------------------------

def _seed(client, project="proj-x"):
    """A service, a registered default of 2 VCPU, a provider with 8."""
    svc = client.simulate_post("/v3/services", headers=ADMIN,
                               json={"service": {"type": "placement"}})
    assert svc.status_code == 201, svc.text
    reg = client.simulate_post("/v3/registered_limits", headers=ADMIN, json={
        "registered_limits": [{"service_id": svc.json["service"]["id"],
                               "resource_name": "class:VCPU",
                               "default_limit": 2}]})
    assert reg.status_code == 201, reg.text
    rp = str(uuid.uuid4())
    made = client.simulate_post("/resource_providers", headers=V128,
                                json={"name": "cn1", "uuid": rp})
    assert made.status_code in (200, 201), made.text
    inv = client.simulate_put(f"/resource_providers/{rp}/inventories", headers=V128,
                              json={"resource_provider_generation": 0,
                                    "inventories": {"VCPU": {"total": 8}}})
    assert inv.status_code == 200, inv.text
    return rp


def _claim(client, rp, vcpu, project="proj-x"):
    return client.simulate_put(
        f"/allocations/{uuid.uuid4()}",
        headers=V128,
        json={"allocations": {rp: {"resources": {"VCPU": vcpu}}},
              "project_id": project, "user_id": "u",
              "consumer_generation": None})


def _check(client, vcpu, project="proj-x"):
    return client.simulate_post("/quota/check", headers=ADMIN, json={
        "project_id": project, "deltas": {"class:VCPU": vcpu}})


@pytest.mark.parametrize("backend", backend_urls(), ids=backend_id)
def test_two_processes_over_one_database_agree(backend):
    """The first starts with quota enforced; the second without the flag.
    Both refuse the same claim and the same check, and an admin change
    reaches both at once."""
    with fresh_database(backend) as db:
        first = falcon.testing.TestClient(
            create_app(Settings(db=db.url, quota_enforce=True), db))
        second = falcon.testing.TestClient(create_app(Settings(db=db.url), db))
        rp = _seed(first)
        for client in (first, second):
            assert _claim(client, rp, 3).status_code == 403
            refused = _check(client, 3)
            assert refused.status_code == 403
            assert refused.json["errors"][0]["code"] == "placement.quota.over_limit"
            assert _check(client, 2).status_code == 204
            model = client.simulate_get("/v3/limits/model", headers=ADMIN).json
            assert model["model"]["name"] == "flat" and model["model"]["enforced"] is True
            health = client.simulate_get("/healthcheck").json
            assert health["quota"] == {"enforced": True, "model": "flat"}

        before, after = enforce.change(db, enforce=False)
        assert (before.enforce, after.enforce) == (True, False)
        for client in (first, second):
            assert _check(client, 3).status_code == 204
            assert _claim(client, rp, 3).status_code == 204
            assert client.simulate_get("/healthcheck").json["quota"]["enforced"] is False
            model = client.simulate_get("/v3/limits/model", headers=ADMIN).json
            assert model["model"]["enforced"] is False


def test_the_first_start_stores_its_settings_and_later_ones_follow():
    with fresh_database("sqlite") as db:
        create_app(Settings(db=db.url, quota_enforce=True,
                            quota_model="strict_two_level"), db)
        with db.read() as conn:
            found = enforce.stored(conn)
        assert (found.enforce, found.model, found.set_by) == (
            True, "strict_two_level", "first start")
        # Defaults are no contradiction: the process follows the database.
        client = falcon.testing.TestClient(create_app(Settings(db=db.url), db))
        body = client.simulate_get("/v3/limits/model", headers=ADMIN).json
        assert body["model"]["name"] == "strict_two_level"


@pytest.mark.parametrize("given, fragments", [
    ({"quota_enforce": False}, ["--no-quota-enforce asks for quota enforcement off",
                                "has quota enforcement on, model flat",
                                "placement-lite quota enforcement --set off --model flat"]),
    ({"quota_model": "strict_two_level"}, [
        "--quota-model strict_two_level asks for the strict_two_level model",
        "--set on --model strict_two_level"]),
])
def test_explicit_settings_that_disagree_refuse_to_start(given, fragments):
    with fresh_database("sqlite") as db:
        create_app(Settings(db=db.url, quota_enforce=True), db)
        flags = {k: "--" + k.replace("_", "-") for k in given}
        settings = load_settings({"db": db.url, **given}, environ={}, flags=flags)
        with pytest.raises(enforce.EnforcementMismatch) as err:
            create_app(settings, db)
        for fragment in fragments:
            assert fragment in str(err.value), err.value
        # A supervisor's worker does not re-judge what its parent accepted.
        create_app(settings, db, worker=0)


def test_a_disagreeing_process_refuses_in_one_line(sqlite_path):
    with serve(sqlite_path, "--quota-enforce") as srv:
        assert "quota enforcement: on, model flat" in srv.wait_for_line("listening")
    out = _run("serve", "--db", sqlite_path, "--port", "0", "--no-quota-enforce")
    _refused(out, "--no-quota-enforce asks for quota enforcement off",
             "quota enforcement --set off", status=2)
    out = _run("serve", "--db", sqlite_path, "--port", "0",
               env={"PLACEMENT_LITE_QUOTA_MODEL": "strict_two_level"})
    _refused(out, "PLACEMENT_LITE_QUOTA_MODEL=strict_two_level (environment)",
             status=2)


def test_the_admin_command_shows_and_changes_enforcement(sqlite_path):
    out = _run("db", "upgrade", "--db", sqlite_path)
    assert out.returncode == 0, out.stderr
    out = _run("quota", "enforcement", "--db", sqlite_path)
    assert out.returncode == 0 and "not set yet" in out.stdout
    out = _run("quota", "enforcement", "--db", sqlite_path, "--set", "on",
               "--model", "strict_two_level")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ("quota enforcement: off, model flat -> "
                                  "on, model strict_two_level")
    out = _run("quota", "enforcement", "--db", sqlite_path)
    assert out.stdout.strip() == ("quota enforcement: on, model strict_two_level "
                                  "(set by admin command)")
    # A process started without quota flags follows the deployment.
    with serve(sqlite_path) as srv:
        line = srv.wait_for_line("listening")
        assert "quota enforcement: on, model strict_two_level" in line
        status, _h, body = srv.request("GET", "/v3/limits/model")
        assert status == 200 and body["model"]["name"] == "strict_two_level"


def test_the_admin_command_on_an_unusable_database_is_one_line():
    out = _run("quota", "enforcement", "--db",
               "mysql+pymysql://root:s3cret@127.0.0.1:1/placement")
    _refused(out, "cannot use the database", status=1)
    assert "s3cret" not in out.stderr


def test_a_model_the_stored_tree_breaks_is_refused():
    with fresh_database("sqlite") as db:
        client = falcon.testing.TestClient(create_app(Settings(db=db.url), db))
        for pid, parent in (("a", None), ("b", "a"), ("c", "b")):
            project = {"id": pid, "name": pid}
            if parent:
                project["parent_id"] = parent
            made = client.simulate_post("/v3/projects", headers=ADMIN,
                                        json={"project": project})
            assert made.status_code == 201, made.text
        with pytest.raises(errors.ModelDoesNotFit, match=r"Project c is at depth 3"):
            enforce.change(db, model="strict_two_level")
        with db.read() as conn:
            assert enforce.stored(conn).model == "flat"


def test_a_model_the_stored_limits_break_is_refused():
    with fresh_database("sqlite") as db:
        client = falcon.testing.TestClient(create_app(Settings(db=db.url), db))
        svc = client.simulate_post("/v3/services", headers=ADMIN,
                                   json={"service": {"type": "placement"}}).json
        for pid, parent in (("a", None), ("b", "a")):
            project = {"id": pid, "name": pid, **({"parent_id": parent} if parent else {})}
            assert client.simulate_post("/v3/projects", headers=ADMIN,
                                        json={"project": project}).status_code == 201
        reg = client.simulate_post("/v3/registered_limits", headers=ADMIN, json={
            "registered_limits": [{"service_id": svc["service"]["id"],
                                   "resource_name": "class:VCPU",
                                   "default_limit": 10}]})
        assert reg.status_code == 201, reg.text
        # Under flat a child may have more than its parent; not under strict.
        made = client.simulate_post("/v3/limits", headers=ADMIN, json={"limits": [
            {"project_id": "a", "service_id": svc["service"]["id"],
             "resource_name": "class:VCPU", "resource_limit": 5},
            {"project_id": "b", "service_id": svc["service"]["id"],
             "resource_name": "class:VCPU", "resource_limit": 9}]})
        assert made.status_code == 201, made.text
        with pytest.raises(errors.ModelDoesNotFit, match="do not fit the "
                           "strict_two_level model"):
            enforce.change(db, model="strict_two_level")


@pytest.mark.parametrize("backend", backend_urls(), ids=backend_id)
def test_processes_starting_together_store_one_setting(backend):
    """Two first starts at once: one row, and both come up agreeing."""
    with fresh_url(backend) as url:
        from tests.servers import ready, start, stop
        both = [start(url, "--quota-enforce"), start(url, "--quota-enforce")]
        try:
            for srv in both:
                ready(srv)
                assert "quota enforcement: on, model flat" in srv.wait_for_line(
                    "listening")
        finally:
            for srv in both:
                stop(srv)
