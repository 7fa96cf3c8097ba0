"""`placement-lite db import`: an OpenStack Placement database, copied.

The source is built here with SQL, as Placement's schema (alembic head
a082b8bb98d0) defines its tables, and filled with a small but complete
ledger: a nested tree, a sharing provider in an aggregate, standard and
custom classes and traits, consumers of two projects, users and types, and
allocations. After the import every part of it is read back through our
API. The target runs on every configured backend.
"""
from __future__ import annotations

import contextlib
import hashlib
import sqlite3
from pathlib import Path

import falcon.testing
import os_resource_classes
import pytest
from sqlalchemy import func, select

from placement_lite import cli
from placement_lite.app import create_app
from placement_lite.config import Settings
from placement_lite.db import importer
from placement_lite.db import tables as t
from placement_lite.db.engine import Database
from tests.backends import fresh_url

# Placement's tables, as its models and migrations define them.
PLACEMENT_SCHEMA = """
CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY);
CREATE TABLE resource_classes (
  created_at DATETIME, updated_at DATETIME, id INTEGER NOT NULL,
  name VARCHAR(255) NOT NULL, PRIMARY KEY (id),
  CONSTRAINT uniq_resource_classes0name UNIQUE (name));
CREATE TABLE resource_providers (
  created_at DATETIME, updated_at DATETIME, id INTEGER NOT NULL,
  uuid VARCHAR(36) NOT NULL, name VARCHAR(200), generation INTEGER,
  root_provider_id INTEGER, parent_provider_id INTEGER, PRIMARY KEY (id),
  CONSTRAINT uniq_resource_providers0uuid UNIQUE (uuid),
  CONSTRAINT uniq_resource_providers0name UNIQUE (name),
  FOREIGN KEY (root_provider_id) REFERENCES resource_providers (id),
  FOREIGN KEY (parent_provider_id) REFERENCES resource_providers (id));
CREATE INDEX resource_providers_root_provider_id_idx ON resource_providers (root_provider_id);
CREATE INDEX resource_providers_parent_provider_id_idx ON resource_providers (parent_provider_id);
CREATE TABLE inventories (
  created_at DATETIME, updated_at DATETIME, id INTEGER NOT NULL,
  resource_provider_id INTEGER NOT NULL, resource_class_id INTEGER NOT NULL,
  total INTEGER NOT NULL, reserved INTEGER NOT NULL, min_unit INTEGER NOT NULL,
  max_unit INTEGER NOT NULL, step_size INTEGER NOT NULL,
  allocation_ratio FLOAT NOT NULL, PRIMARY KEY (id),
  CONSTRAINT uniq_inventories0resource_provider_resource_class
    UNIQUE (resource_provider_id, resource_class_id));
CREATE INDEX inventories_resource_class_id_idx ON inventories (resource_class_id);
CREATE TABLE allocations (
  created_at DATETIME, updated_at DATETIME, id INTEGER NOT NULL,
  resource_provider_id INTEGER NOT NULL, consumer_id VARCHAR(36) NOT NULL,
  resource_class_id INTEGER NOT NULL, used INTEGER NOT NULL, PRIMARY KEY (id));
CREATE INDEX allocations_resource_provider_class_used_idx
  ON allocations (resource_provider_id, resource_class_id, used);
CREATE INDEX allocations_resource_class_id_idx ON allocations (resource_class_id);
CREATE INDEX allocations_consumer_id_idx ON allocations (consumer_id);
CREATE TABLE traits (
  created_at DATETIME, updated_at DATETIME, id INTEGER NOT NULL,
  name VARCHAR(255) NOT NULL, PRIMARY KEY (id),
  CONSTRAINT uniq_traits0name UNIQUE (name));
CREATE TABLE resource_provider_traits (
  created_at DATETIME, updated_at DATETIME, trait_id INTEGER NOT NULL,
  resource_provider_id INTEGER NOT NULL,
  PRIMARY KEY (trait_id, resource_provider_id),
  FOREIGN KEY (resource_provider_id) REFERENCES resource_providers (id),
  FOREIGN KEY (trait_id) REFERENCES traits (id));
CREATE INDEX resource_provider_traits_resource_provider_trait_idx
  ON resource_provider_traits (resource_provider_id, trait_id);
CREATE TABLE placement_aggregates (
  created_at DATETIME, updated_at DATETIME, id INTEGER NOT NULL,
  uuid VARCHAR(36), PRIMARY KEY (id),
  CONSTRAINT uniq_placement_aggregates0uuid UNIQUE (uuid));
CREATE TABLE resource_provider_aggregates (
  created_at DATETIME, updated_at DATETIME,
  resource_provider_id INTEGER NOT NULL, aggregate_id INTEGER NOT NULL,
  PRIMARY KEY (resource_provider_id, aggregate_id));
CREATE INDEX resource_provider_aggregates_aggregate_id_idx
  ON resource_provider_aggregates (aggregate_id);
CREATE TABLE projects (
  created_at DATETIME, updated_at DATETIME, id INTEGER NOT NULL,
  external_id VARCHAR(255) NOT NULL, PRIMARY KEY (id),
  CONSTRAINT uniq_projects0external_id UNIQUE (external_id));
CREATE TABLE users (
  created_at DATETIME, updated_at DATETIME, id INTEGER NOT NULL,
  external_id VARCHAR(255) NOT NULL, PRIMARY KEY (id),
  CONSTRAINT uniq_users0external_id UNIQUE (external_id));
CREATE TABLE consumer_types (
  created_at DATETIME, updated_at DATETIME, id INTEGER NOT NULL,
  name VARCHAR(255) NOT NULL, PRIMARY KEY (id),
  CONSTRAINT uniq_consumer_types0name UNIQUE (name));
CREATE TABLE consumers (
  created_at DATETIME, updated_at DATETIME, id INTEGER NOT NULL,
  uuid VARCHAR(36) NOT NULL, project_id INTEGER NOT NULL,
  user_id INTEGER NOT NULL, generation INTEGER DEFAULT 0 NOT NULL,
  consumer_type_id INTEGER, PRIMARY KEY (id),
  CONSTRAINT uniq_consumers0uuid UNIQUE (uuid),
  CONSTRAINT consumers_consumer_type_id_fkey
    FOREIGN KEY (consumer_type_id) REFERENCES consumer_types (id));
CREATE INDEX consumers_project_id_uuid_idx ON consumers (project_id, uuid);
CREATE INDEX consumers_project_id_user_id_uuid_idx ON consumers (project_id, user_id, uuid);
CREATE INDEX consumers_consumer_type_id_idx ON consumers (consumer_type_id);
"""

