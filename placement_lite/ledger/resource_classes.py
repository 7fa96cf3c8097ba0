"""Resource classes: the standard ones (synced at start-up) and CUSTOM_*.

Standard classes keep their os-resource-classes index as id; custom ones
get ids from CUSTOM_CLASS_MIN_ID up, so the two never collide.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Iterable, Optional

from sqlalchemy import delete, exists, func, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from placement_lite import errors
from placement_lite.db import facts_log
from placement_lite.db import tables as t
from placement_lite.ledger import lookup, marker, reserved_ahead
from placement_lite.ledger.providers import utcnow

_rc = t.resource_classes


@dataclass(frozen=True)
class ResourceClass:
    id: int
    name: str
    created_at: Optional[dt.datetime] = None
    updated_at: Optional[dt.datetime] = None

    @property
    def standard(self) -> bool:
        return self.id < t.CUSTOM_CLASS_MIN_ID

    @property
    def modified(self) -> Optional[dt.datetime]:
        return self.updated_at or self.created_at


def _row(row) -> ResourceClass:
    return ResourceClass(row.id, row.name, row.created_at, row.updated_at)


def list_classes(conn: Connection) -> list[ResourceClass]:
    return [_row(r) for r in conn.execute(select(_rc).order_by(_rc.c.id))]


def find(conn: Connection, name: str) -> Optional[ResourceClass]:
    row = conn.execute(select(_rc).where(_rc.c.name == name)).first()
    return _row(row) if row else None


def get(conn: Connection, name: str) -> ResourceClass:
    """The class named `name`; errors.ResourceClassNotFound (404) if none."""
    found = find(conn, name)
    if found is None:
        raise errors.ResourceClassNotFound(f"No such resource class {name}.")
    return found


def _unknown(missing: list[str]) -> str:
    return (f"No such resource class {', '.join(missing)}. Create custom "
            "classes with PUT /resource_classes/{name} first.")


def ids_for(conn: Connection, names: Iterable[str], explain=_unknown,
            error: type = errors.UnknownResourceClass) -> dict[str, int]:
    """name -> id for every name; UnknownResourceClass (400) naming any
    unknown ones, or `error` when given."""
    return lookup.ids_by_name(conn, _rc.c.name, _rc.c.id, names, explain,
                              error)


def names_for(conn: Connection, ids: Iterable[int]) -> dict[int, str]:
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    return dict(conn.execute(select(_rc.c.id, _rc.c.name)
                             .where(_rc.c.id.in_(wanted))).all())


def _next_custom_id(conn: Connection) -> int:
    top = conn.scalar(select(func.max(_rc.c.id))
                      .where(_rc.c.id >= t.CUSTOM_CLASS_MIN_ID,
                             _rc.c.id < t.MARKER_CLASS_MIN_ID))
    return t.CUSTOM_CLASS_MIN_ID if top is None else top + 1


def _insert(conn: Connection, name: str) -> ResourceClass:
    try:
        conn.execute(insert(_rc).values(id=_next_custom_id(conn), name=name))
    except IntegrityError:
        # Another writer took the same id (or name) after our read; a new
        # transaction will see its row and pick the next id.
        raise errors.RaceLost(
            f"Another request created a resource class while {name} was "
            "being created; retry.")
    return get(conn, name)


def create(conn: Connection, name: str) -> ResourceClass:
    """Create a custom class; Conflict (409) if it exists."""
    if find(conn, name) is not None:
        raise errors.Conflict(
            f"Conflicting resource class already exists: {name}.")
    return _insert(conn, name)


def ensure(conn: Connection, name: str) -> bool:
    """Create a custom class unless it exists. True if it was created."""
    if find(conn, name) is not None:
        return False
    _insert(conn, name)
    return True


def rename(conn: Connection, name: str, new_name: str) -> ResourceClass:
    """Rename a custom class (the pre-1.7 PUT)."""
    current = get(conn, name)
    if current.standard:
        raise errors.Invalid(f"Cannot update standard resource class {name}.")
    if new_name != name and find(conn, new_name) is not None:
        raise errors.Conflict(f"Resource class already exists: {new_name}.")
    conn.execute(update(_rc).where(_rc.c.id == current.id)
                 .values(name=new_name, updated_at=utcnow()))
    if new_name != name:
        # Every provider holding the class now shows another name for it;
        # too many to list, and renames are rare (only before 1.7).
        facts_log.reset(conn)
    return get(conn, new_name)


def delete_class(conn: Connection, name: str) -> None:
    """Delete a custom class; 400 for standard ones, 409 while in use."""
    current = get(conn, name)
    if current.standard:
        raise errors.Invalid(
            "Error in delete resource class: Cannot delete standard resource "
            f"class {name}.")
    for table, what in ((t.inventories, "inventory"),
                        (t.allocations, "allocations")):
        in_use = conn.execute(select(exists().where(
            table.c.resource_class_id == current.id))).scalar()
        if in_use:
            raise errors.Conflict(
                f"Error in delete resource class: Cannot delete resource class "
                f"{name}. Class is in use in inventory. (Providers still have "
                f"{what} of it; remove that first.)")
    named = marker.reservation_uuid(name)
    if named is not None and conn.scalar(select(exists().where(
            t.reservations.c.uuid == named))):
        raise errors.Conflict(
            f"Error in delete resource class: Cannot delete resource class "
            f"{name}. Class is in use in inventory. (It names reservation "
            f"{named}, which claims draw from through it; the class goes "
            "when the reservation is deleted.)")
    counts = reserved_ahead.live_counts(conn, class_ids=[current.id])
    n_live, rows = counts.get(current.id, (0, 0))
    if n_live:
        raise errors.Conflict(
            f"Error in delete resource class: Cannot delete resource class "
            f"{name}. Class is in use in inventory. (Reservations that have "
            "not ended hold it; end or cancel them first.)")
    if rows:
        # Ended reservations' records let go of the class with it.
        reserved_ahead.drop_ended(conn, class_id=current.id)
    conn.execute(delete(_rc).where(_rc.c.id == current.id))
