"""Rows for db-level tests, written straight into the tables."""
from __future__ import annotations

import uuid as uuidlib

from sqlalchemy import insert, select, update

from placement_lite.db import facts_log
from placement_lite.db import tables as t


def provider(conn, name: str | None = None, uuid: str | None = None) -> dict:
    uuid = uuid or str(uuidlib.uuid4())
    new_id = conn.execute(insert(t.resource_providers).values(
        uuid=uuid, name=name or f"rp-{uuid}", generation=0)
    ).inserted_primary_key[0]
    conn.execute(update(t.resource_providers)
                 .where(t.resource_providers.c.id == new_id)
                 .values(root_provider_id=new_id))
    # Written around the ledger: logged as the ledger would (a no-op
    # unless `conn` is a Database.write).
    facts_log.touch(conn, (new_id,))
    return {"id": new_id, "uuid": uuid}


def class_id(conn, name: str) -> int:
    found = conn.scalar(select(t.resource_classes.c.id)
                        .where(t.resource_classes.c.name == name))
    if found is not None:
        return found
    top = conn.scalar(select(t.resource_classes.c.id)
                      .where(t.resource_classes.c.id < t.MARKER_CLASS_MIN_ID)
                      .order_by(t.resource_classes.c.id.desc()).limit(1))
    new_id = max(t.CUSTOM_CLASS_MIN_ID, (top or 0) + 1)
    conn.execute(insert(t.resource_classes).values(id=new_id, name=name))
    return new_id


def inventory(conn, rp: dict, rc: str, total: int, reserved: int = 0,
              min_unit: int = 1, max_unit: int | None = None,
              step_size: int = 1, allocation_ratio: float = 1.0) -> None:
    conn.execute(insert(t.inventories).values(
        resource_provider_id=rp["id"], resource_class_id=class_id(conn, rc),
        total=total, reserved=reserved, min_unit=min_unit,
        max_unit=total if max_unit is None else max_unit,
        step_size=step_size, allocation_ratio=allocation_ratio))
    facts_log.touch(conn, (rp["id"],))


def provider_with(conn, **inventories) -> dict:
    """A provider holding `CLASS=total` inventories."""
    rp = provider(conn)
    for rc, total in inventories.items():
        inventory(conn, rp, rc, total)
    return rp


def reservation(conn, project: str, start: int, end: int, amounts: dict,
                ident: str | None = None, user: str = "u") -> str:
    """A reservation by `project` of `amounts` ({provider id: {class:
    n}}) over [start, end), written straight into the tables (no check of
    room or quota); returns its uuid."""
    from tests import reservation_rows
    return reservation_rows.reservation(conn, start, end, amounts, project=project,
                                        user=user, uuid=ident)
