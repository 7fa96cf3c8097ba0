"""Racing claims never oversell a provider.

Real processes (each with its own engine and connection pool) each run
several threads that claim one unit at a time on a few small providers
until every provider refuses. Afterwards, for every provider and class,
usage <= (total - reserved) * allocation_ratio; the claims granted equal
the capacity there was; no attempt ended in an unexpected error; and the
per-project usage sums equal the allocations each project was granted.
A second race claims, moves and releases consumers at random and then
finds exactly each consumer's last successful write in the ledger. The
same race through HTTP against two worker processes sees only 204s and
409s.
"""
from __future__ import annotations

import multiprocessing
import random
import threading
import uuid

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError

from placement_lite import errors
from placement_lite.db import tables as t
from placement_lite.db import usage_summary
from placement_lite.db.engine import Database
from placement_lite.ledger import allocations, usages
from placement_lite.ledger.allocations import ConsumerWrite
from tests import factories, ledger_races, races


@pytest.fixture(autouse=True)
def _kept_sums_match_the_allocations(db):
    """After every race here, what the ledger keeps summed beside the
    allocations (each inventory row's used, the project usage summary)
    is exactly what the allocation rows give."""
    yield
    with db.read() as conn:
        assert usage_summary.drift(conn) == []


PROCESSES = 2
THREADS = 4
# (total, reserved, allocation_ratio): capacities 72, 30 and 28.5 (28
# one-unit claims).
INVENTORIES = [(40, 4, 2.0), (30, 0, 1.0), (21, 2, 1.5)]
EXPECTED = (72, 30, 28)
CAPACITY = sum(EXPECTED)


def _claimer(db: Database, project: str, rp_uuids: list[str], out: dict,
             lock: threading.Lock) -> None:
    full: set[str] = set()
    rng = random.Random()
    while len(full) < len(rp_uuids):
        rp = rng.choice([u for u in rp_uuids if u not in full])
        write = ConsumerWrite(str(uuid.uuid4()), project, "user",
                              {rp: {"VCPU": 1, "MEMORY_MB": 64}},
                              expected_generation=None)
        got = ledger_races.one_write(
            lambda: db.run_write(lambda conn: allocations.replace(conn, [write])),
            errors.CapacityExceeded, out, lock)
        if got is None:
            return
        if got == "refused":
            full.add(rp)
        elif got == "granted":
            with lock:
                out["granted"].append((rp, write.consumer_uuid))


def _churner(db: Database, project: str, rp_uuids: list[str], out: dict,
             lock: threading.Lock) -> None:
    """Claim, move and release consumers this thread owns, at random; keep
    what each consumer should hold after its last successful write."""
    rng = random.Random()
    owned: dict[str, tuple[int, dict]] = {}
    for _ in range(CHURN_STEPS):
        roll = rng.random()
        if not owned or roll < 0.5:
            consumer, expected = str(uuid.uuid4()), None
        else:
            consumer = rng.choice(sorted(owned))
            expected = owned[consumer][0]
        if roll >= 0.85 and owned:
            wanted: dict = {}
        else:
            wanted = {rp: {"VCPU": rng.randint(1, 3)}
                      for rp in rng.sample(rp_uuids, rng.randint(1, 2))}
        write = ConsumerWrite(consumer, project, "user", wanted,
                              expected_generation=expected)
        got = ledger_races.one_write(
            lambda: db.run_write(lambda conn: allocations.replace(conn, [write])),
            errors.CapacityExceeded, out, lock)
        if got is None:
            return
        if got != "granted":
            continue
        if wanted:
            owned[consumer] = ((expected or 0) + 1, wanted)
        else:
            owned.pop(consumer, None)
    with lock:
        out["owned"].update(owned)


WORKERS = {"claim": _claimer, "churn": _churner}
CHURN_STEPS = 40


def _process(url: str, project: str, rp_uuids: list[str], worker: str,
             queue) -> None:
    out = {"granted": [], "unexpected": [], "gave_up": 0, "owned": {}}
    ledger_races.in_threads(url, WORKERS[worker], [(project, rp_uuids)] * THREADS,
                            out, queue, project)


