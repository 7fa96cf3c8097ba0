"""Reservations for `python -m bench reservations`, bulk-loaded over a
full cloud (bench/worlds.py's `cloud-full`), and what the benchmark
reads back from the rows to judge the server's answers.

Run as a script (`python bench/reservation_world.py URL COUNT`) with the
tree under test on PYTHONPATH, as bench/worlds.py is: it loads COUNT
reservations on the cloud's compute nodes, then checks the invariant
from the rows and exits non-zero if any key breaks it.

How the reservations fit by construction: on each node, the room left
beside what is allocated, less HEADROOM (kept free for the claims and
the reservations the benchmark makes through the API), is split into
LANES equal lanes per class. A node's reservations are dealt to its
lanes, and each lane's windows follow one another without overlapping
across the year from the database's now: a window of an hour to three
weeks (log-uniform) somewhere in its slot of the year, holding at most
its lane's share. However the lanes' windows overlap each other, what
they hold together never passes the room.

The invariant, read from the rows alone (none of the ledger's code):
for every provider and class, allocated + the most reserved at any
instant from now on <= (total - reserved) * allocation_ratio, where
allocated is what the open allocations hold: one drawn from a
reservation counts inside that reservation's amount (docs/reservations.md,
"Using a reservation"), so load = (used - drawn) + reserved(t).
"""
from __future__ import annotations

import datetime as dt
import json
import math
import random
import sys
import time
from collections import defaultdict
from typing import Iterable, Iterator

from sqlalchemy import create_engine, func, insert, select

HOUR, DAY = 3600, 86400
WEEK, YEAR = 7 * DAY, 365 * DAY
LONGEST = 3 * WEEK
CLASSES = ("VCPU", "MEMORY_MB")
# Left free on every node: a claim or an API reservation takes 1 VCPU and
# 256 MB, and no node is visited more than a few times in a run.
HEADROOM = {"VCPU": 4, "MEMORY_MB": 1024}
LANES = 4
PROJECTS = 50
BATCH = 5000
Window = tuple[int, int, int]  # start, end, amount


try:
    from bench.worlds import uid
except ImportError:  # run as a script of another tree: bench/ is the path
    from worlds import uid


def iso(seconds: int) -> str:
    """An instant as the reservations API spells it."""
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ")


# ------------------------------------------------------------- reading rows
def _tables():
    from placement_lite.db import tables
    return tables


def capacities(conn, provider_ids=None) -> dict[tuple[int, int], float]:
    """(provider id, class id) -> (total - reserved) * allocation_ratio,
    of every inventory (or those of `provider_ids`)."""
    inv = _tables().inventories
    query = select(inv.c.resource_provider_id, inv.c.resource_class_id, inv.c.total,
                   inv.c.reserved, inv.c.allocation_ratio)
    if provider_ids is not None:
        query = query.where(inv.c.resource_provider_id.in_(sorted(provider_ids)))
    return {(rp, rc): (total - held) * ratio
            for rp, rc, total, held, ratio in conn.execute(query)}


def allocated(conn, provider_ids=None, drawn: bool = False) -> dict[tuple[int, int], int]:
    """(provider id, class id) -> what the open allocation rows hold
    (summed here, not read from the ledger's kept sums). A row drawn from
    a reservation (its reservation_id set) lives inside that
    reservation's amount, which counts over its window: counting it here
    too would count it twice, so it is left out, and so are the marker
    rows, which take no room. With `drawn`, every row, drawn or not."""
    a = _tables().allocations
    query = (select(a.c.resource_provider_id, a.c.resource_class_id, func.sum(a.c.used))
             .group_by(a.c.resource_provider_id, a.c.resource_class_id))
    # A tree from before draws has no such column: every row is open.
    rid = getattr(a.c, "reservation_id", None)
    if rid is not None and not drawn:
        query = query.where(rid.is_(None))
    if provider_ids is not None:
        query = query.where(a.c.resource_provider_id.in_(sorted(provider_ids)))
    return {(rp, rc): int(n) for rp, rc, n in conn.execute(query)}


def db_now(conn) -> int:
    from placement_lite.db import clock
    return clock.now(conn)


