"""placement_lite.wsgi:application, as uwsgi and mod_wsgi load it.

In-process: the module builds the app from the environment and the file
PLACEMENT_LITE_CONFIG_FILE names, migrates a fresh database on first use,
and refuses, in one line naming the setting, what `serve` refuses. Under
uwsgi (skipped when it is not installed): several processes over one
database start together, migrate it once, and a claims race through them
grants exactly the capacity there is.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import falcon.testing
import pytest

from placement_lite.db import migrate
from placement_lite.db.engine import Database
from placement_lite.server import StartupError
from tests import races
from tests.backends import backend_id, backend_urls, fresh_url

ADMIN = {"X-Auth-Token": "admin", "OpenStack-API-Version": "placement 1.39"}


@pytest.fixture
def clean_env(monkeypatch):
    """No PLACEMENT_LITE_* from the caller's shell leaks into these tests."""
    for key in list(os.environ):
        if key.startswith("PLACEMENT_LITE_") and key != "PLACEMENT_LITE_TEST_DB_URLS":
            monkeypatch.delenv(key)
    return monkeypatch


def _import_wsgi(monkeypatch):
    """Import placement_lite.wsgi afresh, as a server process would."""
    import importlib
    monkeypatch.delitem(sys.modules, "placement_lite.wsgi", raising=False)
    return importlib.import_module("placement_lite.wsgi")


def _sqlite(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'wsgi.sqlite'}"


def test_application_is_built_from_the_environment(clean_env, tmp_path):
    url = _sqlite(tmp_path)
    clean_env.setenv("PLACEMENT_LITE_DB", url)
    clean_env.setenv("PLACEMENT_LITE_INSECURE_NOAUTH2_ON_OPEN_ADDRESS", "true")
    clean_env.setenv("PLACEMENT_LITE_METRICS", "yes")
    app = _import_wsgi(clean_env).application
    # The fresh file was migrated and the standard names synced.
    db = Database(url)
    try:
        assert migrate.current_version(db.engine) == migrate.head_version()
    finally:
        db.dispose()

    client = falcon.testing.TestClient(app)
    rp = str(uuid.uuid4())
    resp = client.simulate_post("/resource_providers", headers=ADMIN,
                                json={"name": "cn1", "uuid": rp})
    assert resp.status_code == 200, resp.text
    resp = client.simulate_put(
        f"/resource_providers/{rp}/inventories", headers=ADMIN,
        json={"resource_provider_generation": 0,
              "inventories": {"VCPU": {"total": 8}}})
    assert resp.status_code == 200, resp.text
    resp = client.simulate_get(f"/resource_providers/{rp}/inventories",
                               headers=ADMIN)
    assert resp.json["inventories"]["VCPU"]["total"] == 8
    assert "x-openstack-request-id" in resp.headers
    # PLACEMENT_LITE_METRICS took effect: the route exists.
    assert client.simulate_get("/metrics").status_code == 200


def test_the_config_file_is_read_and_the_environment_wins(clean_env, tmp_path):
    wanted = tmp_path / "wanted.sqlite"
    config = tmp_path / "placement-lite.yaml"
    config.write_text(
        f"db: sqlite:///{tmp_path / 'from-file.sqlite'}\n"
        "insecure_noauth2_on_open_address: true\n"
        "metrics: true\n", encoding="utf-8")
    clean_env.setenv("PLACEMENT_LITE_CONFIG_FILE", str(config))
    clean_env.setenv("PLACEMENT_LITE_DB", f"sqlite:///{wanted}")
    client = falcon.testing.TestClient(_import_wsgi(clean_env).application)
    assert client.simulate_get("/metrics").status_code == 200  # from the file
    resp = client.simulate_post("/resource_providers", headers=ADMIN,
                                json={"name": "from-wsgi"})
    assert resp.status_code == 200, resp.text
    assert wanted.exists()  # the environment's database, not the file's
    assert not (tmp_path / "from-file.sqlite").exists()


def test_a_given_environment_mapping_is_used_instead_of_os_environ(clean_env, tmp_path):
    from placement_lite.deploy import create_application

    app = create_application({"PLACEMENT_LITE_DB": _sqlite(tmp_path),
                              "PLACEMENT_LITE_AUTH": "noauth2",
                              "PLACEMENT_LITE_INSECURE_NOAUTH2_ON_OPEN_ADDRESS": "1"},
                             configure_logging=False)
    resp = falcon.testing.TestClient(app).simulate_get("/", headers=ADMIN)
    assert resp.status_code == 200
    assert resp.json["versions"][0]["max_version"] == "1.39"


