"""Each inventory row's `used` is what is allocated of it: every writer
keeps it in the transaction of its write, refused writes leave it alone,
and the migration that added it filled it from the stored allocations."""
from __future__ import annotations

import random
import uuid as uuidlib

import pytest
from sqlalchemy import text

from placement_lite import errors
from placement_lite.db import migrate, usage_summary
from placement_lite.db.engine import Database
from placement_lite.ledger import (
    allocations, capacity, inventories, providers, reshaper)
from placement_lite.ledger.allocations import ConsumerWrite
from placement_lite.ledger.reshaper import ProviderInventories
from tests import factories
from tests.backends import backend_id, backend_urls, fresh_url

CLASSES = {"VCPU": 8, "MEMORY_MB": 64, "DISK_GB": 100}


def _world(db):
    with db.write() as conn:
        root = providers.create_provider(conn, "root")
        child = providers.create_provider(conn, "child", parent_uuid=root.uuid)
        other = providers.create_provider(conn, "other")
        for rp in (root, other):
            inventories.replace_inventories(conn, rp, {
                rc: inventories.make(rc, {"total": total, "max_unit": total})
                for rc, total in CLASSES.items()}, rp.generation)
        inventories.replace_inventories(conn, child, {
            "VCPU": inventories.make("VCPU", {"total": 4})}, child.generation)
    return [root.uuid, child.uuid, other.uuid]


def _stock(db, uuid):
    with db.read() as conn:
        rp = providers.get_by_uuid(conn, uuid)
        return rp, inventories.get_inventories(conn, rp)


def _random_allocations(rnd, uuids):
    out = {}
    for uuid in rnd.sample(uuids, rnd.randint(1, 2)):
        classes = ["VCPU"] if uuid == uuids[1] else list(CLASSES)
        out[uuid] = {rc: rnd.randint(1, 5) for rc in
                     rnd.sample(classes, rnd.randint(1, len(classes)))}
    return out


def _operation(rnd, db, uuids, consumers):
    """One random write; returns a label (refusals are part of the test:
    a refused write must leave `used` as it was)."""
    kind = rnd.choice(["claim", "claim", "rewrite", "empty", "delete",
                       "pair", "inventory", "reshape"])
    if kind in ("rewrite", "empty", "delete", "pair", "reshape") and not consumers:
        kind = "claim"
    if kind == "claim":
        c = str(uuidlib.uuid4())
        db.run_write(lambda conn: allocations.replace(conn, [ConsumerWrite(
            c, "p", "u", _random_allocations(rnd, uuids))]))
        consumers.append(c)
    elif kind == "rewrite":
        c = rnd.choice(consumers)
        db.run_write(lambda conn: allocations.replace(conn, [ConsumerWrite(
            c, "p", "u", _random_allocations(rnd, uuids))]))
    elif kind == "empty":
        c = rnd.choice(consumers)
        db.run_write(lambda conn: allocations.replace(conn, [ConsumerWrite(c, "p", "u", {})]))
        consumers.remove(c)
    elif kind == "delete":
        c = rnd.choice(consumers)
        db.run_write(lambda conn: allocations.delete_for_consumer(conn, c))
        consumers.remove(c)
    elif kind == "pair":
        new = str(uuidlib.uuid4())
        old = rnd.choice(consumers)
        db.run_write(lambda conn: allocations.replace(conn, [
            ConsumerWrite(new, "q", "v", _random_allocations(rnd, uuids)),
            ConsumerWrite(old, "p", "u", _random_allocations(rnd, uuids))]))
        consumers.append(new)
    elif kind == "inventory":
        # Shrinking below usage is allowed; removing a used class is not.
        uuid = rnd.choice([uuids[0], uuids[2]])
        rp, current = _stock(db, uuid)
        wanted = {rc: inventories.make(rc, {"total": rnd.randint(1, 2 * total),
                                            "max_unit": 2 * total})
                  for rc, total in CLASSES.items() if rnd.random() < 0.9}
        db.run_write(lambda conn: inventories.replace_inventories(
            conn, rp, wanted, rp.generation))
    else:
        # Move one consumer's VCPU from the root to its child, the child
        # keeping the VCPU inventory: the reshape of a NUMA split.
        c = rnd.choice(consumers)
        root, root_inv = _stock(db, uuids[0])
        child, child_inv = _stock(db, uuids[1])
        with db.read() as conn:
            _consumer, held, _stamps = allocations.for_consumer(conn, c)
        moved = {u: dict(v["resources"]) for u, v in held.items()}
        vcpu = moved.get(uuids[0], {}).pop("VCPU", 0)
        if vcpu:
            moved.setdefault(uuids[1], {})
            moved[uuids[1]]["VCPU"] = moved[uuids[1]].get("VCPU", 0) + vcpu
        moved = {u: r for u, r in moved.items() if r}
        db.run_write(lambda conn: reshaper.reshape(conn, {
            root.uuid: ProviderInventories(root.generation, dict(root_inv)),
            child.uuid: ProviderInventories(child.generation, dict(child_inv))},
            [ConsumerWrite(c, "p", "u", moved)]))
    return kind


