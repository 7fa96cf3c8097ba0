"""Consumers and the projects, users and consumer types they point at.

A consumer row lives exactly as long as it has allocations: writers create
it with its first allocation and remove it when its last one goes.

Projects, users and consumer types are keyed by their external names and
created on first use. Two writers may create the same name at once; the
loser's unique violation becomes RaceLost, retried, so the
write runs again in a new transaction that sees the winner's row. (A
savepoint would not do: MariaDB answers racing duplicate inserts with a
deadlock that rolls back the whole transaction, savepoint included.)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

from sqlalchemy import (
    Integer, String, bindparam, delete, exists, insert, literal, null, select, update)
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from placement_lite import errors
from placement_lite.db import tables as t

# Placement's owner for allocations written before 1.8 made project and
# user mandatory.
INCOMPLETE_CONSUMER_ID = "00000000-0000-0000-0000-000000000000"
# A consumer is written together with its first allocations, so it starts
# at the generation a consumer has after one write.
FIRST_GENERATION = 1
# How consumers without a type are reported from 1.38.
UNKNOWN_TYPE = "unknown"
# Placement's phrase for an allocation write that lost a race; what follows
# says which one (seen only once every retry lost).
RACE = "Inventory and/or allocations changed while attempting to allocate: "


@dataclass
class Consumer:
    id: int
    uuid: str
    project_id: str
    user_id: str
    consumer_type: Optional[str]
    generation: int
    # The row ids of project, user and type (None: no type), which the
    # usage summary is keyed by.
    owner: tuple[int, int, Optional[int]]


def _ensure_named(conn: Connection, table, column, value: str) -> int:
    found = conn.scalar(select(table.c.id).where(column == value))
    return found if found is not None else _create_named(conn, table, column, value)


def _create_named(conn: Connection, table, column, value: str) -> int:
    try:
        return conn.execute(insert(table).values({column.key: value})
                            ).inserted_primary_key[0]
    except IntegrityError:
        raise errors.RaceLost(
            f"{RACE}{table.name} row {value!r} was created by another request at "
            "the same time; try again.")


def ensure_project(conn: Connection, external_id: str) -> int:
    return _ensure_named(conn, t.projects, t.projects.c.external_id, external_id)


def ensure_user(conn: Connection, external_id: str) -> int:
    return _ensure_named(conn, t.users, t.users.c.external_id, external_id)


def ensure_consumer_type(conn: Connection, name: str) -> int:
    return _ensure_named(conn, t.consumer_types, t.consumer_types.c.name, name)


_OWNER_NAMES = ((t.projects, t.projects.c.external_id),
                (t.users, t.users.c.external_id),
                (t.consumer_types, t.consumer_types.c.name))


def ensure_owner(conn: Connection, project: str, user: str,
                 consumer_type: Optional[str]) -> tuple[int, int, Optional[int]]:
    """Row ids of the project, user and type (None: no type), each created
    on first use: one round trip for the three when they exist, as they
    do for all but a project's first claims."""
    names = _owner_names(project, user, consumer_type)
    found = conn.execute(_OWNER_IDS[len(names)], dict(zip(_OWNER_PARAMS, names))).one()
    ids = [row_id if row_id is not None else _create_named(conn, table, column, name)
           for row_id, (table, column), name in zip(found, _OWNER_NAMES, names)]
    return ids[0], ids[1], ids[2] if len(ids) > 2 else None


def _owner_names(project: str, user: str, consumer_type: Optional[str]) -> tuple:
    """The names the owner lookup takes: without a type, two."""
    return (project, user) if consumer_type is None else (project, user, consumer_type)


# The owner lookup's parameters, and the consumer columns it fills.
_OWNER_PARAMS = ("project", "user", "type")
_OWNER_COLUMNS = ("project_id", "user_id", "consumer_type_id")


def _owner_ids(count: int):
    return select(*(
        select(table.c.id).where(column == bindparam(key)).scalar_subquery().label(name)
        for (table, column), key, name in zip(
            _OWNER_NAMES[:count], _OWNER_PARAMS, _OWNER_COLUMNS)))


# Built once, with and without the type: every new consumer's write runs
# one, and building it per call cost more CPU than running it.
_OWNER_IDS = {2: _owner_ids(2), 3: _owner_ids(3)}


def _consumer_query():
    c = t.consumers
    return (select(c.c.id, c.c.uuid, t.projects.c.external_id.label("project"),
                   t.users.c.external_id.label("user"),
                   t.consumer_types.c.name.label("ctype"), c.c.generation,
                   c.c.project_id, c.c.user_id, c.c.consumer_type_id)
            .join(t.projects, t.projects.c.id == c.c.project_id)
            .join(t.users, t.users.c.id == c.c.user_id)
            .outerjoin(t.consumer_types,
                       t.consumer_types.c.id == c.c.consumer_type_id))


# Built once: every allocation write runs them.
_BY_UUIDS = _consumer_query().where(
    t.consumers.c.uuid.in_(bindparam("uuids", expanding=True)))
_INSERT = insert(t.consumers)


def _consumer(row) -> Consumer:
    return Consumer(row.id, row.uuid, row.project, row.user, row.ctype,
                    row.generation,
                    (row.project_id, row.user_id, row.consumer_type_id))


