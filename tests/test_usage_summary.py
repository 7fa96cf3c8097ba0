"""The usage summary (db/usage_summary.py) stays exactly the sums of the
allocations table, whatever writes it: allocation writes of one or
several consumers, deletions, consumers moving to another project, user
or type, reshapes, imports, writes refused half-way; threads racing; and
migration 0005 fills it from the allocations already stored. The
answers GET /usages and quota counting give from it are checked against
sums computed here from the rows themselves.
"""
from __future__ import annotations

import random
import threading
import uuid as uuidlib
from collections import Counter, defaultdict

import os_resource_classes
import pytest
from alembic import command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, func, insert, inspect, select, text, update

from placement_lite import errors
from placement_lite.db import importer, migrate, usage_summary
from placement_lite.db import tables as t
from placement_lite.db.engine import Database
from placement_lite.ledger import allocations, providers, reshaper, usages
from placement_lite.ledger import inventories as inv_mod
from placement_lite.ledger.allocations import ConsumerWrite
from placement_lite.ledger.reshaper import ProviderInventories
from placement_lite.quota import usage as quota_usage
from tests import factories
from tests.backends import backend_id, backend_urls, fresh_url

CLASSES = ("VCPU", "MEMORY_MB", "DISK_GB")
TOTALS = {"VCPU": 64, "MEMORY_MB": 4096, "DISK_GB": 1000}
PROJECTS = ("p0", "p1", "p2")
USERS = ("u0", "u1")
TYPES = ("INSTANCE", "MIGRATION")
CONSUMERS = [str(uuidlib.UUID(int=i + 1)) for i in range(6)]
PROVIDERS = [str(uuidlib.UUID(int=1000 + i)) for i in range(3)]


def _check_summary(conn) -> None:
    assert usage_summary.stored(conn) == usage_summary.recomputed(conn)
    assert usage_summary.drift(conn) == []


def _rows(conn):
    """(project, user, type or None, {class: used}) per consumer, from
    the consumers and allocations tables alone."""
    c, a, rc = t.consumers, t.allocations, t.resource_classes
    held: dict = defaultdict(Counter)
    for cid, name, used in conn.execute(
            select(a.c.consumer_id, rc.c.name, a.c.used)
            .join(rc, rc.c.id == a.c.resource_class_id)):
        held[cid][name] += used
    out = []
    for cid, project, user, ctype in conn.execute(
            select(c.c.id, t.projects.c.external_id, t.users.c.external_id,
                   t.consumer_types.c.name)
            .join(t.projects, t.projects.c.id == c.c.project_id)
            .join(t.users, t.users.c.id == c.c.user_id)
            .outerjoin(t.consumer_types, t.consumer_types.c.id == c.c.consumer_type_id)):
        if cid in held:
            out.append((project, user, ctype, held[cid]))
    return out


def _expected_flat(rows, project, user=None):
    total: Counter = Counter()
    for p, u, _ty, used in rows:
        if p == project and user in (None, u):
            total.update(used)
    return {k: v for k, v in total.items() if v}


def _expected_by_type(rows, project, user=None, ctype=None):
    out: dict = {}
    for p, u, ty, used in rows:
        if p != project or user not in (None, u):
            continue
        key = "all" if ctype == "all" else (ty or "unknown")
        if ctype not in (None, "all") and key != ctype:
            continue
        entry = out.setdefault(key, Counter())
        entry["consumer_count"] += 1
        entry.update(used)
    return {k: {n: v for n, v in e.items() if v} for k, e in out.items()}


def _check_answers(conn) -> None:
    rows = _rows(conn)
    for project in PROJECTS + ("nobody",):
        for user in (None,) + USERS + ("nobody",):
            assert usages.for_project(conn, project, user) == _expected_flat(
                rows, project, user)
            for ctype in (None, "all", "unknown") + TYPES + ("NONE_SUCH",):
                assert usages.for_project_by_type(conn, project, user, ctype) == \
                    _expected_by_type(rows, project, user, ctype), (project, user, ctype)
    ids = dict(conn.execute(select(t.projects.c.external_id, t.projects.c.id)).all())
    names = [f"class:{c}" for c in CLASSES] + [
        f"consumers:{ty}" for ty in TYPES + ("unknown",)]
    counted = quota_usage.usage(conn, ids.values(), names, {})
    in_use = quota_usage.names_in_use(conn, ids.values())
    expected_in_use = set()
    for project, pid in ids.items():
        flat = _expected_flat(rows, project)
        by_type = _expected_by_type(rows, project)
        for cls in CLASSES:
            assert counted[f"class:{cls}"].get(pid) == flat.get(cls)
        for ty in TYPES + ("unknown",):
            assert counted[f"consumers:{ty}"].get(pid) == \
                by_type.get(ty, {}).get("consumer_count")
        expected_in_use |= {f"class:{c}" for c in flat}
        expected_in_use |= {f"consumers:{ty}" for ty in by_type}
    assert in_use == expected_in_use