def test_noauth2_must_be_asked_for_out_loud(clean_env, tmp_path):
    from placement_lite.deploy import create_application

    with pytest.raises(StartupError) as caught:
        create_application({"PLACEMENT_LITE_DB": _sqlite(tmp_path)},
                           configure_logging=False)
    message = str(caught.value)
    assert "noauth2" in message
    assert "PLACEMENT_LITE_AUTH=keystone" in message
    assert "PLACEMENT_LITE_INSECURE_NOAUTH2_ON_OPEN_ADDRESS=true" in message
    # Refused before the database was touched.
    assert not (tmp_path / "wsgi.sqlite").exists()


def test_importing_with_unusable_settings_fails_the_import(clean_env, tmp_path):
    """What a WSGI server sees: the import raises, so it loads no app."""
    clean_env.setenv("PLACEMENT_LITE_DB", _sqlite(tmp_path))
    with pytest.raises(StartupError) as caught:
        _import_wsgi(clean_env)
    assert "noauth2" in str(caught.value)
    assert "placement_lite.wsgi" not in sys.modules


def test_a_bad_setting_is_refused_naming_its_variable(clean_env, tmp_path):
    from placement_lite.deploy import create_application

    with pytest.raises(StartupError) as caught:
        create_application({"PLACEMENT_LITE_DB": _sqlite(tmp_path),
                            "PLACEMENT_LITE_MAX_BODY_BYTES": "lots"},
                           configure_logging=False)
    assert "PLACEMENT_LITE_MAX_BODY_BYTES=lots (environment)" in str(caught.value)
    assert caught.value.status == 2


def test_an_unusable_database_is_one_line(clean_env, tmp_path):
    from placement_lite.deploy import create_application

    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory", encoding="utf-8")
    with pytest.raises(StartupError) as caught:
        create_application(
            {"PLACEMENT_LITE_DB": f"sqlite:///{blocker}/db.sqlite",
             "PLACEMENT_LITE_INSECURE_NOAUTH2_ON_OPEN_ADDRESS": "true"},
            configure_logging=False)
    message = str(caught.value)
    assert "PLACEMENT_LITE_DB=" in message and "(environment)" in message
    assert "\n" not in message


def test_a_database_in_a_missing_directory_is_refused(clean_env, tmp_path):
    from placement_lite.deploy import create_application

    url = f"sqlite:///{tmp_path}/no/such/db.sqlite"
    with pytest.raises(StartupError) as caught:
        create_application(
            {"PLACEMENT_LITE_DB": url,
             "PLACEMENT_LITE_INSECURE_NOAUTH2_ON_OPEN_ADDRESS": "true"},
            configure_logging=False)
    assert str(caught.value) == (
        f"PLACEMENT_LITE_DB={url} (environment): the directory {tmp_path}/no/such "
        "does not exist; create it first, or correct the path")
    assert caught.value.status == 2
    assert not (tmp_path / "no").exists()


def test_the_start_up_pool_is_emptied_for_servers_that_fork(clean_env, tmp_path, monkeypatch):
    """A server that loads the app and then forks must not share a pooled
    connection between processes: none is left open after start-up."""
    from placement_lite import server
    from placement_lite.deploy import create_application

    built = []
    real = server.prepare_database

    def spy(settings):
        db = real(settings)
        built.append(db)
        return db
    monkeypatch.setattr(server, "prepare_database", spy)
    create_application({"PLACEMENT_LITE_DB": _sqlite(tmp_path),
                        "PLACEMENT_LITE_INSECURE_NOAUTH2_ON_OPEN_ADDRESS": "true"},
                       configure_logging=False)
    (db,) = built
    assert db.engine.pool.checkedin() == 0
    assert db.engine.pool.checkedout() == 0


# uwsgi ---------------------------------------------------------------------

def _uwsgi() -> str | None:
    beside = Path(sys.executable).parent / "uwsgi"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("uwsgi")


