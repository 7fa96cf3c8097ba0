"""Reservation rows for tests, written straight into the tables (as the
reservations API would keep them: the window copied onto each amount)."""
from __future__ import annotations

import uuid as uuidlib

from sqlalchemy import insert, select

from placement_lite.db import tables as t


def _external(conn, table, external_id: str) -> int:
    found = conn.scalar(select(table.c.id).where(table.c.external_id == external_id))
    if found is not None:
        return found
    return conn.execute(insert(table).values(external_id=external_id)).inserted_primary_key[0]


def reservation(conn, start: int, end: int, amounts: dict,
                project: str = "proj-r", user: str = "user-r") -> int:
    """A reservation over [start, end) holding amounts {(provider id,
    class id): amount}; its id."""
    rid = conn.execute(insert(t.reservations).values(
        uuid=str(uuidlib.uuid4()), project_id=_external(conn, t.projects, project),
        user_id=_external(conn, t.users, user), start_at=start, end_at=end,
        generation=1)).inserted_primary_key[0]
    conn.execute(insert(t.reservation_amounts), [
        {"reservation_id": rid, "resource_provider_id": rp, "resource_class_id": rc,
         "amount": amount, "start_at": start, "end_at": end}
        for (rp, rc), amount in amounts.items()])
    return rid
