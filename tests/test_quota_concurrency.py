"""Racing claims in one project tree never overrun a limit.

Several processes, each with a few threads, claim one VCPU at a time for
random projects of one tree, each thread on a provider of its own so
that provider generations never serialise them: only the quota check's lock on
the tree's root row does. Afterwards every project and the tree are
within their limits, the tree is exactly full (no claim was refused that
should have fitted), and every granted claim is in the database. No
recheck step runs anywhere.
"""
from __future__ import annotations

import multiprocessing
import random
import threading
import uuid

import pytest
from sqlalchemy import event, func, select

from placement_lite import errors
from placement_lite.config import Settings
from placement_lite.db import tables as t
from placement_lite.db.engine import Database
from placement_lite.ledger import allocations
from placement_lite.quota import catalog, enforce, limits, projects
from tests import factories

PROCESSES = 4
THREADS = 4
CLAIMS_PER_THREAD = 8
PROVIDERS = PROCESSES * THREADS
TREE = ("A", "B", "C", "D")


def _claimer(url, model, providers, seed, results):
    db = Database(url, pool_size=THREADS)
    check = enforce.Enforcer(Settings(db=url, quota_enforce=True,
                                      quota_model=model))
    granted = []
    refused = []
    lock = threading.Lock()

    def run(thread_seed, provider):
        rnd = random.Random(thread_seed)
        for _ in range(CLAIMS_PER_THREAD):
            project = rnd.choice(TREE)
            write = allocations.ConsumerWrite(
                str(uuid.uuid4()), project, "user",
                {provider: {"VCPU": 1}})
            try:
                db.run_write(lambda conn: allocations.replace(
                    conn, [write], [check]), retries=50)
            except errors.OverLimit:
                with lock:
                    refused.append(project)
            else:
                with lock:
                    granted.append(project)

    # Each thread claims on a provider of its own: provider generations
    # never order two claims, only the quota lock does.
    threads = [threading.Thread(target=run, args=(
        seed * 100 + i, providers[seed * THREADS + i])) for i in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    db.dispose()
    results.put((granted, refused))


def _setup(db, model):
    with db.write() as conn:
        service = catalog.create_service(conn, type="placement")["id"]
        providers = [factories.provider_with(conn, VCPU=1000)["uuid"]
                     for _ in range(PROVIDERS)]
        limits.create_registered(conn, [{"service_id": service,
                                         "resource_name": "class:VCPU",
                                         "default_limit": 5}])
        depth = 2 if model == "strict_two_level" else None
        projects.create(conn, external_id="A", name="A", max_depth=depth)
        for child in TREE[1:]:
            projects.create(conn, external_id=child, name=child, parent="A",
                            max_depth=depth)
    return service, providers


def _usage(db):
    a, c, p = t.allocations, t.consumers, t.projects
    with db.read() as conn:
        rows = conn.execute(
            select(p.c.external_id, func.sum(a.c.used))
            .select_from(a.join(c, c.c.id == a.c.consumer_id)
                         .join(p, p.c.id == c.c.project_id))
            .group_by(p.c.external_id)).all()
    return {name: int(total) for name, total in rows}


def _race(db, model, providers):
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    procs = [ctx.Process(target=_claimer,
                         args=(db.url, model, providers, seed, results))
             for seed in range(PROCESSES)]
    for proc in procs:
        proc.start()
    outcomes = [results.get(timeout=300) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    granted = [p for g, _r in outcomes for p in g]
    refused = [p for _g, r in outcomes for p in r]
    assert len(granted) + len(refused) == PROCESSES * THREADS * CLAIMS_PER_THREAD
    return granted, refused


def test_strict_tree_claims_race(db):
    service, providers = _setup(db, "strict_two_level")
    with db.write() as conn:
        limits.create_limits(conn, [
            {"project_id": "A", "service_id": service,
             "resource_name": "class:VCPU", "resource_limit": 12},
            {"project_id": "B", "service_id": service,
             "resource_name": "class:VCPU", "resource_limit": 8}],
            enforce.Enforcer(Settings(quota_model="strict_two_level")).model)
    granted, refused = _race(db, "strict_two_level", providers)
    used = _usage(db)
    own = {"A": 12, "B": 8, "C": 5, "D": 5}
    for project, limit in own.items():
        assert used.get(project, 0) <= limit, (project, used)
        assert used.get(project, 0) == granted.count(project)
    # 128 attempts for a tree of 12: it fills exactly, never more.
    assert sum(used.values()) == 12, used
    assert refused


def test_flat_claims_race(db):
    _service, providers = _setup(db, "flat")
    granted, refused = _race(db, "flat", providers)
    used = _usage(db)
    for project in TREE:
        # Flat: each project on its own, at the registered default of 5.
        assert used.get(project, 0) == 5, used
        assert granted.count(project) == 5
    assert len(refused) == PROCESSES * THREADS * CLAIMS_PER_THREAD - 20


@pytest.mark.parametrize("model", ["strict_two_level"])
def test_a_lost_race_leaves_no_trace(db, model):
    """A refused claim rolls back everything it wrote, consumer included."""
    service, providers = _setup(db, model)
    check = enforce.Enforcer(Settings(quota_enforce=True,
                                      quota_model=model))
    consumer = str(uuid.uuid4())
    write = allocations.ConsumerWrite(consumer, "B", "user",
                                      {providers[0]: {"VCPU": 6}})
    with pytest.raises(errors.OverLimit):
        db.run_write(lambda conn: allocations.replace(conn, [write], [check]))
    with db.read() as conn:
        assert conn.scalar(select(func.count()).select_from(t.consumers)
                           .where(t.consumers.c.uuid == consumer)) == 0
        assert conn.scalar(select(func.count()).select_from(t.allocations)) == 0


def _most_connections(db) -> dict:
    """Watch the pool: how many connections were checked out at once."""
    seen = {"now": 0, "most": 0}
    lock = threading.Lock()

    def checkout(*_args):
        with lock:
            seen["now"] += 1
            seen["most"] = max(seen["most"], seen["now"])

    def checkin(*_args):
        with lock:
            seen["now"] -= 1

    event.listen(db.engine, "checkout", checkout)
    event.listen(db.engine, "checkin", checkin)
    return seen


@pytest.mark.parametrize("model", ["flat", "strict_two_level"])
def test_a_claim_uses_one_connection(db, model):
    """The claim check locks, reads and decides on the write's own
    connection: a pool of one serves quota-checked claims, granted and
    refused, and threads sharing it all get their answers."""
    _service, providers = _setup(db, model)
    small = Database(db.url, pool_size=1)
    seen = _most_connections(small)
    check = enforce.Enforcer(Settings(quota_enforce=True, quota_model=model))

    def claim(project, amount, provider=providers[0]):
        write = allocations.ConsumerWrite(str(uuid.uuid4()), project, "user",
                                          {provider: {"VCPU": amount}})
        small.run_write(lambda conn: allocations.replace(conn, [write], [check]),
                        retries=50)

    try:
        claim("B", 5)
        with pytest.raises(errors.OverLimit):
            claim("B", 1)
        assert seen["most"] == 1

        granted, refused = [], []

        def run(provider):
            for _ in range(2):
                try:
                    claim("C", 1, provider)
                except errors.OverLimit:
                    refused.append(provider)
                else:
                    granted.append(provider)

        threads = [threading.Thread(target=run, args=(providers[i],))
                   for i in range(1, 5)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        small.dispose()
    if model == "flat":
        assert (len(granted), len(refused)) == (5, 3)
        assert _usage(db) == {"B": 5, "C": 5}
    else:
        # B's 5 already fill the tree's 5 (A's default).
        assert (len(granted), len(refused)) == (0, 8)
        assert _usage(db) == {"B": 5}


def test_a_trees_first_lock_creates_its_row_without_a_savepoint(db):
    """On MariaDB, claims racing to create a tree's lock row can deadlock,
    and a deadlock rolls back the whole transaction, savepoint included:
    an insert tried inside a savepoint then fails as 'SAVEPOINT does not
    exist', which no retry recognises. The lock is one statement that
    creates or bumps the row, so the deadlock stays retryable."""
    with db.write() as conn:
        root = projects.create(conn, external_id="R", name="R").id
    statements = []

    def seen(_conn, _cursor, statement, *_args):
        statements.append(statement.upper())

    event.listen(db.engine, "before_cursor_execute", seen)
    try:
        for _ in range(2):
            db.run_write(lambda conn: projects.lock_trees(conn, [root]))
    finally:
        event.remove(db.engine, "before_cursor_execute", seen)
    assert not [s for s in statements if "SAVEPOINT" in s], statements
    with db.read() as conn:
        assert conn.scalar(select(t.quota_tree_locks.c.generation).where(
            t.quota_tree_locks.c.root_id == root)) == 2