UWSGI = _uwsgi()
needs_uwsgi = pytest.mark.skipif(
    UWSGI is None, reason="uwsgi is not installed (pip install uwsgi, a "
    "test-only dependency) next to this Python or on PATH")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class _Uwsgi:
    def __init__(self, db_url: str, processes: int, lazy: bool,
                 extra_env: dict | None = None):
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("PLACEMENT_LITE_")}
        env.update(PLACEMENT_LITE_DB=db_url,
                   PLACEMENT_LITE_INSECURE_NOAUTH2_ON_OPEN_ADDRESS="true",
                   PLACEMENT_LITE_DB_POOL_SIZE="4")
        env.update(extra_env or {})
        args = [UWSGI, "--master", "--need-app", "--die-on-term",
                "--http-socket", f"127.0.0.1:{self.port}",
                "--processes", str(processes), "--threads", "4",
                "--module", "placement_lite.wsgi:application",
                "--pythonpath", str(Path(__file__).resolve().parents[1])]
        if sys.prefix != sys.base_prefix:
            args += ["--home", sys.prefix]
        if lazy:
            # Every process imports the app itself: they all run the schema
            # check at once, which the database lock must serialise.
            args.append("--lazy-apps")
        self.lines: list[str] = []
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, env=env,
                                     start_new_session=True)
        self.reader = threading.Thread(target=self._pump, daemon=True)
        self.reader.start()

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def request(self, method, path, body=None, version="1.39"):
        from tests.servers import Served
        return Served(self.proc, self.base).request(method, path, body,
                                                    version=version)

    def wait_ready(self, processes: int, timeout: float = 90.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            ready = sum("WSGI app 0 (mountpoint='') ready" in line
                        for line in self.lines)
            if ready >= processes:
                return
            time.sleep(0.1)
        raise AssertionError("uwsgi did not come up:\n" + "\n".join(self.lines))

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait(timeout=10)
        self.reader.join(timeout=5)


@needs_uwsgi
@pytest.mark.parametrize("lazy", [True, False], ids=["lazy-apps", "preforked"])
@pytest.mark.parametrize("base", backend_urls(), ids=backend_id)
def test_claims_race_under_uwsgi_grants_exactly_capacity(base, lazy):
    processes = 4
    capacities = {str(uuid.uuid4()): total for total in (11, 17)}
    with fresh_url(base) as url:
        server = _Uwsgi(url, processes, lazy)
        try:
            server.wait_ready(processes if lazy else 1)
            db = Database(url)
            try:
                assert migrate.current_version(db.engine) == migrate.head_version()
            finally:
                db.dispose()
            races.make_vcpu_providers(server.request, capacities, "1.39")
            race = races.claim_until_full(server.request, capacities, "1.39")
            assert set(race.statuses) <= {204, 409}, (race.statuses,
                                                      server.lines[-20:])
            races.assert_granted_exactly_capacity(server.request, capacities,
                                                  race, "1.39")
        finally:
            server.stop()


@needs_uwsgi
def test_uwsgi_refuses_to_load_the_app_when_a_setting_is_unusable(tmp_path):
    server = _Uwsgi(_sqlite(tmp_path), 2, lazy=False,
                    extra_env={"PLACEMENT_LITE_INSECURE_NOAUTH2_ON_OPEN_ADDRESS": "false"})
    try:
        server.proc.wait(timeout=60)
    finally:
        server.stop()
    output = "\n".join(server.lines)
    assert server.proc.returncode != 0, output
    assert "placement-lite cannot start:" in output
    assert "PLACEMENT_LITE_INSECURE_NOAUTH2_ON_OPEN_ADDRESS=true" in output
    assert not (tmp_path / "wsgi.sqlite").exists()


# Placement's own configuration (issue 27) ----------------------------------

def _placement_dir(tmp_path, **kwargs) -> Path:
    from tests.deployment_conf import write_kolla
    kwargs.setdefault("auth_strategy", "keystone")
    return write_kolla(tmp_path / "etc-placement",
                       f"sqlite:///{tmp_path / 'placement.sqlite'}", **kwargs).parent


def test_the_placement_conf_is_found_in_os_placement_config_dir(clean_env, tmp_path):
    """What a container built for Placement sets, and nothing else."""
    pytest.importorskip("keystonemiddleware")
    clean_env.setenv("OS_PLACEMENT_CONFIG_DIR", str(_placement_dir(tmp_path)))
    client = falcon.testing.TestClient(_import_wsgi(clean_env).application)
    assert client.simulate_get("/").status_code == 200
    # [api] auth_strategy = keystone: a request without a token is refused.
    assert client.simulate_get("/resource_providers").status_code == 401
    db = Database(f"sqlite:///{tmp_path / 'placement.sqlite'}")
    try:
        assert migrate.current_version(db.engine) == migrate.head_version()
    finally:
        db.dispose()


def test_without_the_variable_placements_default_places_are_searched(clean_env,
                                                                   tmp_path):
    """~/.placement/placement.conf is the first of oslo.config's places for
    the project `placement` (/etc/placement/ comes after it)."""
    pytest.importorskip("keystonemiddleware")
    home = tmp_path / "home"
    (home / ".placement").mkdir(parents=True)
    conf = _placement_dir(tmp_path) / "placement.conf"
    (home / ".placement" / "placement.conf").write_text(conf.read_text())
    clean_env.delenv("OS_PLACEMENT_CONFIG_DIR", raising=False)
    clean_env.setenv("HOME", str(home))
    from placement_lite.deploy import create_application
    app = create_application(dict(os.environ), configure_logging=False)
    assert falcon.testing.TestClient(app).simulate_get("/").status_code == 200
    assert (tmp_path / "placement.sqlite").exists()


def test_a_config_dir_without_placement_conf_is_one_line(clean_env, tmp_path):
    from placement_lite.deploy import create_application

    with pytest.raises(StartupError) as caught:
        create_application({"OS_PLACEMENT_CONFIG_DIR": str(tmp_path)},
                           configure_logging=False)
    assert str(caught.value) == (
        f"OS_PLACEMENT_CONFIG_DIR={tmp_path} (environment): no such file: "
        f"{tmp_path / 'placement.conf'}; give the path of Placement's placement.conf "
        "(or of a YAML settings file)")
    assert caught.value.status == 2


def test_noauth2_in_a_placement_conf_is_still_refused_under_wsgi(clean_env, tmp_path):
    from placement_lite.deploy import create_application

    directory = _placement_dir(tmp_path, auth_strategy="noauth2")
    with pytest.raises(StartupError) as caught:
        create_application({"OS_PLACEMENT_CONFIG_DIR": str(directory)},
                           configure_logging=False)
    assert str(caught.value).startswith(
        f"[api] auth_strategy = noauth2 (in {directory / 'placement.conf'}): noauth2 "
        "trusts any caller")


@needs_uwsgi
def test_uwsgi_serves_from_os_placement_config_dir_alone(tmp_path):
    """Placement's container, with placement-lite's module in place of
    placement.wsgi.api: the only configuration is the directory."""
    pytest.importorskip("keystonemiddleware")
    port = _free_port()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PLACEMENT_LITE_", "OS_"))}
    env["OS_PLACEMENT_CONFIG_DIR"] = str(_placement_dir(tmp_path))
    args = [UWSGI, "--master", "--need-app", "--die-on-term",
            "--http-socket", f"127.0.0.1:{port}", "--processes", "2", "--threads", "2",
            "--module", "placement_lite.wsgi:application",
            "--pythonpath", str(Path(__file__).resolve().parents[1])]
    if sys.prefix != sys.base_prefix:
        args += ["--home", sys.prefix]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env, start_new_session=True)
    from tests.servers import Served
    served = Served(proc, f"http://127.0.0.1:{port}")
    reader = threading.Thread(target=lambda: served.lines.extend(
        line.rstrip("\n") for line in proc.stdout), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 90
        while not any("WSGI app 0 (mountpoint='') ready" in line for line in served.lines):
            assert proc.poll() is None and time.monotonic() < deadline, served.output
            time.sleep(0.1)
        assert served.request("GET", "/", token=None)[0] == 200
        assert served.request("GET", "/resource_providers", token=None)[0] == 401
        assert (tmp_path / "placement.sqlite").exists()
        assert "read Placement's configuration from" in served.output
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 15)
            proc.wait(timeout=30)
        reader.join(timeout=5)


