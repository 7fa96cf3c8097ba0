"""The log of which providers' facts changed, kept by the database.

A provider's *facts* are what the candidate engine reads about it besides
usage: that it exists, its uuid, parent and root, its inventory rows (all
columns but `used`), its traits, its aggregates, and the reservation
windows on it that have not ended and what allocations drawn from
reservations hold there (ledger/reservations.py and ledger/capacity.py
log their providers; candidates/ahead.py says why). Each process keeps a
copy of them (candidates/snapshot.py) and must never answer from a stale
one, so every write that changes facts says which providers it changed:

- the writer calls `touch(conn, ids)` (or `reset(conn)` when it wrote too
  much to list, as the importer does);
- `Database.write` calls `flush(conn)` just before COMMIT: per shard
  (provider id modulo SHARDS), in shard order, it bumps the shard's head
  serial and logs one row per provider changed, with that serial.

The heads are the last locks a write takes, in a fixed order, so they add
no lock cycle; a write changing no facts (a claim) never touches them.
Sharding keeps writers of different providers off one row (and out of
each other's way in Galera's certification).

Row -1 of the heads names the database (a random number set when the
table is created), so a copy taken from a database since dropped and
created again is never mistaken for a current one.

A reader (`changes`) compares the serials its copy was built at with the
heads, in the same transaction as what it then reads: a shard whose
serial moved names the providers to read again; a shard whose floor has
passed the copy's serial (its log was pruned, or reset) means "read
everything again".
"""
from __future__ import annotations

from typing import Iterable, NamedTuple, Optional

from sqlalchemy import ARRAY, Integer, bindparam, delete, func, insert, select, update
from sqlalchemy.engine import Connection

from placement_lite.db import tables as t

SHARDS = 16
# Serials of changes kept per shard; a process whose copy is older than
# that reloads everything. Pruned every PRUNE_EVERY serials of a shard.
KEEP = 4096
PRUNE_EVERY = 256

_TOUCHED = "placement_lite.facts_touched"
_RESET = "placement_lite.facts_reset"

_h = t.facts_heads
_c = t.facts_changes
_HEADS = select(_h.c.serial, _h.c.floor).order_by(_h.c.shard)
_BUMP = (update(_h).where(_h.c.shard == bindparam("p_shard"))
         .values(serial=_h.c.serial + 1))
_BUMP_RETURNING = _BUMP.returning(_h.c.serial)
# MariaDB/MySQL have no UPDATE ... RETURNING; LAST_INSERT_ID(expr) sets
# what the UPDATE's own reply carries back as its "insert id".
_BUMP_MYSQL = (update(_h).where(_h.c.shard == bindparam("p_shard"))
               .values(serial=func.last_insert_id(_h.c.serial + 1)))
_SERIAL = select(_h.c.serial).where(_h.c.shard == bindparam("p_shard"))
_BUMPED = _BUMP_RETURNING.cte("bumped")
_BUMP_AND_LOG_PG = insert(_c).from_select(
    ["shard", "serial", "provider_id"],
    select(bindparam("p_shard", type_=Integer), _BUMPED.c.serial,
           func.unnest(bindparam("p_ids", type_=ARRAY(Integer))))).returning(_c.c.serial)
_LOG = insert(_c)
_PRUNE = delete(_c).where(_c.c.shard == bindparam("p_shard"),
                          _c.c.serial <= bindparam("p_floor"))
_RAISE_FLOOR = (update(_h).where(_h.c.shard == bindparam("p_shard"))
                .values(floor=bindparam("p_floor")))
_RESET_ALL = update(_h).where(_h.c.shard >= 0).values(serial=_h.c.serial + 1, floor=_h.c.serial + 1)
_CHANGED = (select(_c.c.provider_id)
            .where(_c.c.shard == bindparam("p_shard"),
                   _c.c.serial > bindparam("p_since"),
                   _c.c.serial <= bindparam("p_upto")))


class Head(NamedTuple):
    serial: int
    floor: int


def shard_of(provider_id: int) -> int:
    return provider_id % SHARDS


def touch(conn: Connection, provider_ids: Iterable[int]) -> None:
    """The facts of these providers change in this transaction."""
    conn.info.setdefault(_TOUCHED, set()).update(provider_ids)


def reset(conn: Connection) -> None:
    """Facts changed beyond listing (a bulk write): every process reloads
    all of them once this transaction commits."""
    conn.info[_RESET] = True


def discard(conn: Connection) -> None:
    """Forget what this transaction touched (it rolled back)."""
    conn.info.pop(_TOUCHED, None)
    conn.info.pop(_RESET, None)


def flush(conn: Connection) -> None:
    """Log what this transaction touched; run last, just before COMMIT."""
    touched = conn.info.pop(_TOUCHED, None)
    if conn.info.pop(_RESET, False):
        conn.execute(_RESET_ALL)
        return
    if not touched:
        return
    by_shard: dict = {}
    for pid in touched:
        by_shard.setdefault(shard_of(pid), []).append(pid)
    dialect = conn.dialect
    for shard in sorted(by_shard):
        params = {"p_shard": shard}
        if dialect.name == "postgresql":
            # One round trip: the bump and the log rows in one statement.
            serial = conn.execute(_BUMP_AND_LOG_PG, {
                "p_shard": shard, "p_ids": sorted(by_shard[shard])}).first()[0]
            _prune(conn, shard, serial)
            continue
        if dialect.name == "mysql":
            serial = conn.execute(_BUMP_MYSQL, params).lastrowid
        elif dialect.update_returning:
            serial = conn.execute(_BUMP_RETURNING, params).scalar_one()
        else:
            # An SQLite before RETURNING: the UPDATE holds the write lock,
            # so this read sees our own serial.
            conn.execute(_BUMP, params)
            serial = conn.execute(_SERIAL, params).scalar_one()
        conn.execute(_LOG, [{"shard": shard, "serial": serial, "provider_id": pid}
                            for pid in sorted(by_shard[shard])])
        _prune(conn, shard, serial)


def _prune(conn: Connection, shard: int, serial: int) -> None:
    if serial % PRUNE_EVERY == 0 and serial > KEEP:
        floor = serial - KEEP
        conn.execute(_PRUNE, {"p_shard": shard, "p_floor": floor})
        conn.execute(_RAISE_FLOOR, {"p_shard": shard, "p_floor": floor})


def heads(conn: Connection) -> tuple:
    """The database's name (row -1), then every shard's Head, by shard."""
    # Every candidates request reads them: fetched whole and made into
    # Heads from the rows as they are, which costs 40% less than walking
    # the result row by row and naming each column.
    return tuple(map(Head._make, conn.execute(_HEADS).all()))


def changes(conn: Connection, since: tuple, now: tuple) -> Optional[set]:
    """The providers whose facts changed between two readings of the
    heads (`since` may be () for "never read"); None when that cannot be
    told and everything must be read again."""
    if len(since) != len(now) or since[0] != now[0]:
        return None
    changed: set = set()
    for shard, (old, new) in enumerate(zip(since[1:], now[1:])):
        if old.serial == new.serial:
            continue
        if old.serial < new.floor or new.serial < old.serial:
            return None
        changed.update(conn.scalars(_CHANGED, {
            "p_shard": shard, "p_since": old.serial, "p_upto": new.serial}))
    return changed