def _race(db, rp_uuids: list[str], worker: str) -> dict:
    """project -> what its process's `worker`s were granted and own."""
    return dict(ledger_races.in_processes(
        _process, [(db.url, f"project-{i}", rp_uuids, worker)
                   for i in range(PROCESSES)], timeout=120))


def test_racing_processes_and_threads_never_oversell(db):
    with db.write() as conn:
        rps = []
        for total, reserved, ratio in INVENTORIES:
            rp = factories.provider(conn)
            factories.inventory(conn, rp, "VCPU", total=total, reserved=reserved,
                                allocation_ratio=ratio)
            factories.inventory(conn, rp, "MEMORY_MB", total=64 * 1024)
            rps.append(rp)
    rp_uuids = [rp["uuid"] for rp in rps]

    results = _race(db, rp_uuids, "claim")
    granted = [g for out in results.values() for g in out["granted"]]
    assert len(granted) == CAPACITY, (len(granted), results)

    with db.read() as conn:
        inv, a = t.inventories, t.allocations
        used = dict(((rp, rc), int(n)) for rp, rc, n in conn.execute(
            select(a.c.resource_provider_id, a.c.resource_class_id,
                   func.sum(a.c.used))
            .group_by(a.c.resource_provider_id, a.c.resource_class_id)))
        for row in conn.execute(select(inv)):
            limit = (row.total - row.reserved) * row.allocation_ratio
            assert used.get((row.resource_provider_id, row.resource_class_id),
                            0) <= limit
        for project, out in results.items():
            assert usages.for_project(conn, project) == (
                {"VCPU": len(out["granted"]), "MEMORY_MB": 64 * len(out["granted"])}
                if out["granted"] else {})
        per_rp = {u: len([1 for rp, _c in granted if rp == u]) for u in rp_uuids}
        for rp_uuid, expected in zip(rp_uuids, EXPECTED):
            assert usages.for_provider(conn, rp_uuid)[1]["VCPU"] == expected
            assert per_rp[rp_uuid] == expected


def test_racing_claims_moves_and_releases_leave_exactly_what_was_granted(db):
    """Processes x threads claiming, moving and releasing consumers at
    random: afterwards the ledger holds exactly the last successful write
    of every consumer (nothing half-written, no consumer without
    allocations), and no provider is over capacity."""
    with db.write() as conn:
        rps = [factories.provider_with(conn, VCPU=10) for _ in range(3)]
    rp_uuids = [rp["uuid"] for rp in rps]
    results = _race(db, rp_uuids, "churn")

    with db.read() as conn:
        stored = set(conn.scalars(select(t.consumers.c.uuid)))
        expected = {c: state for out in results.values()
                    for c, state in out["owned"].items()}
        assert stored == set(expected)
        for consumer, (generation, wanted) in expected.items():
            found, allocs, _ = allocations.for_consumer(conn, consumer)
            assert found.generation == generation
            assert {rp: a["resources"] for rp, a in allocs.items()} == wanted
        for rp in rp_uuids:
            assert usages.for_provider(conn, rp)[1]["VCPU"] <= 10
        for project, out in results.items():
            total = sum(n for _g, wanted in out["owned"].values()
                        for res in wanted.values() for n in res.values())
            assert usages.for_project(conn, project) == (
                {"VCPU": total} if total else {})