def test_links_carry_the_mount_point(db):
    """Served under a path (devstack mounts Placement at /placement; nova's
    functional tests reach it at http://<uuid>/placement), Placement puts
    SCRIPT_NAME in front of every link it writes in a body, as it does in
    Location (placement.util.resource_provider_url/resource_class_url).
    Found by running nova's functional tests against placement_lite."""
    from placement_lite.app import create_app
    from placement_lite.config import Settings
    from placement_lite.ledger import resource_classes

    client = falcon.testing.TestClient(create_app(Settings(db=db.url), db))
    mounted = {"SCRIPT_NAME": "/placement"}
    rp = str(uuid.uuid4())
    created = client.simulate_post("/resource_providers", headers=ADMIN, extras=mounted,
                                   json={"name": "cn1", "uuid": rp})
    assert created.status_code == 200, created.text
    assert created.headers["location"].endswith(f"/placement/resource_providers/{rp}")
    # Written directly: wsgiref's validator in TestClient refuses the 201
    # without a body that PUT answers (as Placement's does).
    db.run_write(lambda conn: resource_classes.create(conn, "CUSTOM_GOLD"))
    bodies = [created.json,
              client.simulate_get(f"/resource_providers/{rp}", headers=ADMIN,
                                  extras=mounted).json,
              client.simulate_get("/resource_providers", headers=ADMIN,
                                  extras=mounted).json["resource_providers"][0],
              client.simulate_put(f"/resource_providers/{rp}", headers=ADMIN, extras=mounted,
                                  json={"name": "cn1-renamed"}).json,
              client.simulate_get("/resource_classes/CUSTOM_GOLD", headers=ADMIN,
                                  extras=mounted).json,
              client.simulate_get("/resource_classes", headers=ADMIN,
                                  extras=mounted).json["resource_classes"][0]]
    hrefs = [link["href"] for body in bodies for link in body["links"]]
    assert len(hrefs) == 4 * 6 + 2
    assert all(h.startswith(("/placement/resource_providers/",
                             "/placement/resource_classes/")) for h in hrefs), hrefs
    # At the root (SCRIPT_NAME empty) the links are as they always were.
    plain = client.simulate_get(f"/resource_providers/{rp}", headers=ADMIN).json
    assert plain["links"][0]["href"] == f"/resource_providers/{rp}"