def peak(windows: Iterable[Window], start: int, end: int) -> int:
    """The most the windows hold together at any instant of [start, end),
    by a sweep over their ends (a window is [s, e): at e it is gone, so
    ends come before starts at the same instant)."""
    events = []
    for s, e, amount in windows:
        s, e = max(s, start), min(e, end)
        if s < e:
            events += [(s, 1, amount), (e, 0, -amount)]
    held = most = 0
    for _when, _kind, delta in sorted(events):
        held += delta
        most = max(most, held)
    return most


def _live(conn, now: int, until: int, where=()) -> Iterator[tuple[tuple[int, int], list]]:
    """(key, windows) for every key with a window overlapping [now,
    until), key by key (the rows come in the index's order)."""
    ra = _tables().reservation_amounts
    rows = conn.execution_options(stream_results=True, yield_per=20000).execute(
        select(ra.c.resource_provider_id, ra.c.resource_class_id, ra.c.start_at,
               ra.c.end_at, ra.c.amount)
        .where(ra.c.end_at > now, ra.c.start_at < until, *where)
        .order_by(ra.c.resource_provider_id, ra.c.resource_class_id))
    key, windows = None, []
    for rp, rc, s, e, amount in rows:
        if (rp, rc) != key:
            if windows:
                yield key, windows
            key, windows = (rp, rc), []
        windows.append((int(s), int(e), int(amount)))
    if windows:
        yield key, windows


def _on(provider_ids) -> tuple:
    """_live's condition for the windows on `provider_ids` (None: all)."""
    ra = _tables().reservation_amounts
    return () if provider_ids is None else (
        ra.c.resource_provider_id.in_(sorted(provider_ids)),)


def violations(conn, provider_ids=None) -> list[dict]:
    """Every key (of `provider_ids`, or all) where allocated + the peak
    reserved from now on passes the capacity (empty when the invariant
    holds)."""
    now = db_now(conn)
    caps, used = capacities(conn, provider_ids), allocated(conn, provider_ids)
    peaks = {key: peak(windows, now, 2 ** 62)
             for key, windows in _live(conn, now, 2 ** 62, _on(provider_ids))}
    bad = []
    for key in sorted(set(caps) | set(used) | set(peaks)):
        total = used.get(key, 0) + peaks.get(key, 0)
        if total > caps.get(key, 0) + 1e-9:
            bad.append({"provider_id": key[0], "class_id": key[1],
                        "allocated": used.get(key, 0), "reserved_peak": peaks.get(key, 0),
                        "capacity": caps.get(key, 0)})
    return bad


def free_over(conn, start: int, end: int, provider_ids=None,
              reservations: bool = True) -> dict[tuple[int, int], float]:
    """(provider id, class id) -> capacity - allocated - the most
    reserved at any instant of [start, end), for every inventory (or
    those of `provider_ids`); without `reservations`, as if none held
    anything."""
    caps, used = capacities(conn, provider_ids), allocated(conn, provider_ids)
    peaks = {key: peak(w, start, end) for key, w in _live(
        conn, start, end, _on(provider_ids))} if reservations else {}
    return {key: cap - used.get(key, 0) - peaks.get(key, 0) for key, cap in caps.items()}


def fitting(conn, start: int, end: int, wanted: dict[str, int],
            reservations: bool = True, among=None) -> set[str]:
    """The uuids of the providers where each of `wanted` (class -> amount)
    fits throughout [start, end), within the inventory's unit limits: a
    window candidates answer of single providers, counted by brute force
    (without `reservations`: beside the allocations alone). `among`: only
    those of these uuids (an unknown one fits nowhere)."""
    t = _tables()
    ids = dict(conn.execute(select(t.resource_classes.c.name, t.resource_classes.c.id)
                            .where(t.resource_classes.c.name.in_(wanted))).all())
    rps = None if among is None else set(conn.scalars(
        select(t.resource_providers.c.id)
        .where(t.resource_providers.c.uuid.in_(sorted(set(among))))))
    query = select(t.inventories.c.resource_provider_id, t.inventories.c.resource_class_id,
                   t.inventories.c.min_unit, t.inventories.c.max_unit,
                   t.inventories.c.step_size)
    if rps is not None:
        query = query.where(t.inventories.c.resource_provider_id.in_(sorted(rps)))
    units = {(rp, rc): (lo, hi, step) for rp, rc, lo, hi, step in conn.execute(query)}
    free = free_over(conn, start, end, rps, reservations)
    ok: dict[int, int] = defaultdict(int)
    for (rp, rc), room in free.items():
        for name, amount in wanted.items():
            lo, hi, step = units[(rp, rc)]
            if (rc == ids.get(name) and lo <= amount <= hi and amount % step == 0
                    and amount <= room):
                ok[rp] += 1
    good = [rp for rp, n in ok.items() if n == len(wanted)]
    rps = t.resource_providers
    return {u for (u,) in conn.execute(select(rps.c.uuid).where(rps.c.id.in_(good)))}


