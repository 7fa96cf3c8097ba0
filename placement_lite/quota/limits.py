"""Registered limits (defaults) and project or domain limits (overrides).

Both are scoped to a service and an optional region. `region_key` is the
region id or '' and carries the uniqueness, because NULLs never collide in
a unique index. Every write runs the enforcement model's validation in the
same transaction, after the change, against what is then stored.
"""
from __future__ import annotations

import uuid as uuidlib
from typing import Iterable, Optional

from sqlalchemy import and_, delete, exists, func, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from placement_lite import errors
from placement_lite.db import tables as t
from placement_lite.quota import catalog, projects

RL = t.registered_limits
PL = t.project_limits
UNLIMITED = -1


def region_key(region_id: Optional[str]) -> str:
    return region_id or ""


def _insert_unique(conn: Connection, table, values: dict, what: str) -> None:
    """Insert a limit row that the caller found no duplicate of. One
    created concurrently since then (committed after the caller's check)
    trips the unique index: a 409 naming `what`, in a savepoint, so that
    the transaction stays usable."""
    try:
        with conn.begin_nested():
            conn.execute(insert(table).values(**values))
    except IntegrityError:
        raise errors.DuplicateLimit(f"{what} already exists (created concurrently).")


# Registered limits ----------------------------------------------------------

def _check_refs(conn: Connection, service_id: str, region_id: Optional[str]):
    # Keystone answers a reference to a missing service or region with a
    # validation error (400), not a 404: the body is what is wrong.
    try:
        catalog.get_service(conn, service_id)
        if region_id is not None:
            catalog.get_region(conn, region_id)
    except errors.CatalogNotFound as exc:
        raise errors.Invalid(exc.detail + " Create it first.")


def get_registered(conn: Connection, ident: str) -> dict:
    row = conn.execute(select(RL).where(RL.c.id == ident)).mappings().first()
    if row is None:
        raise errors.LimitNotFound(f"No registered limit with id {ident} exists.")
    return dict(row)


def list_registered(conn: Connection, *, service_id=None, region_id=None,
                    resource_name=None) -> list[dict]:
    q = select(RL).order_by(RL.c.service_id, RL.c.region_key,
                            RL.c.resource_name)
    if service_id is not None:
        q = q.where(RL.c.service_id == service_id)
    if region_id is not None:
        q = q.where(RL.c.region_id == region_id)
    if resource_name is not None:
        q = q.where(RL.c.resource_name == resource_name)
    return [dict(r) for r in conn.execute(q).mappings()]


def _registered_exists(conn, service_id, rkey, resource_name, but=None) -> bool:
    q = select(RL.c.id).where(RL.c.service_id == service_id,
                              RL.c.region_key == rkey,
                              RL.c.resource_name == resource_name)
    if but is not None:
        q = q.where(RL.c.id != but)
    return conn.scalar(q) is not None


def create_registered(conn: Connection, items: list[dict]) -> list[dict]:
    ids = []
    for item in items:
        _check_refs(conn, item["service_id"], item.get("region_id"))
        rkey = region_key(item.get("region_id"))
        if _registered_exists(conn, item["service_id"], rkey,
                              item["resource_name"]):
            raise errors.DuplicateLimit(
                f"A registered limit for resource {item['resource_name']} of "
                f"service {item['service_id']} in region "
                f"{item.get('region_id') or '(none)'} already exists; update "
                "it with PATCH instead.")
        ident = uuidlib.uuid4().hex
        _insert_unique(conn, RL, dict(
            id=ident, service_id=item["service_id"],
            region_id=item.get("region_id"), region_key=rkey,
            resource_name=item["resource_name"],
            default_limit=item["default_limit"],
            description=item.get("description")),
            f"A registered limit for resource {item['resource_name']}")
        ids.append(ident)
    return [get_registered(conn, i) for i in ids]


def _references(conn: Connection, reg: dict) -> bool:
    return bool(conn.scalar(select(exists().where(
        PL.c.service_id == reg["service_id"],
        PL.c.region_key == reg["region_key"],
        PL.c.resource_name == reg["resource_name"]))))