def test_racing_writers_on_one_consumer_keep_one_winner_per_generation(db):
    """Consumer generations: of writers holding the same generation, one
    wins and the others get a conflict; the consumer ends consistent."""
    with db.write() as conn:
        rp = factories.provider_with(conn, VCPU=100)
    consumer = str(uuid.uuid4())
    db.run_write(lambda conn: allocations.replace(conn, [ConsumerWrite(
        consumer, "p", "u", {rp["uuid"]: {"VCPU": 1}}, expected_generation=None)]))
    outcomes: list[str] = []
    barrier = threading.Barrier(6)

    def writer(amount):
        barrier.wait()
        try:
            db.run_write(lambda conn: allocations.replace(conn, [ConsumerWrite(
                consumer, "p", "u", {rp["uuid"]: {"VCPU": amount}},
                expected_generation=1)]))
            outcomes.append("ok")
        except errors.Conflict as exc:
            outcomes.append(exc.code)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(2, 8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes.count("ok") == 1, outcomes
    assert set(outcomes) == {"ok", "placement.concurrent_update"}
    with db.read() as conn:
        found, allocs, _ = allocations.for_consumer(conn, consumer)
        assert found.generation == 2
        assert len(allocs[rp["uuid"]]["resources"]) == 1


def test_racing_http_claims_against_two_worker_processes(db):
    """The same race through the API, served by two worker processes:
    every answer is a 204 or a 409, never a 500."""
    from tests.servers import serve

    capacities = {str(uuid.uuid4()): total for total in (12, 18)}
    with serve(db.url, "--workers", "2", "--threads", "4") as srv:
        races.make_vcpu_providers(srv.request, capacities, "1.38")
        race = races.claim_until_full(srv.request, capacities, "1.38")
        assert set(race.statuses) <= {204, 409}, race.statuses
        races.assert_granted_exactly_capacity(srv.request, capacities, race,
                                              "1.38")


@pytest.mark.parametrize("failure", [
    OperationalError("UPDATE resource_providers", {},
                     Exception("database is locked")),
    errors.ConcurrentUpdate("resource provider moved on"),
])
def test_a_writer_that_keeps_losing_gets_a_409(db, monkeypatch, failure):
    import falcon.testing

    from placement_lite.app import create_app
    from placement_lite.config import Settings

    def always_losing(fn, retries=None):
        raise failure

    # The app writes at start-up (settings it keeps in the database):
    # only the request's own write keeps losing.
    client = falcon.testing.TestClient(create_app(Settings(db=db.url), db))
    monkeypatch.setattr(db, "run_write", always_losing)
    resp = client.simulate_put(
        f"/allocations/{uuid.uuid4()}",
        headers={"X-Auth-Token": "admin", "OpenStack-API-Version": "placement 1.28"},
        json={"allocations": {str(uuid.uuid4()): {"resources": {"VCPU": 1}}},
              "project_id": "p", "user_id": "u", "consumer_generation": None})
    assert resp.status_code == 409, resp.text
    assert resp.json["errors"][0]["code"] == "placement.concurrent_update"


def test_any_write_that_keeps_losing_to_a_busy_database_gets_a_409(db, monkeypatch):
    """Not only allocations: every route that writes maps exhausted
    deadlock/busy retries to a retryable 409, never a 500."""
    import falcon.testing

    from placement_lite.app import create_app
    from placement_lite.config import Settings

    def always_busy(fn, retries=None):
        raise OperationalError("INSERT INTO traits", {},
                               Exception("database is locked"))

    client = falcon.testing.TestClient(create_app(Settings(db=db.url), db))
    monkeypatch.setattr(db, "run_write", always_busy)
    resp = client.simulate_put(
        "/traits/CUSTOM_BUSY",
        headers={"X-Auth-Token": "admin", "OpenStack-API-Version": "placement 1.23"})
    assert resp.status_code == 409, resp.text
    assert resp.json["errors"][0]["code"] == "placement.concurrent_update"


def _crash_mid_write(url: str, rp_uuid: str, consumer: str) -> None:
    import os

    db = Database(url, pool_size=1)

    def die(conn):
        # The allocations are written and the transaction is still open.
        os._exit(3)

    class DieAfterWrite:
        def before_write(self, conn, projects):
            return die

    db.run_write(lambda conn: allocations.replace(conn, [ConsumerWrite(
        consumer, "p", "u", {rp_uuid: {"VCPU": 2}})], [DieAfterWrite()]))


def test_a_process_dying_mid_write_leaves_nothing_behind(db):
    with db.write() as conn:
        rp = factories.provider_with(conn, VCPU=4)
    kept, doomed = str(uuid.uuid4()), str(uuid.uuid4())
    db.run_write(lambda conn: allocations.replace(conn, [ConsumerWrite(
        kept, "p", "u", {rp["uuid"]: {"VCPU": 1}})]))
    ctx = multiprocessing.get_context("spawn")
    proc = ctx.Process(target=_crash_mid_write, args=(db.url, rp["uuid"], doomed))
    proc.start()
    proc.join(timeout=60)
    assert proc.exitcode == 3
    with db.read() as conn:
        assert allocations.for_consumer(conn, doomed)[0] is None
        assert usages.for_provider(conn, rp["uuid"])[1] == {"VCPU": 1}
        assert conn.scalar(select(t.resource_providers.c.generation).where(
            t.resource_providers.c.id == rp["id"])) == 1
    # The dead writer's locks went with it: the next claim goes through.
    db.run_write(lambda conn: allocations.replace(conn, [ConsumerWrite(
        doomed, "p", "u", {rp["uuid"]: {"VCPU": 3}})]))
    with db.read() as conn:
        assert usages.for_provider(conn, rp["uuid"])[1] == {"VCPU": 4}


def test_an_over_used_provider_grants_exactly_the_capacity_freed(db):
    """Inventory was cut under existing allocations (10 used, capacity 5).
    Threads free the old consumers while others rewrite theirs and new
    consumers race to claim. No new claim may commit while the usage it
    joins is over the capacity (each grant reads usage and inventory in its
    own transaction, after its write); rewriting an existing claim always
    succeeds; and once everything is freed the usage is exactly the
    capacity, 5: the two old claims kept plus three new ones."""
    with db.write() as conn:
        rp = factories.provider(conn)
        factories.inventory(conn, rp, "VCPU", total=10, max_unit=10)
    old = [str(uuid.uuid4()) for _ in range(10)]
    for consumer in old:
        db.run_write(lambda conn, c=consumer: allocations.replace(
            conn, [ConsumerWrite(c, "p", "u", {rp["uuid"]: {"VCPU": 1}})]))
    with db.write() as conn:
        conn.execute(t.inventories.update().where(
            t.inventories.c.resource_provider_id == rp["id"]).values(reserved=5))
    to_free, rewriters = old[:8], old[8:]
    freed = threading.Event()
    lock = threading.Lock()
    out = {"granted": [], "over": [], "rewrites": 0, "unexpected": []}

    def snapshot(conn):
        used = conn.scalar(select(func.sum(t.allocations.c.used)).where(
            t.allocations.c.resource_provider_id == rp["id"]))
        return int(used or 0)

    def free(share):
        for consumer in share:
            db.run_write(lambda conn, c=consumer:
                         allocations.delete_for_consumer(conn, c))

    def rewrite(consumer):
        generation = 1
        for _ in range(6):
            write = ConsumerWrite(consumer, "p", "u", {rp["uuid"]: {"VCPU": 1}},
                                  expected_generation=generation)
            try:
                db.run_write(lambda conn: allocations.replace(conn, [write]))
            except Exception as exc:  # noqa: BLE001 - reported below
                with lock:
                    out["unexpected"].append(repr(exc))
                return
            generation += 1
            with lock:
                out["rewrites"] += 1

    def claim():
        refused_after_freed = 0
        while refused_after_freed < 3:
            done = freed.is_set()
            write = ConsumerWrite(str(uuid.uuid4()), "q", "u",
                                  {rp["uuid"]: {"VCPU": 1}})

            def step(conn):
                allocations.replace(conn, [write])
                return snapshot(conn)
            try:
                used = db.run_write(step)
            except errors.CapacityExceeded:
                refused_after_freed += done
                continue
            except errors.ConcurrentUpdate:
                continue
            except Exception as exc:  # noqa: BLE001 - reported below
                with lock:
                    out["unexpected"].append(repr(exc))
                return
            with lock:
                out["granted"].append(write.consumer_uuid)
                if used > 5:
                    out["over"].append(used)

    freers = [threading.Thread(target=free, args=(to_free[i::2],))
              for i in range(2)]
    others = ([threading.Thread(target=rewrite, args=(c,)) for c in rewriters]
              + [threading.Thread(target=claim) for _ in range(3)])
    for th in others + freers:
        th.start()
    for th in freers:
        th.join()
    freed.set()
    for th in others:
        th.join()
    assert out["unexpected"] == []
    assert out["over"] == []
    assert out["rewrites"] == 12
    # 2 old consumers still hold 1 each: 3 of the 5 units went to new ones.
    assert len(out["granted"]) == 3
    with db.read() as conn:
        assert snapshot(conn) == 5
