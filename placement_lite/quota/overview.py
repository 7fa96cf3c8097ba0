"""Read-only quota views for operators: project trees with each resource's
limit, usage and headroom, pages of trees, the lease ledger of a project,
and the projects closest to their limits (for metrics).

Limits and usage are read in a fixed number of grouped queries for all
the projects asked about; what is over its limit is decided by the
deployment's enforcement model itself (Model.over_limits), so this view
can never call a tree over that a claim would pass, or the reverse.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from placement_lite.db import tables as t
from placement_lite.quota import enforce, models, projects, usage
from placement_lite.quota import limits as lim

P = t.projects


@dataclass
class Line:
    """One project's figures for one resource."""
    project: str
    name: Optional[str]
    # The limit that applies (a child's is capped by its parent's under
    # strict_two_level); None: unlimited.
    limit: Optional[int]
    # "override" (a project limit), "default" (the registered limit) or
    # "none" (nothing registered).
    source: str
    usage: float
    over: bool = False

    @property
    def headroom(self) -> Optional[float]:
        return None if self.limit is None else models.num(self.limit - self.usage)


@dataclass
class Resource:
    name: str
    lines: list  # the root's Line first, then each child's
    # Strict two-level: the whole tree's usage against the root's limit.
    tree_usage: float = 0
    tree_limit: Optional[int] = None
    tree_over: bool = False

    @property
    def tree_headroom(self) -> Optional[float]:
        return (None if self.tree_limit is None
                else models.num(self.tree_limit - self.tree_usage))


@dataclass
class Tree:
    root: projects.Project
    children: list
    resources: list = field(default_factory=list)

    @property
    def over(self) -> bool:
        return any(r.tree_over or any(line.over for line in r.lines)
                   for r in self.resources)


def _limit(value: Optional[int]) -> Optional[int]:
    return None if lim.is_unlimited(value) else value


def _members(conn: Connection, roots: list[projects.Project]) -> dict[int, list]:
    """root id -> the projects below it (any depth), one query per level."""
    below: dict[int, list] = {r.id: [] for r in roots}
    frontier = {r.id: r.id for r in roots}  # project id -> its root id
    while frontier:
        rows = projects.by_ids(conn, conn.scalars(
            select(P.c.id).where(P.c.parent_id.in_(list(frontier)))))
        nxt = {}
        for p in sorted(rows.values(), key=lambda p: p.external_id):
            root = frontier[p.parent_id]
            below[root].append(p)
            nxt[p.id] = root
        frontier = nxt
    return below


def evaluate(conn: Connection, settings, trees: list[Tree]) -> None:
    """Fill each tree's resources: limits, usage, headroom, what is over."""
    if not trees:
        return
    ctx = enforce.context_from(settings)
    model = models.get_model(enforce.current(conn, settings).model)
    scope = lim.resolve_scope(conn, ctx.service_type, ctx.region_id)
    ids = [p.id for tr in trees for p in [tr.root, *tr.children]]
    if scope is None and not ctx.unregistered_is_zero:
        return
    service_id, rkey = scope if scope else (None, "")
    defaults = lim.registered_defaults(conn, service_id, rkey) if service_id else {}
    explicit = (lim.explicit_limits(conn, service_id, rkey, ids)
                if service_id else {})
    names = set(defaults) | {n for (_o, n) in explicit}
    if ctx.unregistered_is_zero:
        names |= usage.names_in_use(conn, ids)
    names = sorted(n for n in names if usage.source(n, ctx.aliases))
    used = usage.usage(conn, ids, names, ctx.aliases)
    targets = [models.Target(p.external_id, p, tr.root.id,
                             [tr.root.id] + [c.id for c in tr.children],
                             tr.root.external_id)
               for tr in trees for p in [tr.root, *tr.children]]
    over = {(o.resource_name, o.project_id, o.tree)
            for o in model.over_limits(conn, ctx, targets)}

    def own(pid, name):
        if (pid, name) in explicit:
            return explicit[(pid, name)], "override"
        if name in defaults:
            return defaults[name], "default"
        return (0, "default") if ctx.unregistered_is_zero else (None, "none")

    for tr in trees:
        for name in names:
            root_limit, root_src = own(tr.root.id, name)
            root_used = used.get(name, {}).get(tr.root.id, 0)
            lines = [Line(tr.root.external_id, tr.root.name, _limit(root_limit),
                          root_src, models.num(root_used),
                          (name, tr.root.external_id, False) in over)]
            tree_used = root_used
            for child in tr.children:
                value, src = own(child.id, name)
                if model.uses_tree:
                    value = lim.min_limit(value, root_limit)
                c_used = used.get(name, {}).get(child.id, 0)
                tree_used += c_used
                lines.append(Line(child.external_id, child.name, _limit(value), src,
                                  models.num(c_used),
                                  (name, child.external_id, False) in over))
            res = Resource(name, lines, models.num(tree_used))
            if model.uses_tree:
                res.tree_limit = _limit(root_limit)
                res.tree_over = (name, tr.root.external_id, True) in over
            tr.resources.append(res)