@pytest.mark.parametrize("seed", range(4))
def test_used_follows_every_write(db, seed):
    rnd = random.Random(seed)
    uuids = _world(db)
    consumers: list = []
    done = {"ok": 0, "refused": 0}
    for step in range(60):
        try:
            kind = _operation(rnd, db, uuids, consumers)
            done["ok"] += 1
        except (errors.CapacityExceeded, errors.InventoryInUse, errors.Conflict,
                errors.Invalid):
            kind = "refused"
            done["refused"] += 1
        with db.read() as conn:
            assert usage_summary.drift(conn) == [], (seed, step, kind)
    # The sequence exercised both sides: granted writes and refusals.
    assert done["ok"] > 10 and done["refused"] > 0, done


def test_claims_are_checked_against_the_kept_usage(db):
    """A claim fits against what the row says is used, and a rewrite of
    what a consumer holds on a full provider still passes."""
    with db.write() as conn:
        rp = factories.provider_with(conn, VCPU=4)
    first = str(uuidlib.uuid4())
    db.run_write(lambda conn: allocations.replace(conn, [ConsumerWrite(
        first, "p", "u", {rp["uuid"]: {"VCPU": 4}})]))
    with pytest.raises(errors.CapacityExceeded, match="already used 4, capacity 4"):
        db.run_write(lambda conn: allocations.replace(conn, [ConsumerWrite(
            str(uuidlib.uuid4()), "p", "u", {rp["uuid"]: {"VCPU": 1}})]))
    db.run_write(lambda conn: allocations.replace(conn, [ConsumerWrite(
        first, "p", "u", {rp["uuid"]: {"VCPU": 3}})]))
    db.run_write(lambda conn: allocations.replace(conn, [ConsumerWrite(
        str(uuidlib.uuid4()), "p", "u", {rp["uuid"]: {"VCPU": 1}})]))
    with db.read() as conn:
        assert capacity.usage(conn, [rp["id"]]) == {
            (rp["id"], factories.class_id(conn, "VCPU")): 4}
        assert usage_summary.drift(conn) == []


@pytest.mark.parametrize("backend", backend_urls(), ids=backend_id)
def test_migration_fills_used_from_stored_allocations(backend):
    with fresh_url(backend) as url:
        db = Database(url)
        try:
            migrate.upgrade(db.engine, "0005")
            with db.engine.begin() as conn:
                for sql in (
                    "INSERT INTO resource_classes (id, name) VALUES (0, 'VCPU'), (1, 'MEMORY_MB')",
                    "INSERT INTO resource_providers (id, uuid, name, generation, root_provider_id)"
                    " VALUES (1, 'a', 'a', 0, 1), (2, 'b', 'b', 0, 2)",
                    "INSERT INTO inventories (resource_provider_id, resource_class_id, total,"
                    " reserved, min_unit, max_unit, step_size, allocation_ratio) VALUES"
                    " (1, 0, 8, 0, 1, 8, 1, 1.0), (1, 1, 64, 0, 1, 64, 1, 1.0),"
                    " (2, 0, 8, 0, 1, 8, 1, 1.0)",
                    "INSERT INTO projects (id, external_id) VALUES (1, 'p')",
                    "INSERT INTO users (id, external_id) VALUES (1, 'u')",
                    "INSERT INTO consumers (id, uuid, project_id, user_id, generation)"
                    " VALUES (1, 'c1', 1, 1, 0), (2, 'c2', 1, 1, 0)",
                    "INSERT INTO allocations (resource_provider_id, consumer_id,"
                    " resource_class_id, used) VALUES (1, 1, 0, 2), (1, 2, 0, 3),"
                    " (1, 1, 1, 16)",
                ):
                    conn.execute(text(sql))
            migrate.upgrade(db.engine)
            with db.engine.connect() as conn:
                rows = conn.execute(text(
                    "SELECT resource_provider_id, resource_class_id, used"
                    " FROM inventories ORDER BY 1, 2")).all()
            assert [tuple(r) for r in rows] == [(1, 0, 5), (1, 1, 16), (2, 0, 0)]
        finally:
            db.dispose()


def test_db_check_names_a_kept_sum_that_left_the_allocations(tmp_path, capsys):
    from placement_lite import cli

    import sqlite3
    url = f"sqlite:///{tmp_path / 'check.sqlite'}"
    assert cli.main(["db", "check", "--db", url]) == 1
    assert "no database at" in capsys.readouterr().err
    sqlite3.connect(tmp_path / "check.sqlite").close()
    assert cli.main(["db", "check", "--db", url]) == 1
    assert "the schema is not current" in capsys.readouterr().err
    assert cli.main(["db", "upgrade", "--db", url]) == 0
    db = Database(url)
    try:
        with db.write() as conn:
            rp = factories.provider_with(conn, VCPU=8)
            vcpu = factories.class_id(conn, "VCPU")
        db.run_write(lambda conn: allocations.replace(conn, [ConsumerWrite(
            str(uuidlib.uuid4()), "p", "u", {rp["uuid"]: {"VCPU": 3}})]))
        capsys.readouterr()
        assert cli.main(["db", "check", "--db", url]) == 0
        assert capsys.readouterr().out.strip() == "no differences"
        with db.write() as conn:
            conn.execute(text("UPDATE inventories SET used = 2"))
        assert cli.main(["db", "check", "--db", url]) == 1
        out = capsys.readouterr().out.splitlines()
        assert out[0] == "1 differences:"
        assert out[1].strip() == (f"inventory: provider id {rp['id']}, class id "
                                  f"{vcpu}: used holds 2, the allocations give 3")
    finally:
        db.dispose()