TS = "2024-05-01 10:00:00"
CN1, NUMA0, NUMA1, SS, LONE = (
    "c0000000-0000-4000-8000-000000000001", "c0000000-0000-4000-8000-000000000002",
    "c0000000-0000-4000-8000-000000000003", "c0000000-0000-4000-8000-000000000004",
    "c0000000-0000-4000-8000-000000000005")
AGG = "a0000000-0000-4000-8000-00000000000a"
AGG2 = "a0000000-0000-4000-8000-00000000000b"
INST1, INST2, MIG = ("e0000000-0000-4000-8000-000000000001",
                     "e0000000-0000-4000-8000-000000000002",
                     "e0000000-0000-4000-8000-000000000003")
ORPHAN = "e0000000-0000-4000-8000-0000000000ff"


def rc(name: str) -> int:
    return os_resource_classes.STANDARDS.index(name)


def build_placement(path: Path, extra_sql: str = "") -> str:
    """A Placement 16.0 database file holding the ledger the tests check."""
    conn = sqlite3.connect(path)
    conn.executescript(PLACEMENT_SCHEMA)
    rows = {
        "alembic_version": [("a082b8bb98d0",)],
        "resource_classes": [(TS, None, rc(n), n) for n in
                             ("VCPU", "MEMORY_MB", "DISK_GB", "PCI_DEVICE")]
        + [(TS, None, 10000, "CUSTOM_GOLD"), (TS, None, 10001, "CUSTOM_UNUSED")],
        "traits": [(TS, None, 1, "HW_CPU_X86_AVX2"), (TS, None, 2, "CUSTOM_FAST"),
                   (TS, None, 3, "COMPUTE_VOLUME_MULTI_ATTACH"),
                   (TS, None, 4, "CUSTOM_LONELY")],
        # (created, updated, id, uuid, name, generation, root, parent)
        "resource_providers": [
            (TS, None, 1, CN1, "cn1", 7, 1, None),
            (TS, None, 2, NUMA0, "cn1_numa0", 3, 1, 1),
            (TS, None, 3, NUMA1, "cn1_numa1", 2, 1, 1),
            (TS, None, 4, SS, "shared storage", 5, 4, None),
            (TS, None, 5, LONE, "lone", 0, 5, None)],
        "inventories": [
            (TS, None, 1, 1, rc("MEMORY_MB"), 8192, 512, 1, 8192, 1, 1.5),
            (TS, None, 2, 2, rc("VCPU"), 8, 0, 1, 8, 1, 16.0),
            (TS, None, 3, 3, rc("VCPU"), 8, 1, 1, 4, 2, 4.0),
            (TS, None, 4, 3, 10000, 2, 0, 1, 2, 1, 1.0),
            (TS, None, 5, 4, rc("DISK_GB"), 2000, 100, 10, 1000, 10, 1.0),
            (TS, None, 6, 5, rc("PCI_DEVICE"), 4, 0, 1, 1, 1, 1.0)],
        "resource_provider_traits": [(TS, None, 1, 2), (TS, None, 2, 3),
                                     (TS, None, 3, 4), (TS, None, 1, 5)],
        "placement_aggregates": [(TS, None, 1, AGG), (TS, None, 2, AGG2)],
        "resource_provider_aggregates": [(TS, None, 1, 1), (TS, None, 4, 1),
                                         (TS, None, 5, 2)],
        "projects": [(TS, None, 1, "proj-a"), (TS, None, 2, "proj-b")],
        "users": [(TS, None, 1, "user-a"), (TS, None, 2, "user-b")],
        "consumer_types": [(TS, None, 1, "INSTANCE"), (TS, None, 2, "MIGRATION")],
        # (created, updated, id, uuid, project, user, generation, type)
        "consumers": [(TS, None, 1, INST1, 1, 1, 4, 1),
                      (TS, None, 2, INST2, 2, 2, 1, None),
                      (TS, None, 3, MIG, 1, 2, 2, 2)],
        # (created, updated, id, rp, consumer uuid, class, used)
        "allocations": [
            (TS, None, 1, 2, INST1, rc("VCPU"), 2), (TS, None, 2, 1, INST1, rc("MEMORY_MB"), 1024),
            (TS, None, 3, 4, INST1, rc("DISK_GB"), 100),
            (TS, None, 4, 3, INST2, rc("VCPU"), 4), (TS, None, 5, 3, INST2, 10000, 1),
            (TS, None, 6, 1, INST2, rc("MEMORY_MB"), 2048),
            (TS, None, 7, 2, MIG, rc("VCPU"), 1), (TS, None, 8, 5, MIG, rc("PCI_DEVICE"), 1)],
    }
    for table, values in rows.items():
        marks = ",".join("?" * len(values[0]))
        conn.executemany(f"INSERT INTO {table} VALUES ({marks})", values)
    conn.executescript(extra_sql)
    conn.commit()
    conn.close()
    return f"sqlite:///{path}"


