"""Resource providers: rows and trees; creating, renaming, moving and
deleting them.

A provider row points at its tree's root (a root points at itself) and at
its parent (NULL for a root). Every change to what a provider offers
(inventory, traits, aggregates, allocations) goes through
`bump_generation` (ledger/generations.py, whose names are importable from
here too, as callers have always imported them).

A bump alone changes none of a provider's *facts* (db/facts_log: what
the candidate engine copies: existence, tree, inventory, traits,
aggregates); claims bump too. So the writes that change facts log them
(facts_log.touch) where they write the rows: here for provider rows, in
inventories._write and lookup.sync_provider_links for the rest.
"""
from __future__ import annotations

import uuid as uuidlib
from dataclasses import dataclass
from typing import Optional, Sequence

from sqlalchemy import bindparam, delete, exists, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from placement_lite import errors
from placement_lite.db import facts_log
from placement_lite.db import tables as t
from placement_lite.ledger import reserved_ahead
from placement_lite.ledger.generations import (  # noqa: F401 - re-exported
    ProviderRef, bump_generation, check_generation, check_generation_unchanged,
    get_ref, get_with, lock_for_claim, not_found, select_with, utcnow)

_rp = t.resource_providers
_root = _rp.alias("root")
_parent = _rp.alias("parent")

# Sentinel: "the request did not mention a parent" (None means "no parent").
UNSET = object()


@dataclass(frozen=True, kw_only=True)
class Provider(ProviderRef):
    name: str
    root_id: int
    parent_id: Optional[int]
    root_uuid: str
    parent_uuid: Optional[str]


def _select():
    return (
        select(_rp.c.id, _rp.c.uuid, _rp.c.name, _rp.c.generation,
               _rp.c.root_provider_id, _rp.c.parent_provider_id,
               _root.c.uuid.label("root_uuid"),
               _parent.c.uuid.label("parent_uuid"),
               _rp.c.created_at, _rp.c.updated_at)
        .select_from(
            _rp.join(_root, _root.c.id == _rp.c.root_provider_id)
            .outerjoin(_parent, _parent.c.id == _rp.c.parent_provider_id)))


def _provider(row) -> Provider:
    return Provider(id=row.id, uuid=row.uuid, name=row.name,
                    generation=row.generation, root_id=row.root_provider_id,
                    parent_id=row.parent_provider_id, root_uuid=row.root_uuid,
                    parent_uuid=row.parent_uuid, created_at=row.created_at,
                    updated_at=row.updated_at)


# The statements every write runs, built once: building a select costs
# about as much CPU as running it, and a statement object kept whole keeps
# its cache key, so SQLAlchemy finds its compiled form at once.
_BY_UUID = _select().where(_rp.c.uuid == bindparam("p_uuid"))
_BY_ID = _select().where(_rp.c.id == bindparam("p_id"))


def find_by_uuid(conn: Connection, uuid: str) -> Optional[Provider]:
    """The provider with this uuid, or None."""
    row = conn.execute(_BY_UUID, {"p_uuid": uuid}).first()
    return _provider(row) if row else None


def get_by_uuid(conn: Connection, uuid: str) -> Provider:
    """The provider with this uuid; ResourceProviderNotFound (404) if none."""
    provider = find_by_uuid(conn, uuid)
    if provider is None:
        raise not_found(uuid)
    return provider


def get_by_id(conn: Connection, provider_id: int) -> Provider:
    row = conn.execute(_BY_ID, {"p_id": provider_id}).first()
    if row is None:
        raise errors.ResourceProviderNotFound(
            f"No resource provider with id {provider_id} found.")
    return _provider(row)