def held_on(conn, uuid: str, class_name: str = "VCPU") -> tuple[int, int, float]:
    """On one provider and class: (allocated, the most reserved at any
    instant from now on, capacity), from the rows."""
    t = _tables()
    rp = conn.scalar(select(t.resource_providers.c.id)
                     .where(t.resource_providers.c.uuid == uuid))
    rc = conn.scalar(select(t.resource_classes.c.id)
                     .where(t.resource_classes.c.name == class_name))
    now = db_now(conn)
    windows = [w for _key, found in _live(conn, now, 2 ** 62, (
        t.reservation_amounts.c.resource_provider_id == rp,
        t.reservation_amounts.c.resource_class_id == rc)) for w in found]
    return (allocated(conn, {rp}).get((rp, rc), 0), peak(windows, now, 2 ** 62),
            capacities(conn, {rp}).get((rp, rc), 0))


def refusals(conn, count: int, nodes: int) -> list[tuple[str, int, int, int]]:
    """(node uuid, start, end, VCPU amount) that cannot be reserved: the
    window of a reservation already on the node, asking one more VCPU
    than the reservations there leave. Nodes from a stride of the cloud's."""
    t = _tables()
    vcpu = conn.scalar(select(t.resource_classes.c.id)
                       .where(t.resource_classes.c.name == "VCPU"))
    out = []
    for k in range(count):
        node = uid(f"node-{(k * 104729 + 13) % nodes}")
        rp = conn.scalar(select(t.resource_providers.c.id)
                         .where(t.resource_providers.c.uuid == node))
        ra = t.reservation_amounts
        first = conn.execute(select(ra.c.start_at, ra.c.end_at).where(
            ra.c.resource_provider_id == rp, ra.c.resource_class_id == vcpu,
            ra.c.start_at > db_now(conn) + HOUR).order_by(ra.c.start_at).limit(1)).first()
        if first is None:
            continue
        free = free_over(conn, int(first[0]), int(first[1]), {rp})[(rp, vcpu)]
        out.append((node, int(first[0]), int(first[1]), int(free) + 1))
    return out


# -------------------------------------------------------------- generating
def nodes(conn) -> list[tuple[int, dict[str, float]]]:
    """The cloud's compute nodes (not its idle pools): (provider id,
    class -> room beside what is allocated, less HEADROOM), by id."""
    t = _tables()
    caps, used = capacities(conn), allocated(conn)
    rc = dict(conn.execute(select(t.resource_classes.c.name, t.resource_classes.c.id)
                           .where(t.resource_classes.c.name.in_(CLASSES))).all())
    ids = conn.scalars(select(t.resource_providers.c.id).where(
        t.resource_providers.c.name.like("node-%")).order_by(t.resource_providers.c.id))
    return [(rp, {name: caps.get((rp, rc[name]), 0) - used.get((rp, rc[name]), 0)
                  - HEADROOM[name] for name in CLASSES}) for rp in ids]