@pytest.fixture
def source(tmp_path):
    return build_placement(tmp_path / "placement.sqlite")


@pytest.fixture
def target(backend):
    """A URL of an empty database (no schema: the import creates it)."""
    with fresh_url(backend) as url:
        yield url


def run_cli(capsys, *args):
    status = cli.main(["db", "import", *args])
    out = capsys.readouterr()
    return status, out.out, out.err


@contextlib.contextmanager
def database(url: str):
    db = Database(url)
    try:
        yield db
    finally:
        db.dispose()


@contextlib.contextmanager
def served(url: str):
    """A test client of the app over the database at `url`, and the Database."""
    with database(url) as db:
        yield falcon.testing.TestClient(create_app(Settings(db=url), db)), db


def headers(version: str = "1.39") -> dict:
    return {"X-Auth-Token": "admin", "OpenStack-API-Version": f"placement {version}"}


def put_inst1_vcpus_on_numa0(client, vcpus: int) -> None:
    """Replace INST1's allocations (generation 4, as imported)."""
    resp = client.simulate_put(
        f"/allocations/{INST1}", headers=headers("1.38"),
        json={"allocations": {NUMA0: {"resources": {"VCPU": vcpus}}},
              "project_id": "proj-a", "user_id": "user-a",
              "consumer_generation": 4, "consumer_type": "INSTANCE"})
    assert resp.status_code == 204, resp.text