def get(conn: Connection, uuid: str) -> Optional[Consumer]:
    row = conn.execute(_consumer_query().where(t.consumers.c.uuid == uuid)).first()
    return None if row is None else _consumer(row)


def get_many(conn: Connection, uuids: Iterable[str]) -> dict[str, Consumer]:
    """uuid -> Consumer for those of `uuids` that exist, in one query."""
    wanted = sorted(set(uuids))
    if not wanted:
        return {}
    rows = conn.execute(_BY_UUIDS, {"uuids": wanted})
    return {row.uuid: _consumer(row) for row in rows}


def check_generation(consumer: Optional[Consumer], uuid: str,
                     expected: Optional[int]) -> None:
    """The 1.28 contract: null for a new consumer, else the stored value."""
    actual = consumer.generation if consumer is not None else None
    if expected == actual:
        return
    hint = ("send consumer_generation null to create it" if actual is None
            else "re-read the consumer's allocations and try again")
    raise errors.ConcurrentUpdate(
        f"consumer generation conflict - expected {_json(actual)} but got "
        f"{_json(expected)} for consumer {uuid}: {hint}.")


def _json(generation: Optional[int]) -> str:
    return "null" if generation is None else str(generation)


def _insert_with_owner(count: int):
    """INSERT of a new consumer whose owner's row ids are looked up by name
    in the same statement (`count` names: with or without a type),
    RETURNING its id and theirs: nothing is inserted, and no row comes
    back, when one of those names has no row yet."""
    c = t.consumers
    owner = _owner_ids(count).subquery("owner")
    ids = list(owner.c)
    type_id = ids[2] if count == 3 else null()
    found = (select(bindparam("uuid", type_=String), ids[0], ids[1], type_id,
                    literal(FIRST_GENERATION, Integer))
             .where(*(column.is_not(None) for column in ids)))
    return insert(c).from_select(
        ["uuid", *_OWNER_COLUMNS, "generation"], found
    ).returning(c.c.id, *(c.c[name] for name in _OWNER_COLUMNS))


# Built once, with and without a type: a new consumer's claim runs one.
_INSERT_WITH_OWNER = {2: _insert_with_owner(2), 3: _insert_with_owner(3)}


def create(conn: Connection, uuid: str, project: str, user: str,
           consumer_type: Optional[str]) -> Consumer:
    try:
        found = None
        if conn.dialect.insert_returning:
            # Its owner's rows nearly always exist (all but a project's
            # first claims): one round trip finds them and inserts.
            names = _owner_names(project, user, consumer_type)
            found = conn.execute(_INSERT_WITH_OWNER[len(names)], dict(
                zip(_OWNER_PARAMS, names), uuid=uuid)).first()
        if found is not None:
            new_id, owner = found[0], tuple(found[1:])
        else:
            owner = ensure_owner(conn, project, user, consumer_type)
            new_id = conn.execute(_INSERT, dict(
                zip(_OWNER_COLUMNS, owner), uuid=uuid, generation=FIRST_GENERATION,
            )).inserted_primary_key[0]
    except IntegrityError:
        # Another writer created this consumer since we looked: start over
        # in a fresh transaction, which will see it.
        raise errors.RaceLost(
            f"{RACE}consumer {uuid} was created by another request at the same "
            "time; re-read its allocations and try again.")
    return Consumer(new_id, uuid, project, user, consumer_type, FIRST_GENERATION,
                    owner)


def claim(conn: Connection, consumer: Consumer, project: str, user: str,
          consumer_type: Optional[str]) -> None:
    """Bump an existing consumer's generation (taking its row lock) and
    record its owner and type as given.

    A type of None leaves the stored type alone (writes before 1.38).
    """
    values: dict = {"generation": t.consumers.c.generation + 1}
    if project != consumer.project_id:
        values["project_id"] = ensure_project(conn, project)
    if user != consumer.user_id:
        values["user_id"] = ensure_user(conn, user)
    if consumer_type is not None and consumer_type != consumer.consumer_type:
        values["consumer_type_id"] = ensure_consumer_type(conn, consumer_type)
    result = conn.execute(
        update(t.consumers)
        .where(t.consumers.c.id == consumer.id,
               t.consumers.c.generation == consumer.generation)
        .values(values))
    if result.rowcount != 1:
        raise errors.RaceLost(
            f"{RACE}consumer {consumer.uuid} was changed by another request at the "
            "same time; re-read its allocations and try again.")
    consumer.generation += 1
    consumer.project_id, consumer.user_id = project, user
    if consumer_type is not None:
        consumer.consumer_type = consumer_type
    project_row, user_row, type_row = consumer.owner
    consumer.owner = (values.get("project_id", project_row),
                      values.get("user_id", user_row),
                      values.get("consumer_type_id", type_row))


def bump(conn: Connection, consumer: Consumer) -> None:
    claim(conn, consumer, consumer.project_id, consumer.user_id, None)


def delete_if_empty(conn: Connection, consumer_ids: Iterable[int]) -> None:
    ids = sorted(set(consumer_ids))
    if not ids:
        return
    has_allocations = exists().where(
        t.allocations.c.consumer_id == t.consumers.c.id)
    conn.execute(delete(t.consumers).where(
        t.consumers.c.id.in_(ids), ~has_allocations))
