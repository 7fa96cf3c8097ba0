"""Reservation rows for tests, written straight into the tables (as the
ledger stores them: the window copied onto every amount row), so what
reads reservations can be tested on its own."""
from __future__ import annotations

import uuid as uuidlib
from typing import Mapping

from sqlalchemy import insert, select

from placement_lite.db import tables as t
from tests.factories import class_id


def _external(conn, table, external_id: str) -> int:
    found = conn.scalar(select(table.c.id).where(table.c.external_id == external_id))
    if found is not None:
        return found
    return conn.execute(insert(table).values(external_id=external_id)
                        ).inserted_primary_key[0]


def _provider_id(conn, provider) -> int:
    if isinstance(provider, int):
        return provider
    return conn.scalar(select(t.resource_providers.c.id)
                       .where(t.resource_providers.c.uuid == provider))


def reservation(conn, start: int, end: int,
                amounts: Mapping[int | str, Mapping[str, int]], project: str = "p1",
                user: str = "u1", uuid: str | None = None) -> str:
    """A reservation of `amounts` ({provider id or uuid: {class: amount}})
    over [start, end) for `project` and `user` (created when new); its
    uuid."""
    uuid = uuid or str(uuidlib.uuid4())
    rid = conn.execute(insert(t.reservations).values(
        uuid=uuid, project_id=_external(conn, t.projects, project),
        user_id=_external(conn, t.users, user), start_at=start, end_at=end,
        generation=1)).inserted_primary_key[0]
    conn.execute(insert(t.reservation_amounts), [
        {"reservation_id": rid, "resource_provider_id": _provider_id(conn, rp),
         "resource_class_id": class_id(conn, rc), "amount": amount,
         "start_at": start, "end_at": end}
        for rp, classes in amounts.items() for rc, amount in classes.items()])
    return uuid


def allocate(conn, rp: dict, rc: str, used: int, project: str = "p1",
             user: str = "u1") -> str:
    """`used` of `rc` allocated on `rp` to a new consumer, through the
    ledger (no quota check); the consumer's uuid."""
    from placement_lite.ledger import allocations

    consumer = str(uuidlib.uuid4())
    allocations.replace(conn, [allocations.ConsumerWrite(
        consumer, project, user, {rp["uuid"]: {rc: used}})])
    return consumer
