"""Sync the standard resource classes and traits into their tables.

Idempotent, and safe when several processes start at once: a name another
process inserted first is simply skipped.
"""
from __future__ import annotations

import os_resource_classes
import os_traits
from sqlalchemy import insert, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from placement_lite.db import tables as t


def _missing(conn: Connection, table, wanted: list[str]) -> list[str]:
    have = set(conn.scalars(select(table.c.name)))
    return [name for name in wanted if name not in have]


def sync(db) -> None:
    classes = list(os_resource_classes.STANDARDS)
    traits = sorted(os_traits.get_traits())
    for attempt in range(3):
        try:
            with db.write() as conn:
                rc_missing = _missing(conn, t.resource_classes, classes)
                if rc_missing:
                    conn.execute(insert(t.resource_classes), [
                        {"id": classes.index(name), "name": name}
                        for name in rc_missing])
                tr_missing = _missing(conn, t.traits, traits)
                if tr_missing:
                    conn.execute(insert(t.traits), [{"name": n} for n in tr_missing])
            return
        except IntegrityError:
            # Another process synced the same names between our read and
            # write; re-read and insert only what is still missing.
            if attempt == 2:
                raise
