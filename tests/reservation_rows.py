"""Reservation rows for tests, written straight into the tables (as the
ledger stores them: the window copied onto every amount row), so what
reads reservations can be tested on its own."""
from __future__ import annotations

import uuid as uuidlib
from typing import Mapping

from sqlalchemy import insert, select, update

from placement_lite.db import tables as t
from placement_lite.ledger import consumers, windows
from tests.factories import class_id


def _provider_id(conn, provider) -> int:
    if isinstance(provider, int):
        return provider
    return conn.scalar(select(t.resource_providers.c.id)
                       .where(t.resource_providers.c.uuid == provider))


def _amount_rows(conn, amounts) -> list[tuple[int, int, int]]:
    """(provider id, class id, amount) from {provider id or uuid: {class
    name: amount}} or {(provider id, class id): amount}."""
    rows = []
    for key, held in amounts.items():
        if isinstance(key, tuple):
            rows.append((key[0], key[1], held))
            continue
        rows += [(_provider_id(conn, key), class_id(conn, rc), amount)
                 for rc, amount in held.items()]
    return rows


def reservation(conn, start: int, end: int, amounts: Mapping, project: str = "p1",
                user: str = "u1", uuid: str | None = None) -> str:
    """A reservation of `amounts` ({provider id or uuid: {class: amount}},
    or {(provider id, class id): amount}) over [start, end) for `project`
    and `user` (created when new), with no check of room or quota; its
    uuid."""
    uuid = uuid or str(uuidlib.uuid4())
    # As the ledger's writers do: the reads of a period trust this bound.
    windows.widen(conn, start, end)
    rid = conn.execute(insert(t.reservations).values(
        uuid=uuid, project_id=consumers.ensure_project(conn, project),
        user_id=consumers.ensure_user(conn, user), start_at=start, end_at=end,
        generation=1)).inserted_primary_key[0]
    conn.execute(insert(t.reservation_amounts), [
        {"reservation_id": rid, "resource_provider_id": rp,
         "resource_class_id": rc, "amount": amount,
         "start_at": start, "end_at": end}
        for rp, rc, amount in _amount_rows(conn, amounts)])
    return uuid


def move_window(conn, uuid: str, start: int, end: int) -> None:
    """Reservation `uuid`'s window set to [start, end) on its row and its
    amount rows, with no check: as time would leave it (ended, begun)."""
    rid = select(t.reservations.c.id).where(
        t.reservations.c.uuid == uuid).scalar_subquery()
    conn.execute(update(t.reservations).where(t.reservations.c.id == rid)
                 .values(start_at=start, end_at=end))
    conn.execute(update(t.reservation_amounts)
                 .where(t.reservation_amounts.c.reservation_id == rid)
                 .values(start_at=start, end_at=end))


def allocate(conn, rp: dict, rc: str, used: int, project: str = "p1",
             user: str = "u1") -> str:
    """`used` of `rc` allocated on `rp` to a new consumer, through the
    ledger (no quota check); the consumer's uuid."""
    from placement_lite.ledger import allocations

    consumer = str(uuidlib.uuid4())
    allocations.replace(conn, [allocations.ConsumerWrite(
        consumer, project, user, {rp["uuid"]: {rc: used}})])
    return consumer