def update_registered(conn: Connection, ident: str, changes: dict) -> dict:
    reg = get_registered(conn, ident)
    moves = {k for k in ("service_id", "region_id", "resource_name")
             if k in changes and changes[k] != reg[k]}
    if moves and _references(conn, reg):
        raise errors.RegisteredLimitInUse(
            f"Registered limit {ident} has project or domain limits; its "
            f"{', '.join(sorted(moves))} cannot change while they exist. "
            "Delete those limits first, or change only default_limit or "
            "description.")
    values = {k: v for k, v in changes.items()
              if k in ("service_id", "region_id", "resource_name",
                       "default_limit", "description")}
    merged = {**reg, **values}
    if moves:
        _check_refs(conn, merged["service_id"], merged["region_id"])
        values["region_key"] = region_key(merged["region_id"])
        if _registered_exists(conn, merged["service_id"], values["region_key"],
                              merged["resource_name"], but=ident):
            raise errors.DuplicateLimit(
                f"A registered limit for resource {merged['resource_name']} "
                "already exists in that service and region.")
    if values:
        values["updated_at"] = func.now()
        conn.execute(update(RL).where(RL.c.id == ident).values(**values))
    return get_registered(conn, ident)


def delete_registered(conn: Connection, ident: str) -> None:
    reg = get_registered(conn, ident)
    if _references(conn, reg):
        raise errors.RegisteredLimitInUse(
            f"Registered limit {ident} has project or domain limits; delete "
            "them first.")
    conn.execute(delete(RL).where(RL.c.id == ident))


# Project and domain limits ---------------------------------------------------

def _limit_query():
    owner = t.projects
    return (select(PL, owner.c.external_id.label("owner_external_id"),
                   owner.c.is_domain.label("owner_is_domain"))
            .select_from(PL.join(owner, owner.c.id == PL.c.owner_id)))


def get_limit(conn: Connection, ident: str) -> dict:
    row = conn.execute(_limit_query().where(PL.c.id == ident)).mappings().first()
    if row is None:
        raise errors.LimitNotFound(f"No limit with id {ident} exists.")
    return dict(row)


def list_limits(conn: Connection, *, service_id=None, region_id=None,
                resource_name=None, project_id=None, domain_id=None) -> list[dict]:
    q = _limit_query().order_by(PL.c.owner_id, PL.c.service_id,
                                PL.c.region_key, PL.c.resource_name)
    if service_id is not None:
        q = q.where(PL.c.service_id == service_id)
    if region_id is not None:
        q = q.where(PL.c.region_id == region_id)
    if resource_name is not None:
        q = q.where(PL.c.resource_name == resource_name)
    for wanted, is_domain in ((project_id, False), (domain_id, True)):
        if wanted is not None:
            q = q.where(t.projects.c.external_id == wanted,
                        t.projects.c.is_domain.is_(is_domain))
    return [dict(r) for r in conn.execute(q).mappings()]


def create_limits(conn: Connection, items: list[dict], model) -> list[dict]:
    ids = []
    for item in items:
        if item.get("domain_id") is not None:
            owner = projects.get(conn, item["domain_id"], "domain")
            if not owner.is_domain:
                raise errors.Invalid(
                    f"{item['domain_id']} is a project; use project_id.")
        else:
            owner = projects.get(conn, item["project_id"])
            if owner.is_domain:
                raise errors.Invalid(
                    f"{item['project_id']} is a domain; use domain_id.")
        _check_refs(conn, item["service_id"], item.get("region_id"))
        rkey = region_key(item.get("region_id"))
        if not _registered_exists(conn, item["service_id"], rkey,
                                  item["resource_name"]):
            raise errors.NoLimitReference(
                "Unable to create a limit that has no corresponding registered "
                f"limit: register a default for resource {item['resource_name']}"
                f" of service {item['service_id']} in region "
                f"{item.get('region_id') or '(none)'} first.")
        if conn.scalar(select(PL.c.id).where(
                PL.c.owner_id == owner.id, PL.c.service_id == item["service_id"],
                PL.c.region_key == rkey,
                PL.c.resource_name == item["resource_name"])) is not None:
            raise errors.DuplicateLimit(
                f"{'Domain' if owner.is_domain else 'Project'} "
                f"{owner.external_id} already has a limit for resource "
                f"{item['resource_name']}; update it with PATCH instead.")
        _lock_owner(conn, owner)
        ident = uuidlib.uuid4().hex
        _insert_unique(conn, PL, dict(
            id=ident, owner_id=owner.id, service_id=item["service_id"],
            region_id=item.get("region_id"), region_key=rkey,
            resource_name=item["resource_name"],
            resource_limit=item["resource_limit"],
            description=item.get("description")),
            f"A limit for resource {item['resource_name']} of {owner.external_id}")
        ids.append(ident)
    rows = [get_limit(conn, i) for i in ids]
    model.validate_limits(conn, rows)
    return rows


