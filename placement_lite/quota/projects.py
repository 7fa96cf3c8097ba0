"""The project registry: the tree quota is enforced over.

Projects live on the shared `projects` table, keyed by their external id
(the id clients and consumers use). Consumers create bare rows on first
sight; such a row is an enabled top-level project until it is registered
through the API, which may then give it a name, a domain and a parent.

A domain is a project row with is_domain set. Its projects point at it
with domain_id; parent_id only ever names another (non-domain) project,
so a top-level project has no parent row and is the root of its tree.
"""
from __future__ import annotations

import uuid as uuidlib
from dataclasses import dataclass
from typing import Iterable, Optional

from sqlalchemy import delete, exists, insert, or_, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from placement_lite import errors
from placement_lite.db import tables as t
from placement_lite.db import upsert

P = t.projects


@dataclass
class Project:
    id: int
    external_id: str
    name: Optional[str]
    description: Optional[str]
    parent_id: Optional[int]
    domain_id: Optional[int]
    is_domain: bool
    enabled: bool
    # External ids, for rendering.
    parent_external_id: Optional[str] = None
    domain_external_id: Optional[str] = None

    @property
    def registered(self) -> bool:
        return self.name is not None


def _query():
    parent = P.alias("parent")
    domain = P.alias("domain")
    return (select(P.c.id, P.c.external_id, P.c.name, P.c.description,
                   P.c.parent_id, P.c.domain_id, P.c.is_domain, P.c.enabled,
                   parent.c.external_id.label("parent_external_id"),
                   domain.c.external_id.label("domain_external_id"))
            .select_from(P.outerjoin(parent, parent.c.id == P.c.parent_id)
                         .outerjoin(domain, domain.c.id == P.c.domain_id)))


def _row(row) -> Project:
    return Project(id=row.id, external_id=row.external_id, name=row.name,
                   description=row.description, parent_id=row.parent_id,
                   domain_id=row.domain_id, is_domain=bool(row.is_domain),
                   enabled=bool(row.enabled),
                   parent_external_id=row.parent_external_id,
                   domain_external_id=row.domain_external_id)


def find(conn: Connection, external_id: str) -> Optional[Project]:
    row = conn.execute(_query().where(P.c.external_id == external_id)).first()
    return _row(row) if row is not None else None


def get(conn: Connection, external_id: str, what: str = "project") -> Project:
    found = find(conn, external_id)
    if found is None:
        raise errors.ProjectNotFound(
            f"No {what} with id {external_id} exists; create it with "
            "POST /v3/projects first.")
    return found


def by_ids(conn: Connection, ids: Iterable[int]) -> dict[int, Project]:
    ids = list(set(ids))
    if not ids:
        return {}
    rows = conn.execute(_query().where(P.c.id.in_(ids))).all()
    return {row.id: _row(row) for row in rows}


def list_projects(conn: Connection, *, name=None, parent=None, domain=None,
                  is_domain=None, enabled=None) -> list[Project]:
    query = _query().order_by(P.c.id)
    if name is not None:
        query = query.where(P.c.name == name)
    if parent is not None:
        query = query.where(P.c.parent_id == parent.id) if not parent.is_domain \
            else query.where(P.c.domain_id == parent.id, P.c.parent_id.is_(None),
                             P.c.is_domain.is_(False))
    if domain is not None:
        query = query.where(P.c.domain_id == domain.id)
    if is_domain is not None:
        query = query.where(P.c.is_domain.is_(bool(is_domain)))
    if enabled is not None:
        query = query.where(P.c.enabled.is_(bool(enabled)))
    return [_row(r) for r in conn.execute(query).all()]


def depth(conn: Connection, project: Project) -> int:
    """1 for a top-level project, 2 for its child, and so on (domains: 0)."""
    if project.is_domain:
        return 0
    level, parent_id = 1, project.parent_id
    while parent_id is not None:
        level += 1
        parent_id = conn.scalar(select(P.c.parent_id).where(P.c.id == parent_id))
    return level


def root_of(conn: Connection, project_id: int) -> int:
    """The internal id of the top-level project of project_id's tree."""
    current = project_id
    while True:
        parent_id = conn.scalar(select(P.c.parent_id).where(P.c.id == current))
        if parent_id is None:
            return current
        current = parent_id


def descendants(conn: Connection, root_id: int) -> list[int]:
    """root_id and every project below it, level by level."""
    found = [root_id]
    frontier = [root_id]
    while frontier:
        frontier = list(conn.scalars(
            select(P.c.id).where(P.c.parent_id.in_(frontier))))
        found.extend(frontier)
    return found


def children(conn: Connection, project_id: int) -> list[int]:
    return list(conn.scalars(select(P.c.id).where(P.c.parent_id == project_id)))