def plan(room: list[tuple[int, dict[str, float]]], count: int, now: int,
         seed: int = 0) -> Iterator[tuple[int, int, int, dict[str, int]]]:
    """(provider id, start, end, class -> amount): `count` reservations
    dealt evenly over the nodes, in lanes (the module's docstring)."""
    rng = random.Random(seed)
    n = len(room)
    for i, (rp, spare) in enumerate(room):
        k = count // n + (1 if i < count % n else 0)
        lanes = min(LANES, k)
        if not k:
            continue
        share = {name: int(spare[name] // lanes) for name in CLASSES}
        if min(share.values()) < 1:
            continue  # no room on this node: fewer reservations than asked
        for lane in range(lanes):
            windows = k // lanes + (1 if lane < k % lanes else 0)
            slot = YEAR // windows
            for w in range(windows):
                longest = min(LONGEST, slot)
                length = int(math.exp(rng.uniform(math.log(HOUR), math.log(longest))))
                start = now + w * slot + rng.randrange(0, slot - length + 1)
                amounts = {"VCPU": rng.randint(1, share["VCPU"]),
                           "MEMORY_MB": _megabytes(rng, share["MEMORY_MB"])}
                yield rp, start, start + length, amounts


def _megabytes(rng: random.Random, most: int) -> int:
    """An amount of memory up to `most`, in 256 MB steps where it can."""
    return rng.randint(1, most // 256) * 256 if most >= 256 else rng.randint(1, most)


def load(conn, count: int, seed: int = 0) -> int:
    """`count` reservations (fewer where nodes have no room) of PROJECTS
    projects, over the year from the database's now; how many."""
    t = _tables()
    now = db_now(conn)
    projects = [_external(conn, t.projects, uid(f"bench-res-project-{p}"))
                for p in range(PROJECTS)]
    user = _external(conn, t.users, uid("bench-res-user"))
    rc = dict(conn.execute(select(t.resource_classes.c.name, t.resource_classes.c.id)
                           .where(t.resource_classes.c.name.in_(CLASSES))).all())
    next_id = (conn.scalar(select(func.max(t.reservations.c.id))) or 0) + 1
    made, rows, amounts = 0, [], []
    stamp = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    for rp, start, end, held in plan(nodes(conn), count, now, seed):
        rid = next_id + made
        rows.append(dict(id=rid, uuid=uid(f"bench-reservation-{rid}"),
                         project_id=projects[rid % PROJECTS], user_id=user,
                         start_at=start, end_at=end, generation=1, created_at=stamp))
        amounts += [dict(reservation_id=rid, resource_provider_id=rp,
                         resource_class_id=rc[name], amount=amount, start_at=start,
                         end_at=end) for name, amount in held.items()]
        made += 1
        if len(rows) >= BATCH:
            _flush(conn, t, rows, amounts)
    _flush(conn, t, rows, amounts)
    return made


def _external(conn, table, name: str) -> int:
    found = conn.scalar(select(table.c.id).where(table.c.external_id == name))
    return found if found is not None else conn.execute(
        insert(table).values(external_id=name)).inserted_primary_key[0]


def _flush(conn, t, rows: list, amounts: list) -> None:
    if rows:
        longest = getattr(t, "reservation_longest", None)
        if longest is not None:
            # The bound the reads of a period trust (ledger/windows.py),
            # raised with the rows as the ledger's writers raise it; a
            # tree from before it has no such row.
            seconds = max(r["end_at"] - r["start_at"] for r in rows)
            conn.execute(longest.update().where(
                longest.c.id == 1, longest.c.seconds < seconds).values(seconds=seconds))
        conn.execute(insert(t.reservations), rows)
        conn.execute(insert(t.reservation_amounts), amounts)
        rows.clear()
        amounts.clear()


def _statistics(engine) -> None:
    """Fresh statistics and sequences after the bulk rows, as
    bench/worlds.py leaves its own."""
    tables = ("reservations", "reservation_amounts")
    name = engine.dialect.name
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        if name == "postgresql":
            conn.exec_driver_sql(
                "SELECT setval(pg_get_serial_sequence('reservations', 'id'), "
                "(SELECT coalesce(max(id), 0) + 1 FROM reservations), false)")
            for table in tables:
                conn.exec_driver_sql(f"VACUUM ANALYZE {table}")
        elif name in ("mysql", "mariadb"):
            for table in tables:
                conn.exec_driver_sql(f"ANALYZE TABLE {table}").all()
        else:
            conn.exec_driver_sql("ANALYZE")


def main(url: str, count: int, seed: int = 0) -> dict:
    """Load, then check the invariant from the rows: SystemExit naming
    the first keys that break it."""
    engine = create_engine(url)
    began = time.monotonic()
    with engine.begin() as conn:
        made = load(conn, count, seed)
    loaded = time.monotonic() - began
    _statistics(engine)
    with engine.connect() as conn:
        bad = violations(conn)
    engine.dispose()
    if bad:
        raise SystemExit(f"the loaded reservations break the invariant at "
                         f"{len(bad)} keys, first: {bad[:3]}")
    return {"reservations": made, "load_seconds": round(loaded, 1),
            "checked_seconds": round(time.monotonic() - began - loaded, 1)}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]),
                          int(sys.argv[3]) if len(sys.argv) > 3 else 0)))