def _lock_owner(conn: Connection, owner: projects.Project) -> None:
    # Limit writes in one tree (and its domain) serialise like claims, so
    # two admins cannot each pass validation against the other's old value.
    roots = [projects.root_of(conn, owner.id)]
    if owner.domain_id is not None:
        roots.append(owner.domain_id)
    projects.lock_trees(conn, roots)


def update_limit(conn: Connection, ident: str, changes: dict, model) -> dict:
    row = get_limit(conn, ident)
    _lock_owner(conn, projects.by_ids(conn, [row["owner_id"]])[row["owner_id"]])
    values = {k: v for k, v in changes.items()
              if k in ("resource_limit", "description")}
    if values:
        values["updated_at"] = func.now()
        conn.execute(update(PL).where(PL.c.id == ident).values(**values))
    row = get_limit(conn, ident)
    model.validate_limits(conn, [row])
    return row


def delete_limit(conn: Connection, ident: str) -> None:
    get_limit(conn, ident)
    conn.execute(delete(PL).where(PL.c.id == ident))


# Lookups for enforcement and validation -----------------------------------

def registered_defaults(conn: Connection, service_id: str, rkey: str,
                        names: Optional[Iterable[str]] = None) -> dict[str, int]:
    q = select(RL.c.resource_name, RL.c.default_limit).where(
        RL.c.service_id == service_id, RL.c.region_key == rkey)
    if names is not None:
        q = q.where(RL.c.resource_name.in_(list(names)))
    return {r.resource_name: r.default_limit for r in conn.execute(q)}


def explicit_limits(conn: Connection, service_id: str, rkey: str,
                    owner_ids: Iterable[int],
                    names: Optional[Iterable[str]] = None
                    ) -> dict[tuple[int, str], int]:
    owner_ids = list(set(owner_ids))
    if not owner_ids:
        return {}
    q = select(PL.c.owner_id, PL.c.resource_name, PL.c.resource_limit).where(
        and_(PL.c.service_id == service_id, PL.c.region_key == rkey,
             PL.c.owner_id.in_(owner_ids)))
    if names is not None:
        q = q.where(PL.c.resource_name.in_(list(names)))
    return {(r.owner_id, r.resource_name): r.resource_limit
            for r in conn.execute(q)}


def scope_query(service_type: str):
    """The SELECT of the id of the service enforcement reads limits under
    (a caller may add columns, to answer more in the same round trip)."""
    return (select(t.quota_services.c.id)
            .where(t.quota_services.c.type == service_type)
            .order_by(t.quota_services.c.created_at, t.quota_services.c.id)
            .limit(1))


def resolve_scope(conn: Connection, service_type: str,
                  region_id: Optional[str]) -> Optional[tuple[str, str]]:
    """The (service_id, region_key) enforcement reads, or None if no service
    of that type is registered (then nothing is limited)."""
    service_id = conn.scalar(scope_query(service_type))
    if service_id is None:
        return None
    return service_id, region_key(region_id)


def is_unlimited(value: Optional[int]) -> bool:
    return value is None or value == UNLIMITED


def min_limit(a: Optional[int], b: Optional[int]) -> Optional[int]:
    """The tighter of two limits, where None and -1 both mean unlimited."""
    if is_unlimited(a):
        return b if not is_unlimited(b) else a
    if is_unlimited(b):
        return a
    return min(a, b)


def exceeds(value: Optional[int], cap: Optional[int]) -> bool:
    """Is `value` (a limit) above `cap` (a limit), -1 being infinite?"""
    if is_unlimited(cap):
        return False
    return is_unlimited(value) or value > cap