def list_providers(conn: Connection, ids=None, name: Optional[str] = None,
                   uuid: Optional[str] = None,
                   id_filters: Sequence = ()) -> list[Provider]:
    """Providers matching every given filter, ordered by id.

    `ids` and each of `id_filters` is a collection of provider ids or a
    select() of one id column; a provider must be in all of them. None
    (and an empty `id_filters`) means no restriction.
    """
    query = _select().order_by(_rp.c.id)
    for allowed in ([ids] if ids is not None else []) + list(id_filters):
        if not hasattr(allowed, "subquery"):
            allowed = sorted(set(allowed))
            if not allowed:
                return []
        query = query.where(_rp.c.id.in_(allowed))
    if name is not None:
        query = query.where(_rp.c.name == name)
    if uuid is not None:
        query = query.where(_rp.c.uuid == uuid)
    return [_provider(row) for row in conn.execute(query)]


def _check_unique(conn: Connection, name: str, uuid: Optional[str],
                  exclude_id: Optional[int] = None) -> None:
    # One statement for both clashes (a provider write's round trips are
    # what loading a fleet costs); the uuid clash is reported first.
    clash = select(_rp.c.uuid, _rp.c.name)
    if uuid is not None:
        clash = clash.where((_rp.c.uuid == uuid) | (_rp.c.name == name))
    else:
        clash = clash.where(_rp.c.name == name)
    if exclude_id is not None:
        clash = clash.where(_rp.c.id != exclude_id)
    rows = conn.execute(clash.limit(2)).all()
    if uuid is not None and any(row.uuid == uuid for row in rows):
        # Placement reports a taken uuid with the duplicate-name code too.
        raise errors.DuplicateName(
            f"Conflicting resource provider uuid: {uuid} already exists.")
    if rows:
        # Placement words the clash differently on create and on update.
        what = "" if exclude_id is not None else "name: "
        raise errors.DuplicateName(
            f"Conflicting resource provider {what}{name} already exists.")


_NEW_VALUES = dict(uuid=bindparam("n_uuid"), name=bindparam("n_name"),
                   generation=bindparam("n_generation"),
                   root_provider_id=bindparam("n_root"),
                   parent_provider_id=bindparam("n_parent"),
                   created_at=bindparam("n_now"))
_INSERTS: dict[str, object] = {}


def _insert_statement(dialect) -> object:
    """INSERT a provider, returning its id where the database can.

    PostgreSQL and SQLite skip a row whose uuid or name is taken (ON
    CONFLICT DO NOTHING: no row comes back); MariaDB/MySQL refuse it with
    a duplicate-key error, which rolls back that statement only, so the
    transaction can still ask what clashed. Either way the insert is one
    plain statement: an INSERT ... SELECT WHERE NOT EXISTS on the same
    table costs MariaDB twice the CPU (a temporary table per insert)."""
    stmt = _INSERTS.get(dialect.name)
    if stmt is None:
        if dialect.name == "postgresql":
            stmt = postgresql.insert(_rp).values(_NEW_VALUES).on_conflict_do_nothing()
        elif dialect.name == "sqlite":
            stmt = sqlite.insert(_rp).values(_NEW_VALUES).on_conflict_do_nothing()
        else:
            stmt = insert(_rp).values(_NEW_VALUES)
        if dialect.insert_returning:
            stmt = stmt.returning(_rp.c.id)
        stmt = _INSERTS.setdefault(dialect.name, stmt)
    return stmt


_SET_ROOT = (update(_rp).where(_rp.c.id == bindparam("p_id"))
             .values(root_provider_id=bindparam("p_root")))