def _roots_query(search: Optional[str]):
    q = select(P.c.id).where(P.c.parent_id.is_(None), P.c.is_domain.is_(False))
    if search:
        q = q.where(P.c.external_id.contains(search, autoescape=True)
                    | P.c.name.contains(search, autoescape=True))
    return q


def count_trees(conn: Connection, search: Optional[str] = None) -> int:
    return int(conn.scalar(select(func.count()).select_from(
        _roots_query(search).subquery())))


def tree_page(conn: Connection, settings, search: Optional[str] = None,
              offset: int = 0, limit: int = 25) -> list[Tree]:
    """One page of project trees (top-level projects by id), evaluated."""
    root_ids = list(conn.scalars(_roots_query(search).order_by(P.c.external_id)
                                 .offset(offset).limit(limit)))
    found = projects.by_ids(conn, root_ids)
    roots = [found[i] for i in root_ids]
    below = _members(conn, roots)
    trees = [Tree(r, below[r.id]) for r in roots]
    evaluate(conn, settings, trees)
    return trees


def tree_of(conn: Connection, settings, external_id: str) -> Tree:
    """The evaluated tree holding project `external_id` (ProjectNotFound
    if there is none)."""
    project = projects.get(conn, external_id)
    root_id = projects.root_of(conn, project.id)
    root = project if root_id == project.id else projects.by_ids(
        conn, [root_id])[root_id]
    tree = Tree(root, _members(conn, [root])[root.id])
    evaluate(conn, settings, [tree])
    return tree


@dataclass
class LeasePage:
    project: str
    total: int
    entries: list
    balance: dict


def lease_ledger(conn: Connection, external_id: str, offset: int = 0,
                 limit: int = 50) -> LeasePage:
    """A page of a project's lease ledger (newest first) and its balance
    per resource, in hours."""
    project = projects.get(conn, external_id)
    lg = t.lease_ledger
    balance = {r.resource_name: models.num(int(r.s or 0) / 3600.0) for r in conn.execute(
        select(lg.c.resource_name, func.sum(lg.c.unit_seconds).label("s"))
        .where(lg.c.project_id == project.id).group_by(lg.c.resource_name)
        .order_by(lg.c.resource_name))}
    total = int(conn.scalar(select(func.count()).select_from(lg)
                            .where(lg.c.project_id == project.id)))
    rows = conn.execute(select(lg).where(lg.c.project_id == project.id)
                        .order_by(lg.c.id.desc()).offset(offset).limit(limit))
    entries = [{"id": r.id, "resource_name": r.resource_name,
                "lease_id": r.lease_id, "lease_name": r.lease_name,
                "event": r.event, "hours": models.num(r.unit_seconds / 3600.0),
                "reason": r.reason, "created_at": r.created_at}
               for r in rows]
    return LeasePage(external_id, total, entries, balance)


@dataclass(frozen=True)
class ProjectUse:
    project: str
    resource: str
    usage: float
    limit: int