def refusal_to_write(source_url: str) -> str:
    """What the importer's connection to the source says to a DELETE."""
    engine = importer.open_source(source_url)
    try:
        with engine.connect() as conn, pytest.raises(Exception) as caught:
            conn.exec_driver_sql("DELETE FROM allocations")
    finally:
        engine.dispose()
    return str(caught.value)


def call(app, method, path, body=None, version="1.39") -> str:
    """The status line of one request, straight through the WSGI app."""
    import io
    import json
    from wsgiref.util import setup_testing_defaults

    data = json.dumps(body).encode() if body is not None else b""
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path,
               "HTTP_X_AUTH_TOKEN": "admin",
               "HTTP_OPENSTACK_API_VERSION": f"placement {version}",
               "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(len(data)),
               "wsgi.input": io.BytesIO(data)}
    setup_testing_defaults(environ)
    seen = []
    b"".join(app(environ, lambda status, headers, exc=None: seen.append(status)))
    return seen[0]


def get(client, path, version="1.39"):
    resp = client.simulate_get(path, headers=headers(version))
    assert resp.status_code == 200, (path, resp.text)
    return resp.json


def summary_counts(out: str) -> dict:
    counts = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0] in importer.TARGET_TABLES:
            counts[parts[0]] = tuple(int(p) for p in parts[1:])
    return counts