def create_provider(conn: Connection, name: str, uuid: Optional[str] = None,
                    parent_uuid: Optional[str] = None) -> Provider:
    """Create a provider (a root unless `parent_uuid` is given).

    409 DuplicateName for a taken name or uuid, 400 Invalid when the
    parent does not exist.
    """
    uuid = uuid or str(uuidlib.uuid4())
    failed = (f"Unable to create resource provider \"{name}\", {uuid}: "
              "Object action create failed because: ")
    if parent_uuid is not None and parent_uuid == uuid:
        raise errors.Invalid(
            failed + "parent provider UUID cannot be same as UUID. Please set "
            "parent provider UUID to None if there is no parent. (A provider "
            "cannot be its own parent.)")
    parent = None
    if parent_uuid is not None:
        parent = find_by_uuid(conn, parent_uuid)
        if parent is None:
            _check_unique(conn, name, uuid)  # a clash is reported first
            raise errors.Invalid(
                failed + f"parent provider UUID does not exist. No provider "
                f"has uuid {parent_uuid}; create the parent first.")
    # Whole seconds: the answer is built from this value rather than read
    # back, and MariaDB's DATETIME would round a fraction away.
    now = utcnow().replace(microsecond=0)
    params = {"n_uuid": uuid, "n_name": name, "n_generation": 0,
              "n_root": parent.root_id if parent else None,
              "n_parent": parent.id if parent else None, "n_now": now}
    dialect = conn.dialect
    try:
        result = conn.execute(_insert_statement(dialect), params)
    except IntegrityError:
        if dialect.name == "mysql":
            # Only the INSERT was rolled back: say what clashed.
            _check_unique(conn, name, uuid)
        # Nothing clashes now (the provider that did, or the parent, was
        # deleted meanwhile): a new transaction will see.
        raise errors.RaceLost(
            f"resource provider {name} ({uuid}) met a concurrent change; "
            "retry.")
    new_id = (result.scalar() if dialect.insert_returning
              else result.inserted_primary_key[0])
    if new_id is None:
        # Skipped by ON CONFLICT DO NOTHING: its uuid or name is taken.
        _check_unique(conn, name, uuid)
        raise errors.RaceLost(
            f"resource provider {name} ({uuid}) clashed with a provider "
            "deleted meanwhile; retry.")
    if parent is None:
        conn.execute(_SET_ROOT, {"p_id": new_id, "p_root": new_id})
    facts_log.touch(conn, (new_id,))
    return Provider(
        id=new_id, uuid=uuid, name=name, generation=0,
        root_id=parent.root_id if parent else new_id,
        parent_id=parent.id if parent else None,
        root_uuid=parent.root_uuid if parent else uuid,
        parent_uuid=parent.uuid if parent else None, created_at=now)


def descendant_ids(conn: Connection, provider: Provider) -> set[int]:
    """Ids of every provider below `provider` in its tree (not itself)."""
    rows = conn.execute(select(_rp.c.id, _rp.c.parent_provider_id)
                        .where(_rp.c.root_provider_id == provider.root_id))
    children: dict[int, list[int]] = {}
    for rid, pid in rows:
        if pid is not None:
            children.setdefault(pid, []).append(rid)
    found: set[int] = set()
    todo = [provider.id]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def update_provider(conn: Connection, provider: Provider, name: str,
                    parent_uuid=UNSET, allow_reparenting: bool = False,
                    reparenting_at: str = "") -> Provider:
    """Rename a provider and, when `parent_uuid` is given, (re)parent it.

    Without `allow_reparenting` (older callers) a parent may only be set
    on a provider that has none; the refusal names `reparenting_at`, where
    the caller can get reparenting. With it, a provider may move
    under another parent or become a root (parent_uuid None), taking its
    subtree along. It may never move below itself (400).
    """
    _check_unique(conn, name, None, exclude_id=provider.id)
    values: dict = {"name": name, "updated_at": utcnow()}
    moved_root: Optional[int] = None
    failed = (f"Unable to save resource provider {provider.uuid}: "
              "Object action update failed because: ")
    if parent_uuid is not UNSET and parent_uuid != provider.parent_uuid:
        parent = None if parent_uuid is None else find_by_uuid(conn, parent_uuid)
        if parent_uuid is not None and parent is None:
            # Placement names the action "create" here too.
            raise errors.Invalid(
                f"Unable to save resource provider {provider.uuid}: Object "
                "action create failed because: parent provider UUID does not "
                f"exist. No provider has uuid {parent_uuid}.")
        if provider.parent_id is not None and not allow_reparenting:
            raise errors.Invalid(
                failed
                + ("re-parenting" if parent_uuid is not None else "un-parenting")
                + " a provider is not currently allowed."
                + (" (Moving a provider that has a parent needs microversion "
                   f"{reparenting_at}.)" if reparenting_at else ""))
        if parent is None:
            values.update(parent_provider_id=None, root_provider_id=provider.id)
            moved_root = provider.id
        else:
            if parent.id == provider.id or parent.id in descendant_ids(conn, provider):
                what = ("a provider cannot be its own parent"
                        if parent.id == provider.id else
                        f"{parent_uuid} is below {provider.uuid} in its tree")
                raise errors.Invalid(
                    failed + "creating loop in the provider tree is not "
                    f"allowed. ({what}.)")
            values.update(parent_provider_id=parent.id,
                          root_provider_id=parent.root_id)
            moved_root = parent.root_id
    subtree = descendant_ids(conn, provider) if moved_root is not None else set()
    try:
        conn.execute(update(_rp).where(_rp.c.id == provider.id).values(**values))
    except IntegrityError:
        raise errors.DuplicateName(
            f"Conflicting resource provider {name} already exists.")
    if subtree:
        conn.execute(update(_rp).where(_rp.c.id.in_(sorted(subtree)))
                     .values(root_provider_id=moved_root))
    # A rename alone changes no fact the candidate engine reads today;
    # logged all the same, so a copy that comes to show names stays true
    # (renames are rare). A move changes the root of the whole subtree.
    facts_log.touch(conn, (provider.id, *subtree))
    return get_by_id(conn, provider.id)


