"""Check a process's copy of the facts against the database.

The copy (snapshot.Snapshot) is proved equal to the database by the
differential test (tests/test_facts_differential.py); this is the same
claim checked in production, now and then, cheaply:

- whole-table counts: providers (and the sum of their ids), inventory
  rows, trait and aggregate links, which catch a copy missing or
  blanking providers anywhere (the chunked-refresh bug did that);
- a random sample of providers read again and compared field by field
  (tree, inventory, traits, aggregates);
- the class and trait names, whole (small tables).

It only counts when the facts log's heads are the copy's both before and
after the reads: otherwise a write landed meanwhile and the comparison
says nothing (under READ COMMITTED each statement sees the newest
commits). A difference is the caller's to log, count and repair.
"""
from __future__ import annotations

import random
from typing import Optional

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from placement_lite.candidates import snapshot
from placement_lite.db import facts_log
from placement_lite.db import tables as t

SAMPLE = 200

_COUNTS = {
    "providers": select(func.count(), func.coalesce(func.sum(t.resource_providers.c.id), 0)),
    "inventory rows": select(func.count()).select_from(t.inventories),
    "trait links": select(func.count()).select_from(t.resource_provider_traits),
    "aggregate links": select(func.count()).select_from(t.resource_provider_aggregates),
}


def differences(conn: Connection, snap, sample: int = SAMPLE,
                rng: Optional[random.Random] = None) -> Optional[list]:
    """What differs between `snap` and the database in `conn`'s view, as
    lines a person reads ([] when nothing does); None when the check
    could not tell (the log moved, so the copy is not meant to match)."""
    if facts_log.heads(conn) != snap.heads:
        return None
    found: list = []
    for what, stmt in _COUNTS.items():
        theirs = tuple(int(v) for v in conn.execute(stmt).one())
        mine = snap.counts[what]
        mine = mine if isinstance(mine, tuple) else (mine,)
        if theirs != mine:
            found.append(f"{what}: the copy has {mine}, the database {theirs}")
    ids = sorted(snap.uuid)
    picked = (rng or random).sample(ids, min(sample, len(ids)))
    rows = snapshot.read_providers(conn, picked)
    for rp in picked:
        for field in ("uuid", "parent", "root", "inventory", "traits", "aggregates"):
            kept, read = getattr(snap, field).get(rp), getattr(rows, field).get(rp)
            if kept != read:
                found.append(f"provider {rp} ({snap.uuid.get(rp)}): {field} is "
                             f"{_short(kept)} in the copy, {_short(read)} in the database")
    # The names the sampled providers use (a class or trait nobody holds
    # may be missing from the copy: it names nothing there).
    traits = dict(conn.execute(snapshot.TRAIT_NAMES).all())
    classes = dict(conn.execute(snapshot.CLASS_NAMES).all())
    for rp in picked:
        for tid in snap.traits.get(rp, ()):
            if snap.trait_names.get(tid) != traits.get(tid):
                found.append(f"trait {tid} is {snap.trait_names.get(tid)!r} in the copy, "
                             f"{traits.get(tid)!r} in the database")
        for rc in snap.inventory.get(rp, ()):
            if snap.class_names.get(rc) != classes.get(rc):
                found.append(f"class {rc} is {snap.class_names.get(rc)!r} in the copy, "
                             f"{classes.get(rc)!r} in the database")
    if facts_log.heads(conn) != snap.heads:
        return None
    return found


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."