def test_every_table_comes_back_through_the_api(source, target, capsys):
    status, out, err = run_cli(capsys, "--from", source, "--db", target)
    assert status == 0, err
    counts = summary_counts(out)
    assert counts["resource_providers"] == (5, 5, 0)
    assert counts["inventories"] == (6, 6, 0)
    assert counts["allocations"] == (8, 8, 0)
    assert counts["consumers"] == (3, 3, 0)
    # Standard classes already exist: only the two custom ones are new.
    assert counts["resource_classes"] == (6, 2, 0)
    assert counts["traits"] == (4, 2, 0)
    assert "written in one transaction" in out

    with served(target) as (client, _db):
        rps = {rp["uuid"]: rp for rp in get(client, "/resource_providers")["resource_providers"]}
        assert {u: (rp["name"], rp["generation"], rp["parent_provider_uuid"],
                    rp["root_provider_uuid"]) for u, rp in rps.items()} == {
            CN1: ("cn1", 7, None, CN1), NUMA0: ("cn1_numa0", 3, CN1, CN1),
            NUMA1: ("cn1_numa1", 2, CN1, CN1), SS: ("shared storage", 5, None, SS),
            LONE: ("lone", 0, None, LONE)}

        inv = get(client, f"/resource_providers/{NUMA1}/inventories")
        assert inv["resource_provider_generation"] == 2
        assert inv["inventories"] == {
            "VCPU": {"total": 8, "reserved": 1, "min_unit": 1, "max_unit": 4,
                     "step_size": 2, "allocation_ratio": 4.0},
            "CUSTOM_GOLD": {"total": 2, "reserved": 0, "min_unit": 1, "max_unit": 2,
                            "step_size": 1, "allocation_ratio": 1.0}}
        assert get(client, f"/resource_providers/{CN1}/inventories")["inventories"] == {
            "MEMORY_MB": {"total": 8192, "reserved": 512, "min_unit": 1,
                          "max_unit": 8192, "step_size": 1, "allocation_ratio": 1.5}}
        assert get(client, f"/resource_providers/{SS}/inventories")["inventories"][
            "DISK_GB"]["min_unit"] == 10

        names = {c["name"] for c in get(client, "/resource_classes")["resource_classes"]}
        assert {"CUSTOM_GOLD", "CUSTOM_UNUSED", "VCPU", "PCI_DEVICE"} <= names
        traits = set(get(client, "/traits")["traits"])
        assert {"CUSTOM_FAST", "CUSTOM_LONELY", "HW_CPU_X86_AVX2"} <= traits
        assert get(client, f"/resource_providers/{NUMA0}/traits")["traits"] == [
            "HW_CPU_X86_AVX2"]
        assert get(client, f"/resource_providers/{NUMA1}/traits")["traits"] == [
            "CUSTOM_FAST"]
        assert set(get(client, f"/resource_providers/{LONE}/traits")["traits"]) == {
            "HW_CPU_X86_AVX2"}
        assert get(client, f"/resource_providers/{SS}/traits")["traits"] == [
            "COMPUTE_VOLUME_MULTI_ATTACH"]

        for rp, aggs in ((CN1, [AGG]), (SS, [AGG]), (LONE, [AGG2]), (NUMA0, [])):
            assert get(client, f"/resource_providers/{rp}/aggregates")["aggregates"] == aggs
        assert {rp["uuid"] for rp in get(
            client, f"/resource_providers?member_of={AGG}")["resource_providers"]} == {CN1, SS}

        alloc = get(client, f"/allocations/{INST1}")
        assert alloc["consumer_generation"] == 4
        assert (alloc["project_id"], alloc["user_id"], alloc["consumer_type"]) == (
            "proj-a", "user-a", "INSTANCE")
        assert {rp: a["resources"] for rp, a in alloc["allocations"].items()} == {
            NUMA0: {"VCPU": 2}, CN1: {"MEMORY_MB": 1024}, SS: {"DISK_GB": 100}}
        alloc = get(client, f"/allocations/{INST2}")
        assert (alloc["consumer_generation"], alloc["consumer_type"]) == (1, "unknown")
        assert get(client, f"/allocations/{MIG}")["consumer_type"] == "MIGRATION"

        assert get(client, f"/resource_providers/{NUMA1}/usages")["usages"] == {
            "VCPU": 4, "CUSTOM_GOLD": 1}
        assert get(client, f"/resource_providers/{CN1}/usages")["usages"] == {
            "MEMORY_MB": 3072}
        rp_allocs = get(client, f"/resource_providers/{NUMA0}/allocations")
        assert rp_allocs["resource_provider_generation"] == 3
        assert {c: a["resources"] for c, a in rp_allocs["allocations"].items()} == {
            INST1: {"VCPU": 2}, MIG: {"VCPU": 1}}

        usages = get(client, "/usages?project_id=proj-a")["usages"]
        assert usages == {
            "INSTANCE": {"consumer_count": 1, "VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 100},
            "MIGRATION": {"consumer_count": 1, "VCPU": 1, "PCI_DEVICE": 1}}
        assert get(client, "/usages?project_id=proj-a&user_id=user-b",
                   version="1.9")["usages"] == {"VCPU": 1, "PCI_DEVICE": 1}
        assert get(client, "/usages?project_id=proj-b&consumer_type=unknown")["usages"] == {
            "unknown": {"consumer_count": 1, "VCPU": 4, "CUSTOM_GOLD": 1, "MEMORY_MB": 2048}}

        # The ledger keeps working: new rows get ids past the imported ones
        # (PostgreSQL's sequences were moved on), and generations go on
        # from the imported values.
        resp = client.simulate_post("/resource_providers", json={"name": "after"},
                                    headers=headers("1.20"))
        assert resp.status_code == 200, resp.text
        put_inst1_vcpus_on_numa0(client, 3)
        assert get(client, f"/allocations/{INST1}")["consumer_generation"] == 5
        # A body-less 201 (no Content-Type) upsets falcon's WSGI validator:
        # call the app directly.
        status = call(client.app, "POST", "/resource_classes",
                      {"name": "CUSTOM_NEW"}, version="1.7")
        assert status.startswith("201"), status
        names = {c["name"] for c in get(client, "/resource_classes")["resource_classes"]}
        assert "CUSTOM_NEW" in names


def _sha(url: str) -> str:
    return hashlib.sha256(Path(url[len("sqlite:///"):]).read_bytes()).hexdigest()


def test_the_source_is_only_read(source, target, capsys):
    before = _sha(source)
    status, _out, err = run_cli(capsys, "--from", source, "--db", target)
    assert status == 0, err
    assert _sha(source) == before


def test_the_source_is_opened_read_only(source):
    refusal = refusal_to_write(source)
    assert "readonly" in refusal.replace("-", "").replace(" ", "")


def _ledger_rows(url: str) -> dict:
    with database(url) as db, db.read() as conn:
        return {name: conn.scalar(select(func.count()).select_from(getattr(t, name)))
                for name in ("resource_providers", "inventories", "consumers",
                             "allocations", "placement_aggregates", "projects")}


def test_dry_run_reads_and_checks_but_writes_nothing(source, target, capsys):
    from placement_lite.db import migrate
    status, out, err = run_cli(capsys, "--from", source, "--db", target, "--dry-run")
    assert status == 0, err
    assert "dry run: nothing was written" in out
    assert summary_counts(out)["allocations"] == (8, 8, 0)
    assert summary_counts(out)["resource_classes"] == (6, 2, 0)
    with database(target) as db:  # not even the schema was created
        assert migrate.current_version(db.engine) is None
    # On a migrated, empty target too.
    assert cli.main(["db", "upgrade", "--db", target]) == 0
    capsys.readouterr()
    status, out, err = run_cli(capsys, "--from", source, "--db", target, "--dry-run")
    assert status == 0, err
    assert set(_ledger_rows(target).values()) == {0}


def test_a_target_with_a_ledger_is_refused_and_force_replaces_it(source, target, capsys):
    status, _out, err = run_cli(capsys, "--from", source, "--db", target)
    assert status == 0, err
    before = _ledger_rows(target)

    # A second import into the same (now full) target is refused, untouched.
    status, out, err = run_cli(capsys, "--from", source, "--db", target)
    assert status == 1
    assert "import refused: the target already holds a ledger" in err
    assert "5 resource_providers" in err and "--force" in err
    assert out == ""
    assert _ledger_rows(target) == before
    status, out, err = run_cli(capsys, "--from", source, "--db", target, "--dry-run")
    assert status == 1 and "already holds a ledger" in err

    # What force deletes: the target's own providers, consumers, custom
    # names; what it keeps: projects (the quota registry's), and quota data.
    with served(target) as (client, db):
        resp = client.simulate_post("/resource_providers", headers=headers(),
                                    json={"name": "made-here"})
        assert resp.status_code == 200, resp.text
        made_here = resp.json["uuid"]
        assert call(client.app, "PUT", "/traits/CUSTOM_MADE_HERE").startswith("201")
        with db.write() as conn:
            conn.execute(t.projects.insert().values(external_id="quota-only",
                                                    name="registered"))

    status, out, err = run_cli(capsys, "--from", source, "--db", target, "--force")
    assert status == 0, err
    assert "deleted what the target held first (--force): 6 resource_providers" in out
    with served(target) as (client, db):
        uuids = {rp["uuid"] for rp in get(client, "/resource_providers")["resource_providers"]}
        assert uuids == {CN1, NUMA0, NUMA1, SS, LONE}
        assert made_here not in uuids
        traits = set(get(client, "/traits")["traits"])
        assert "CUSTOM_MADE_HERE" not in traits and "CUSTOM_FAST" in traits
        assert get(client, f"/allocations/{INST1}")["consumer_generation"] == 4
        with db.read() as conn:
            assert conn.scalar(select(t.projects.c.name).where(
                t.projects.c.external_id == "quota-only")) == "registered"


def test_rows_that_cannot_be_mapped_are_reported_and_left_out(tmp_path, target, capsys):
    source = build_placement(tmp_path / "drifted.sqlite", f"""
        -- an allocation against a class its provider has no inventory of
        INSERT INTO allocations VALUES ('{TS}', NULL, 9, 4, '{INST2}', {rc('VCPU')}, 1);
        -- an allocation whose consumer has no row
        INSERT INTO allocations VALUES ('{TS}', NULL, 10, 2, '{ORPHAN}', {rc('VCPU')}, 1);
        -- inventory of a provider that does not exist
        INSERT INTO inventories VALUES ('{TS}', NULL, 7, 99, {rc('VCPU')}, 4, 0, 1, 4, 1, 1.0);
        -- membership of an aggregate that does not exist
        INSERT INTO resource_provider_aggregates VALUES ('{TS}', NULL, 2, 77);
        -- a provider whose name is NULL
        INSERT INTO resource_providers VALUES ('{TS}', NULL, 6,
            'c0000000-0000-4000-8000-000000000006', NULL, 1, 6, NULL);
    """)
    status, out, err = run_cli(capsys, "--from", source, "--db", target)
    assert status == 0, err
    assert "not imported (4 rows):" in out
    assert ("allocations id=9 consumer=" + INST2 + " provider id=4: its provider "
            "has no VCPU inventory (an allocation against a class with no inventory)") in out
    assert ("allocations id=10 consumer=" + ORPHAN) in out
    assert "its consumer has no row in consumers" in out
    assert "inventories id=7: resource provider id=99 does not exist" in out
    assert ("resource_provider_aggregates provider id=2 aggregate id=77: aggregate "
            "id=77 was not imported or does not exist") in out
    assert "changed on the way in (1 rows):" in out
    assert "name was empty; imported with the name c0000000-0000-4000-8000-000000000006" in out
    counts = summary_counts(out)
    assert counts["allocations"] == (10, 8, 2)
    assert counts["inventories"] == (7, 6, 1)

    with served(target) as (client, _db):
        assert get(client, f"/resource_providers/{SS}/usages")["usages"] == {"DISK_GB": 100}
        assert get(client, "/resource_providers/c0000000-0000-4000-8000-000000000006"
                   )["name"] == "c0000000-0000-4000-8000-000000000006"


def test_a_consumer_left_without_allocations_is_reported(tmp_path, target, capsys):
    source = build_placement(tmp_path / "empty-consumer.sqlite", f"""
        INSERT INTO consumers VALUES ('{TS}', NULL, 4, '{ORPHAN}', 1, 1, 1, NULL);
    """)
    status, out, err = run_cli(capsys, "--from", source, "--db", target)
    assert status == 0, err
    assert f"consumers id=4 uuid={ORPHAN}: it has no allocations" in out
    assert summary_counts(out)["consumers"] == (4, 3, 1)


def test_a_database_that_is_not_placement_16_is_refused(tmp_path, target, capsys):
    old = build_placement(tmp_path / "old.sqlite",
                          "UPDATE alembic_version SET version_num = 'b4ed3a175331';")
    status, out, err = run_cli(capsys, "--from", old, "--db", target)
    assert status == 1
    assert "schema revision is b4ed3a175331" in err
    assert "placement-manage db sync" in err

    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).executescript("CREATE TABLE x (id INTEGER);")
    status, out, err = run_cli(capsys, "--from", f"sqlite:///{other}", "--db", target)
    assert status == 1 and "not an OpenStack Placement database" in err

    status, out, err = run_cli(capsys, "--from", f"sqlite:///{tmp_path}/missing.sqlite",
                               "--db", target)
    assert status == 1 and "no such file" in err