# Random sequences of writes ---------------------------------------------------

owners = st.tuples(st.sampled_from((None,) + PROJECTS), st.sampled_from((None,) + USERS),
                   st.sampled_from((None,) + TYPES))
resources = st.dictionaries(st.sampled_from(CLASSES), st.integers(1, 40), min_size=1)
held = st.dictionaries(st.integers(0, len(PROVIDERS) - 1), resources, max_size=2)
consumer_writes = st.lists(st.tuples(st.integers(0, len(CONSUMERS) - 1), owners, held),
                           min_size=1, max_size=3, unique_by=lambda w: w[0])
imported = st.lists(st.tuples(st.integers(0, len(CONSUMERS) - 1),
                              st.tuples(st.sampled_from(PROJECTS), st.sampled_from(USERS),
                                        st.sampled_from((None,) + TYPES)),
                              st.dictionaries(st.integers(0, len(PROVIDERS) - 1),
                                              resources, min_size=1, max_size=2)),
                    max_size=4, unique_by=lambda w: w[0])
operations = st.lists(st.one_of(
    st.tuples(st.just("write"), consumer_writes),
    st.tuples(st.just("delete"), st.integers(0, len(CONSUMERS) - 1)),
    st.tuples(st.just("reshape"), st.integers(0, len(PROVIDERS) - 1), consumer_writes),
    st.tuples(st.just("import"), imported),
), min_size=1, max_size=12)


def _writes(spec) -> list[ConsumerWrite]:
    return [ConsumerWrite(CONSUMERS[i], project, user,
                          {PROVIDERS[rp]: dict(res) for rp, res in held_.items()},
                          consumer_type=ctype)
            for i, (project, user, ctype), held_ in spec]


def _reshape(conn, rp_index, spec):
    provider = providers.find_by_uuid(conn, PROVIDERS[rp_index])
    reshaper.reshape(conn, {provider.uuid: ProviderInventories(
        provider.generation, inv_mod.get_inventories(conn, provider))}, _writes(spec))


def _source_rows(spec) -> dict:
    """A Placement database's rows (as importer.read_source returns them)
    holding the same providers and the consumers in `spec`."""
    class_ids = {name: os_resource_classes.STANDARDS.index(name) for name in CLASSES}
    rows: dict = {name: [] for name in importer.SOURCE_TABLES}
    rows["resource_classes"] = [{"id": i, "name": n} for n, i in class_ids.items()]
    for n, rp in enumerate(PROVIDERS, start=1):
        rows["resource_providers"].append({
            "id": n, "uuid": rp, "name": f"host-{n}", "generation": 3,
            "root_provider_id": n, "parent_provider_id": None})
        for cls, total in TOTALS.items():
            rows["inventories"].append({
                "id": len(rows["inventories"]) + 1, "resource_provider_id": n,
                "resource_class_id": class_ids[cls], "total": total, "reserved": 0,
                "min_unit": 1, "max_unit": total, "step_size": 1,
                "allocation_ratio": 1.0})
    rows["projects"] = [{"id": n, "external_id": p} for n, p in enumerate(PROJECTS, 1)]
    rows["users"] = [{"id": n, "external_id": u} for n, u in enumerate(USERS, 1)]
    rows["consumer_types"] = [{"id": n, "name": ty} for n, ty in enumerate(TYPES, 1)]
    for i, (project, user, ctype), held_ in spec:
        rows["consumers"].append({
            "id": 500 + i, "uuid": CONSUMERS[i],
            "project_id": PROJECTS.index(project) + 1, "user_id": USERS.index(user) + 1,
            "consumer_type_id": None if ctype is None else TYPES.index(ctype) + 1,
            "generation": 1})
        for rp, res in held_.items():
            for cls, used in res.items():
                rows["allocations"].append({
                    "id": len(rows["allocations"]) + 1, "resource_provider_id": rp + 1,
                    "consumer_id": CONSUMERS[i], "resource_class_id": class_ids[cls],
                    "used": used})
    return rows


