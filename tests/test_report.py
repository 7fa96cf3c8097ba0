"""`placement-lite report`: the fleet and quota summaries in a terminal,
read from the database directly."""
from __future__ import annotations

import json
import re

import pytest

from placement_lite import cli
from tests.backends import fresh_database
from tests.test_ui import _caller, _client, build_world


@pytest.fixture
def db():
    with fresh_database("sqlite") as database:
        yield database


@pytest.fixture
def world(db):
    build_world(_caller(_client(db)))
    return db


def _run(capsys, *args):
    code = cli.main(["report", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_text_report(world, capsys):
    code, out, err = _run(capsys, "--db", world.url)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "Fleet: 5 resource providers"
    vcpu = next(line for line in lines if line.startswith("VCPU"))
    assert vcpu.split() == ["VCPU", "3", "40", "16", "24", "40.0%"]
    disk = next(line for line in lines if line.startswith("DISK_GB"))
    assert disk.split() == ["DISK_GB", "1", "900", "100", "800", "11.1%"]
    assert ("Quota: enforcement off, model strict_two_level; 2 project trees, "
            "1 over a limit") in out
    rows = {tuple(line.split()[:2]): line.split() for line in lines
            if re.match(r"(acme|beta) ", line)}
    assert rows[("acme", "acme-dev")] == ["acme", "acme-dev", "class:VCPU", "8",
                                          "override", "10", "-2", "OVER"]
    assert rows[("acme", "acme")] == ["acme", "acme", "class:VCPU", "12", "override",
                                      "4", "8"]
    assert rows[("acme", "(whole")] == ["acme", "(whole", "tree)", "class:VCPU",
                                        "12", "14", "-2", "OVER"]
    assert rows[("beta", "beta")] == ["beta", "beta", "class:VCPU", "10", "default",
                                      "2", "8"]


def test_json_report(world, capsys):
    code, out, err = _run(capsys, "--db", world.url, "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    classes = {c["resource_class"]: c for c in data["fleet"]["classes"]}
    assert classes["VCPU"] == {"resource_class": "VCPU", "providers": 3,
                               "capacity": 40, "used": 16, "free": 24}
    assert data["quota"]["model"] == "strict_two_level"
    trees = {t["root"]: t for t in data["quota"]["trees"]}
    assert trees["acme"]["over"] is True and trees["beta"]["over"] is False
    (vcpu,) = trees["acme"]["resources"]
    assert vcpu["tree"] == {"limit": 12, "usage": 14, "headroom": -2, "over": True}
    dev = next(p for p in vcpu["projects"] if p["project"] == "acme-dev")
    assert dev == {"project": "acme-dev", "limit": 8, "source": "override",
                   "usage": 10, "headroom": -2, "over": True}


def test_report_on_an_empty_database(db, capsys):
    from placement_lite.db import migrate
    migrate.upgrade(db.engine)
    code, out, _err = _run(capsys, "--db", db.url)
    assert code == 0
    assert "Fleet: 0 resource providers" in out and "(no inventory)" in out


def test_report_refuses_a_database_without_the_schema(tmp_path, capsys):
    import sqlite3
    sqlite3.connect(tmp_path / "empty.sqlite").close()
    code, _out, err = _run(capsys, "--db", f"sqlite:///{tmp_path}/empty.sqlite")
    assert code == 1
    assert "the schema is not current; run `placement-lite db upgrade` first" in err


def test_report_on_no_database_creates_none(tmp_path, capsys):
    path = tmp_path / "none.sqlite"
    code, out, err = _run(capsys, "--db", f"sqlite:///{path}")
    assert code == 1 and out == ""
    assert err == (f"placement-lite: cannot start: --db sqlite:///{path}: no "
                   f"database at {path}; create it with `placement-lite db "
                   "upgrade`, or give the path of an existing one\n")
    assert not path.exists()


def test_a_page_of_trees_costs_the_same_queries_however_many_trees(world):
    from sqlalchemy import event
    from placement_lite.config import Settings
    from placement_lite.quota import overview
    settings = Settings(db=world.url)
    statements = []
    event.listen(world.engine, "before_cursor_execute",
                 lambda *a, **k: statements.append(a[2]))
    counts = {}
    with world.read() as conn:
        for size in (1, 2):
            statements.clear()
            trees = overview.tree_page(conn, settings, limit=size)
            assert len(trees) == size
            counts[size] = len(statements)
    assert counts[1] == counts[2]