def test_compare_finds_no_difference_after_an_import_and_names_each_change(
        source, target, capsys):
    status, _out, err = run_cli(capsys, "--from", source, "--db", target)
    assert status == 0, err
    status = cli.main(["db", "compare", "--from", source, "--db", target])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "5 resource providers" in out and "8 allocations" in out
    assert "no differences" in out

    # A write to placement-lite after the import: compare names it.
    with served(target) as (client, _db):
        put_inst1_vcpus_on_numa0(client, 1)
    status = cli.main(["db", "compare", "--from", source, "--db", target])
    out = capsys.readouterr().out
    assert status == 1
    assert (f"consumers: {INST1}: Placement has ('proj-a', 'user-a', 'INSTANCE', 4), "
            "placement-lite has ('proj-a', 'user-a', 'INSTANCE', 5)") in out
    assert f"allocations: {INST1}/{NUMA0}/VCPU: Placement has 2, placement-lite has 1" in out
    assert f"allocations: {INST1}/{SS}/DISK_GB is in Placement only" in out


def test_compare_leaves_out_what_the_import_could_not_map(tmp_path, target, capsys):
    source = build_placement(tmp_path / "drifted.sqlite", f"""
        INSERT INTO allocations VALUES ('{TS}', NULL, 9, 4, '{INST2}', {rc('VCPU')}, 1);
    """)
    assert run_cli(capsys, "--from", source, "--db", target)[0] == 0
    status = cli.main(["db", "compare", "--from", source, "--db", target])
    assert status == 0, capsys.readouterr().out