def delete_provider(conn: Connection, provider: Provider) -> None:
    """Delete a provider with its inventory, trait and aggregate links.

    Refused (409) while it has children or allocations.
    """
    # Take the row lock first: allocation writers bump this generation
    # too, so none can slip an allocation in between our check and delete.
    bump_generation(conn, provider)
    if conn.execute(select(_rp.c.id)
                    .where(_rp.c.parent_provider_id == provider.id)
                    .limit(1)).first() is not None:
        raise errors.CannotDeleteParent(
            f"Unable to delete parent resource provider {provider.uuid}: "
            "It has child resource providers. Delete or move them first.")
    has_allocations = conn.execute(select(exists().where(
        t.allocations.c.resource_provider_id == provider.id))).scalar()
    if has_allocations:
        raise errors.ProviderInUse(
            f"Unable to delete resource provider {provider.uuid}: Resource "
            "provider has allocations. Delete them first.")
    _check_reservations(conn, provider)
    facts_log.touch(conn, (provider.id,))
    for table in (t.inventories, t.resource_provider_traits,
                  t.resource_provider_aggregates):
        conn.execute(delete(table).where(
            table.c.resource_provider_id == provider.id))
    # InnoDB refuses to delete a row its own foreign key points at, so a
    # root first lets go of itself.
    conn.execute(update(_rp).where(_rp.c.id == provider.id)
                 .values(root_provider_id=None))
    conn.execute(delete(_rp).where(_rp.c.id == provider.id))


def _check_reservations(conn: Connection, provider: Provider) -> None:
    """Refuse (409) while reservations that have not ended hold room on
    the provider (our reservations take its row lock to reserve, and we
    hold it); ended ones lose their rows on it, which the records
    cannot keep pointing at a provider that is gone."""
    counts = reserved_ahead.live_counts(conn, provider.id)
    if any(n_live for n_live, _n in counts.values()):
        raise errors.ProviderInUse(
            f"Unable to delete resource provider {provider.uuid}: Resource "
            "provider has reservations that have not ended. End or cancel "
            "them first (GET /reservations?resource_provider="
            f"{provider.uuid} lists them).")
    if counts:
        reserved_ahead.drop_ended(conn, provider_id=provider.id)