@dataclass
class Nearest:
    """The pairs closest to their limits: (project, resource), and under a
    model that limits trees, (top-level project, resource) for whole trees."""
    projects: list = field(default_factory=list)
    trees: list = field(default_factory=list)


def _ratio_key(u: ProjectUse):
    return (-(u.usage / u.limit if u.limit else float("inf")
              if u.usage else 0), u.project, u.resource)


def _roots(conn: Connection, ids: set[int]) -> list[projects.Project]:
    """The top-level projects above `ids`, one query per level (so the
    cost follows the depth, not the number of projects)."""
    roots: set[int] = set()
    frontier = set(ids)
    while frontier:
        rows = conn.execute(select(P.c.id, P.c.parent_id)
                            .where(P.c.id.in_(sorted(frontier))))
        frontier = set()
        for pid, parent in rows:
            if parent is None:
                roots.add(pid)
            else:
                frontier.add(parent)
    found = projects.by_ids(conn, roots)
    return [found[i] for i in sorted(roots, key=lambda i: found[i].external_id)]


def nearest(conn: Connection, settings, top: int) -> Nearest:
    """The `top` (project, resource) pairs with the highest usage against
    the limit enforcement applies to them, and the `top` trees likewise,
    among resources counted by class (allocations).

    The limits come from evaluate(), the function the console and the
    report read, so a gauge can never show a limit that claims are not
    held to (issue 26: a child's default above its parent's lowered limit).
    Only the trees holding a project that uses something are evaluated, in
    a fixed number of grouped queries per tree level."""
    if top <= 0:
        return Nearest()
    ctx = enforce.context_from(settings)
    scope = lim.resolve_scope(conn, ctx.service_type, ctx.region_id)
    if scope is None:
        return Nearest()
    service_id, rkey = scope
    defaults = lim.registered_defaults(conn, service_id, rkey)
    PL = t.project_limits
    # Names with a limit registered in scope; an unregistered name at zero
    # (unregistered_is_zero) is left out, as it always was here.
    limited = set(defaults) | set(conn.scalars(
        select(PL.c.resource_name).distinct()
        .where(PL.c.service_id == service_id, PL.c.region_key == rkey)))
    by_class: dict[str, list[str]] = {}
    for name in limited:
        src = usage.source(name, ctx.aliases)
        if src and src[0] == "class":
            by_class.setdefault(src[1], []).append(name)
    if not by_class:
        return Nearest()
    # From the usage summary every allocation write keeps (class ids
    # there are real classes; consumer counts use a negative id).
    s, rc = t.usage_summary, t.resource_classes
    users = set(conn.scalars(
        select(s.c.project_id)
        .select_from(s.join(rc, rc.c.id == s.c.resource_class_id))
        .where(rc.c.name.in_(sorted(by_class)))
        .group_by(s.c.project_id)
        # Rows whose holders all left stay at 0; they hold nothing.
        .having(func.sum(s.c.amount) != 0)))
    if not users:
        return Nearest()
    roots = _roots(conn, users)
    below = _members(conn, roots)
    trees = [Tree(r, below[r.id]) for r in roots]
    evaluate(conn, settings, trees)
    wanted = {n for names in by_class.values() for n in names}
    found, whole = [], []
    for tr in trees:
        for res in tr.resources:
            if res.name not in wanted:
                continue
            for line in res.lines:
                if line.usage and line.limit is not None:
                    found.append(ProjectUse(line.project, res.name,
                                            int(line.usage), line.limit))
            if res.tree_usage and res.tree_limit is not None:
                whole.append(ProjectUse(tr.root.external_id, res.name,
                                        int(res.tree_usage), res.tree_limit))
    found.sort(key=_ratio_key)
    whole.sort(key=_ratio_key)
    return Nearest(found[:top], whole[:top])


def nearest_limits(conn: Connection, settings, top: int) -> list[ProjectUse]:
    """The `top` (project, resource) pairs of nearest()."""
    return nearest(conn, settings, top).projects