def _apply(db, op) -> None:
    kind = op[0]
    try:
        with db.write() as conn:
            if kind == "write":
                allocations.replace(conn, _writes(op[1]))
            elif kind == "delete":
                allocations.delete_for_consumer(conn, CONSUMERS[op[1]])
            elif kind == "reshape":
                _reshape(conn, op[1], op[2])
            else:
                # What `db import --force` does, with the source read already.
                importer.clear(conn)
                importer.write(conn, importer.plan(_source_rows(op[1])))
    except errors.DomainError:
        pass  # refused (no room, no such consumer...): nothing was written


def _reset(db) -> None:
    with db.write() as conn:
        for table in (t.allocations, t.consumers):
            conn.execute(delete(table))
        # Deleted around the ledger: what it keeps summed is recomputed.
        usage_summary.rebuild(conn)
        known = set(conn.scalars(select(t.resource_providers.c.uuid)))
        for rp in PROVIDERS:
            if rp not in known:
                created = factories.provider(conn, uuid=rp)
                for cls, total in TOTALS.items():
                    factories.inventory(conn, created, cls, total)


def test_random_writes_keep_the_summary_exact(db):
    _reset(db)

    @settings(max_examples=60 if db.backend == "sqlite" else 20, deadline=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(operations)
    def run(ops):
        _reset(db)
        for op in ops:
            _apply(db, op)
            with db.read() as conn:
                _check_summary(conn)
        with db.read() as conn:
            _check_answers(conn)

    run()


def test_a_refused_write_leaves_the_summary_as_it_was(db):
    _reset(db)
    _apply(db, ("write", [(0, ("p0", "u0", "INSTANCE"), {0: {"VCPU": 30}})]))
    with db.read() as conn:
        before = usage_summary.stored(conn)
    # The second consumer moves the first one's owner, then no room is
    # left for it: all or nothing.
    with pytest.raises(errors.CapacityExceeded):
        with db.write() as conn:
            allocations.replace(conn, _writes([
                (0, ("p1", "u1", None), {0: {"VCPU": 30}}),
                (1, ("p1", "u1", None), {0: {"VCPU": 35}})]))
    with db.read() as conn:
        assert usage_summary.stored(conn) == before
        _check_summary(conn)


def test_drift_names_what_differs(db):
    _reset(db)
    _apply(db, ("write", [(0, ("p0", "u0", None), {0: {"VCPU": 3}})]))
    s = t.usage_summary
    with db.write() as conn:
        vcpu = factories.class_id(conn, "VCPU")
        conn.execute(update(s).where(s.c.resource_class_id == vcpu)
                     .values(amount=s.c.amount + 1))
    with db.read() as conn:
        lines = usage_summary.drift(conn)
    assert len(lines) == 1
    assert lines[0].endswith(f"type id none, class id {vcpu}: the summary holds 4, "
                             "the allocations give 3")
    with db.write() as conn:
        usage_summary.rebuild(conn)
    with db.read() as conn:
        _check_summary(conn)


def test_compare_reports_a_summary_that_left_the_allocations(db, tmp_path):
    from tests.test_import import build_placement
    source = build_placement(tmp_path / "placement.sqlite")
    importer.run(source, db)
    assert importer.compare(source, db)[1] == []
    s = t.usage_summary
    with db.write() as conn:
        conn.execute(update(s).where(s.c.resource_class_id == usage_summary.CONSUMERS)
                     .values(amount=s.c.amount + 1))
    differences = importer.compare(source, db)[1]
    assert len(differences) == 3  # one per owner and type
    assert all(line.startswith("usage summary: ") and line.endswith(
        "consumers: the summary holds 2, the allocations give 1") for line in differences)


# Racing writers -----------------------------------------------------------------

def test_racing_writers_keep_the_summary_exact(db):
    """Threads write, move, retype and release a shared pool of consumers
    at once (tight providers, so some writes are refused): every row
    update is a delta under its row lock, so none is lost."""
    with db.write() as conn:
        rps = [factories.provider_with(conn, VCPU=20, MEMORY_MB=100)["uuid"]
               for _ in range(3)]
    pool = [str(uuidlib.uuid4()) for _ in range(8)]
    failures: list = []

    def worker(seed):
        rng = random.Random(seed)
        for _ in range(25):
            chosen = rng.sample(pool, rng.choice((1, 1, 2)))
            writes = [ConsumerWrite(
                c, rng.choice(PROJECTS), rng.choice(USERS),
                {} if rng.random() < 0.2 else {
                    rp: {"VCPU": rng.randint(1, 6), "MEMORY_MB": rng.randint(1, 20)}
                    for rp in rng.sample(rps, rng.choice((1, 2)))},
                consumer_type=rng.choice((None,) + TYPES)) for c in chosen]
            try:
                if rng.random() < 0.15:
                    db.run_write(lambda conn: allocations.delete_for_consumer(conn, chosen[0]))
                else:
                    db.run_write(lambda conn: allocations.replace(conn, writes))
            except errors.DomainError:
                pass
            except Exception as exc:  # noqa: BLE001 - reported below
                failures.append(repr(exc))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not failures, failures
    with db.read() as conn:
        _check_summary(conn)
        _check_answers(conn)


# Migration 0005 -------------------------------------------------------------------

def _at_revision(database: Database, revision: str, down: bool = False) -> None:
    writer = database.engine.execution_options(placement_write=True)
    with writer.begin() as conn:
        (command.downgrade if down else command.upgrade)(migrate._config(conn), revision)


@pytest.mark.parametrize("backend", backend_urls(), ids=backend_id)
def test_migration_0005_fills_the_summary_from_stored_allocations(backend):
    with fresh_url(backend) as url:
        database = Database(url)
        try:
            _at_revision(database, "0004")
            with database.engine.begin() as conn:
                rp = factories.provider(conn)
                vcpu, mem = (factories.class_id(conn, n) for n in ("VCPU", "MEMORY_MB"))
                # Inventory in the columns revision 0004 has (nothing is
                # allocated without an inventory row).
                for rc in (vcpu, mem):
                    conn.execute(text(
                        "INSERT INTO inventories (resource_provider_id, resource_class_id,"
                        " total, reserved, min_unit, max_unit, step_size, allocation_ratio)"
                        " VALUES (:rp, :rc, 100000, 0, 1, 100000, 1, 1.0)"),
                        {"rp": rp["id"], "rc": rc})
                conn.execute(insert(t.projects), [{"external_id": p} for p in ("a", "b")])
                conn.execute(insert(t.users), [{"external_id": u} for u in ("x", "y")])
                conn.execute(insert(t.consumer_types), [{"name": "INSTANCE"}])
                pid = dict(conn.execute(select(t.projects.c.external_id, t.projects.c.id)).all())
                uid = dict(conn.execute(select(t.users.c.external_id, t.users.c.id)).all())
                ty = conn.scalar(select(t.consumer_types.c.id))
                # (project, user, typed, {class: used}); the last holds
                # nothing and must not be counted.
                spec = [("a", "x", True, {vcpu: 2, mem: 512}), ("a", "x", True, {vcpu: 1}),
                        ("a", "y", False, {vcpu: 4}), ("b", "x", False, {mem: 64}),
                        ("a", "x", True, {})]
                for n, (p, u, typed, held_) in enumerate(spec * 10):
                    cid = conn.execute(insert(t.consumers).values(
                        uuid=str(uuidlib.uuid4()), project_id=pid[p], user_id=uid[u],
                        consumer_type_id=ty if typed else None, generation=1)
                    ).inserted_primary_key[0]
                    for rc, used in held_.items():
                        conn.execute(insert(t.allocations).values(
                            resource_provider_id=rp["id"], consumer_id=cid,
                            resource_class_id=rc, used=used))
            migrate.upgrade(database.engine)
            with database.read() as conn:
                _check_summary(conn)
                assert usages.for_project(conn, "a") == {"VCPU": 70, "MEMORY_MB": 5120}
                assert usages.for_project_by_type(conn, "a", "x") == {
                    "INSTANCE": {"consumer_count": 20, "VCPU": 30, "MEMORY_MB": 5120}}
                assert usages.for_project_by_type(conn, "a", consumer_type="unknown") == {
                    "unknown": {"consumer_count": 10, "VCPU": 40}}
                assert usages.for_project_by_type(conn, "b") == {
                    "unknown": {"consumer_count": 10, "MEMORY_MB": 640}}
                stored = usage_summary.stored(conn)
            _at_revision(database, "0004", down=True)
            assert "usage_summary" not in inspect(database.engine).get_table_names()
            migrate.upgrade(database.engine)
            with database.read() as conn:
                assert usage_summary.stored(conn) == stored
                assert conn.scalar(select(func.count()).select_from(t.usage_summary)) \
                    == len(stored)
        finally:
            database.dispose()