def create(conn: Connection, *, external_id: Optional[str], name: str,
           description: Optional[str] = None, parent: Optional[str] = None,
           domain: Optional[str] = None, is_domain: bool = False,
           enabled: bool = True, max_depth: Optional[int] = None) -> Project:
    """Register a project (or domain).

    A bare row that consumers created earlier under the same external id
    is registered in place, so usage recorded before registration counts.
    """
    parent_row = get(conn, parent, "parent project") if parent else None
    domain_row = get(conn, domain, "domain") if domain else None
    if domain_row is not None and not domain_row.is_domain:
        raise errors.Invalid(f"{domain} is a project, not a domain; "
                             "domain_id must name a domain.")
    if parent_row is not None and parent_row.is_domain:
        # Keystone's convention: a top-level project's parent is its domain.
        if domain_row is not None and domain_row.id != parent_row.id:
            raise errors.Invalid("parent_id names a domain other than domain_id.")
        domain_row, parent_row = parent_row, None
    if is_domain and (parent_row is not None or domain_row is not None):
        raise errors.Invalid("A domain can have neither a parent nor a domain.")
    if parent_row is not None:
        if domain_row is not None and parent_row.domain_id != domain_row.id:
            raise errors.Invalid(
                f"The parent project {parent} is in another domain; a child "
                "must be in its parent's domain.")
        domain_id = parent_row.domain_id
        if max_depth is not None and depth(conn, parent_row) + 1 > max_depth:
            raise errors.TreeTooDeep(
                f"Project {parent} is already at depth {depth(conn, parent_row)}; "
                f"the enforcement model allows project trees at most "
                f"{max_depth} levels deep. Create the project under a "
                "top-level project instead.")
    else:
        domain_id = domain_row.id if domain_row is not None else None
    values = dict(name=name, description=description,
                  parent_id=parent_row.id if parent_row else None,
                  domain_id=domain_id, is_domain=bool(is_domain),
                  enabled=bool(enabled))
    external_id = external_id or uuidlib.uuid4().hex
    existing = find(conn, external_id)
    if existing is not None:
        if existing.registered or children(conn, existing.id):
            raise errors.DuplicateName(
                f"A project with id {external_id} already exists.")
        conn.execute(update(P).where(P.c.id == existing.id).values(**values))
    else:
        try:
            with conn.begin_nested():
                conn.execute(insert(P).values(external_id=external_id, **values))
        except IntegrityError:
            raise errors.DuplicateName(
                f"A project with id {external_id} already exists.")
    return get(conn, external_id)


def update_project(conn: Connection, project: Project, changes: dict) -> Project:
    allowed = {k: v for k, v in changes.items()
               if k in ("name", "description", "enabled")}
    if allowed:
        conn.execute(update(P).where(P.c.id == project.id).values(**allowed))
    return get(conn, project.external_id)


def delete_project(conn: Connection, project: Project) -> None:
    # Lock before checking, in the writers' order (the tree's lock row,
    # when the project is a root, then the project's row, which a claim's
    # or a reservation's insert locks in share mode through its foreign
    # key): a write not yet committed when the checks ran would otherwise
    # be found only by the DELETE, as a foreign key error.
    conn.execute(delete(t.quota_tree_locks).where(
        t.quota_tree_locks.c.root_id == project.id))
    conn.execute(select(P.c.id).where(P.c.id == project.id).with_for_update())
    below = conn.scalar(select(exists().where(
        or_(P.c.parent_id == project.id, P.c.domain_id == project.id))))
    if below:
        raise errors.ProjectHasChildren(
            f"Project {project.external_id} has child projects; delete them "
            "first.")
    if _owns_rows(conn, t.consumers, project):
        raise errors.ProjectInUse(
            f"Project {project.external_id} still owns consumers with "
            "allocations; delete their allocations first.")
    if _owns_rows(conn, t.reservations, project):
        raise errors.ProjectInUse(
            f"Project {project.external_id} still owns reservations; cancel "
            "or end them, then delete them from the records first.")
    if _owns_rows(conn, t.lease_ledger, project):
        # The ledger is append-only: its entries outlive nothing they name.
        raise errors.ProjectInUse(
            f"Project {project.external_id} has lease ledger entries, which "
            "are kept for audit; disable the project instead.")
    conn.execute(delete(t.project_limits).where(
        t.project_limits.c.owner_id == project.id))
    conn.execute(delete(P).where(P.c.id == project.id))


def _owns_rows(conn: Connection, table, project: Project) -> bool:
    """Whether any row of `table` names `project` as its project."""
    return bool(conn.scalar(select(exists().where(table.c.project_id == project.id))))


def lock_trees(conn: Connection, root_ids: Iterable[int]) -> None:
    """Serialise quota decisions per tree: take each tree's lock row.

    The write takes a row lock on MariaDB and PostgreSQL that is held to
    commit, so a second claim in the same tree waits here and, under READ
    COMMITTED, reads usage only after the first one has committed. Trees
    are locked in root id order so two multi-tree claims cannot deadlock.
    SQLite writers are already serialised by BEGIN IMMEDIATE.

    One upsert, rows in root id order, which creates a tree's row on its
    first decision (db/upsert.py says why not an INSERT in a savepoint).
    """
    upsert.insert_or_add(conn, t.quota_tree_locks, [
        {"root_id": root_id, "generation": 1} for root_id in sorted(set(root_ids))],
        add=["generation"])