def _build_on_server(url: str) -> None:
    """The same Placement database as build_placement, on a MariaDB/MySQL or
    PostgreSQL server, through SQLAlchemy."""
    from sqlalchemy import create_engine, text

    scratch = Path(__import__("tempfile").mkdtemp()) / "copy.sqlite"
    build_placement(scratch)
    copy = sqlite3.connect(scratch)
    engine = create_engine(url)
    schema = PLACEMENT_SCHEMA
    if engine.dialect.name == "postgresql":
        schema = schema.replace("DATETIME", "TIMESTAMP")
    try:
        with engine.begin() as conn:
            for statement in schema.split(";"):
                if statement.strip():
                    conn.execute(text(statement))
            for (table,) in copy.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table'"):
                cursor = copy.execute(f"SELECT * FROM {table}")
                columns = [d[0] for d in cursor.description]
                rows = [dict(zip(columns, row)) for row in cursor]
                if rows:
                    conn.execute(text(
                        f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
                        f"({', '.join(':' + c for c in columns)})"), rows)
    finally:
        engine.dispose()
        copy.close()


def test_a_placement_database_on_a_server_is_read_without_writing(backend, capsys):
    if backend == "sqlite":
        pytest.skip("the SQLite source is what every other test reads")
    with fresh_url(backend) as source, fresh_url("sqlite") as target:
        _build_on_server(source)
        assert "read" in refusal_to_write(source).lower()
        status, out, err = run_cli(capsys, "--from", source, "--db", target)
        assert status == 0, err
        counts = summary_counts(out)
        assert counts["allocations"] == (8, 8, 0)
        assert counts["resource_providers"] == (5, 5, 0)
        assert cli.main(["db", "compare", "--from", source, "--db", target]) == 0
        assert "no differences" in capsys.readouterr().out


def test_the_schema_before_placement_2023_1_index_drop_imports_too(tmp_path, target, capsys):
    # 422ece571366 (consumer types) is Xena's to Zed's head; 2023.1 on only
    # dropped redundant indexes, so the tables read the same.
    source = build_placement(tmp_path / "zed.sqlite",
                             "UPDATE alembic_version SET version_num = '422ece571366';")
    status, out, err = run_cli(capsys, "--from", source, "--db", target)
    assert status == 0, err
    assert "OpenStack Placement schema 422ece571366" in out
    assert summary_counts(out)["allocations"] == (8, 8, 0)


def test_projects_already_registered_for_quota_are_matched_by_name(source, target, capsys):
    """A target with projects (the quota registry) but no ledger is not
    refused, and consumers join the registered project rows."""
    assert cli.main(["db", "upgrade", "--db", target]) == 0
    with database(target) as db, db.write() as conn:
        registered = conn.execute(t.projects.insert().values(
            external_id="proj-a", name="Project A")).inserted_primary_key[0]
    capsys.readouterr()
    status, _out, err = run_cli(capsys, "--from", source, "--db", target)
    assert status == 0, err
    with database(target) as db, db.read() as conn:
        rows = conn.execute(select(t.projects.c.id, t.projects.c.name).where(
            t.projects.c.external_id == "proj-a")).all()
        assert rows == [(registered, "Project A")]
        assert conn.scalar(select(func.count()).select_from(t.consumers).where(
            t.consumers.c.project_id == registered)) == 2
