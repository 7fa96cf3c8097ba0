"""Enforcement models: flat and strict_two_level.

A model answers two questions:
- at limit-write time, is this set of limits consistent with the tree?
  (validate_limits)
- at claim time, is a project (and its tree) within its limits: as usage
  stands (over_limits), with deltas added (over_limits_with), or after a
  write compared with the baseline read before it (claim_baseline, then
  over_limits_grown)? The last also holds the limits at every instant
  from now on, counting what the projects have reserved (booked.py).

Limits are integers where -1 means unlimited, in every comparison here.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Mapping, Optional

from sqlalchemy import select
from sqlalchemy.engine import Connection

from placement_lite import errors
from placement_lite.db import tables as t
from placement_lite.quota import booked
from placement_lite.quota import limits as lim
from placement_lite.quota import projects, usage


@dataclass
class Context:
    """What enforcement reads besides the database: the settings' part."""
    service_type: str = "placement"
    region_id: Optional[str] = None
    aliases: Mapping[str, str] = field(default_factory=dict)
    unregistered_is_zero: bool = False


def num(x: float):
    """Whole numbers as ints in JSON; reserved hours keep a few decimals."""
    return int(x) if float(x).is_integer() else round(x, 6)


@dataclass(kw_only=True)
class Over:
    resource_name: str
    limit: int
    current_usage: float
    delta: float
    project_id: str
    # True when the whole tree's usage, not the project's own, is over.
    tree: bool = False
    # Set when reservations counted: the first instant over the limit
    # (seconds since the epoch) and what was reserved there beside usage.
    reserved: float = 0
    at: Optional[int] = None

    def as_dict(self) -> dict:
        out = {"resource_name": self.resource_name, "limit": self.limit,
               "current_usage": num(self.current_usage),
               "delta": num(self.delta), "project_id": self.project_id,
               "scope": "tree" if self.tree else "project"}
        if self.at is not None:
            out.update(reserved=num(self.reserved), at=booked.iso(self.at))
        return out


class Target:
    """A project a check is about: its row (None if never seen), its tree."""

    def __init__(self, external_id: str, project: Optional[projects.Project],
                 root_id: Optional[int], tree: list[int],
                 root_external_id: Optional[str] = None):
        self.external_id = external_id
        self.project = project
        self.root_id = root_id
        self.tree = tree
        self.root_external_id = root_external_id or external_id

    @property
    def id(self) -> Optional[int]:
        return self.project.id if self.project else None


@dataclass(frozen=True, kw_only=True)
class Limits:
    """The limits in scope, read once per decision: registered defaults by
    name and project limits by (project id, name)."""
    defaults: Mapping[str, int]
    explicit: Mapping[tuple[int, str], int]
    unregistered_is_zero: bool = False

    def names(self) -> set[str]:
        return set(self.defaults) | {n for (_o, n) in self.explicit}

    def own(self, project_id: Optional[int], name: str) -> Optional[int]:
        """The project's own limit: its override, else the default (None:
        nothing registered, so nothing limits it)."""
        if project_id is not None and (project_id, name) in self.explicit:
            return self.explicit[(project_id, name)]
        if name in self.defaults:
            return self.defaults[name]
        return 0 if self.unregistered_is_zero else None


@dataclass(frozen=True, kw_only=True)
class Figures:
    """One resource's usage per project id, and what a change adds to it
    per project id."""
    used: Mapping[int, float]
    added: Mapping[int, float] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Baseline:
    """A claim check's first phase, read with the trees locked and before
    the write: the limits in scope (None: nothing is), the names they
    limit, the usage of every project in the targets' trees and what
    those projects have reserved from now on."""
    targets: list[Target]
    limits: Optional[Limits]
    names: frozenset[str] = frozenset()
    used: Mapping[str, Mapping[int, float]] = field(default_factory=dict)
    booked: booked.Booked = booked.NONE


def _project_ids(targets: list[Target]) -> set[int]:
    return {pid for tg in targets for pid in tg.tree}


_RESOLVE = object()


class Model(abc.ABC):
    name = ""
    description = ""
    max_depth: Optional[int] = None
    uses_tree = False

    def validate_limits(self, conn: Connection, rows: list[dict]) -> None:
        """Raise errors.InvalidLimit if the stored limits break the model."""

    # Claim time -------------------------------------------------------------

    def targets(self, conn: Connection, external_ids) -> list[Target]:
        out = []
        for ext in sorted(set(external_ids)):
            project = projects.find(conn, ext)
            if project is None:
                out.append(Target(ext, None, None, []))
                continue
            root = (projects.root_of(conn, project.id) if self.uses_tree
                    else project.id)
            tree = (projects.descendants(conn, root) if self.uses_tree
                    else [project.id])
            root_ext = (projects.by_ids(conn, [root])[root].external_id
                        if root != project.id else ext)
            out.append(Target(ext, project, root, tree, root_ext))
        return out

    @staticmethod
    def limits_in_scope(conn: Connection, ctx: Context, project_ids,
                        only: Optional[set[str]] = None,
                        scope=_RESOLVE) -> Optional[Limits]:
        """The limits of these projects in the configured service and
        region (of the names in `only`, if given); None when that service
        is not registered and unregistered resources are not zero.
        `scope`: the scope already resolved, when the caller has it."""
        if scope is _RESOLVE:
            scope = lim.resolve_scope(conn, ctx.service_type, ctx.region_id)
        if scope is None and not ctx.unregistered_is_zero:
            return None
        if scope is None:
            return Limits(defaults={}, explicit={},
                          unregistered_is_zero=ctx.unregistered_is_zero)
        service_id, rkey = scope
        return Limits(
            defaults=lim.registered_defaults(conn, service_id, rkey, only),
            explicit=lim.explicit_limits(conn, service_id, rkey, project_ids,
                                         only),
            unregistered_is_zero=ctx.unregistered_is_zero)

    @staticmethod
    def _counted(conn: Connection, ctx: Context, limits: Limits,
                 project_ids) -> set[str]:
        """The names a check without deltas looks at: every limited name,
        and with unregistered resources at zero, every name in use."""
        names = limits.names()
        if ctx.unregistered_is_zero:
            names |= usage.names_in_use(conn, project_ids)
        return {n for n in names if usage.source(n, ctx.aliases)}

    def over_limits(self, conn: Connection, ctx: Context,
                    targets: list[Target]) -> list[Over]:
        """What is over its limit for these targets, as usage now stands."""
        ids = _project_ids(targets)
        limits = self.limits_in_scope(conn, ctx, ids)
        if limits is None:
            return []
        names = self._counted(conn, ctx, limits, ids)
        used = usage.usage(conn, ids, names, ctx.aliases)
        return self._judge(targets, names, limits,
                           lambda name, _target: Figures(used=used.get(name, {})))

    def over_limits_with(self, conn: Connection, ctx: Context,
                         targets: list[Target],
                         deltas: Mapping[str, float]) -> list[Over]:
        """What would be over its limit if each target's own usage grew
        by `deltas` (a quota check: nothing is written), at every instant
        from now on beside what the targets' trees have reserved."""
        ids = _project_ids(targets)
        scope, any_booked = booked.scope(conn, ctx.service_type,
                                         ctx.region_id, ids)
        limits = self.limits_in_scope(conn, ctx, ids, only=set(deltas),
                                      scope=scope)
        if limits is None or not deltas:
            return []
        used = usage.usage(conn, ids, deltas, ctx.aliases)
        held = (booked.read(conn, ids) if any_booked is not False and
                booked.matters(deltas, ctx.aliases, False) else booked.NONE)
        if not held.empty:
            return booked.judge_added(targets, deltas, self._checker(limits),
                                      used=used, held=held, aliases=ctx.aliases)
        return self._judge(targets, set(deltas), limits, lambda name, target: (
            Figures(used=used.get(name, {}),
                    added={target.id: deltas.get(name, 0)})))

    def claim_baseline(self, conn: Connection, ctx: Context,
                       targets: list[Target], reserves: bool = False
                       ) -> Baseline:
        """A claim check's first phase: run with the targets' trees locked,
        before the write, in the write's transaction. Whether the trees
        hold reservations is asked in the scope's round trip, so a tree
        without any pays no statement for them; a reservation write
        (`reserves`) reads them without asking."""
        ids = _project_ids(targets)
        scope, any_booked = booked.scope(conn, ctx.service_type,
                                         ctx.region_id, () if reserves else ids)
        limits = self.limits_in_scope(conn, ctx, ids, scope=scope)
        if limits is None:
            return Baseline(targets=targets, limits=None)
        names = self._counted(conn, ctx, limits, ids)
        held = (booked.read(conn, ids) if any_booked is not False
                and booked.matters(names, ctx.aliases, ctx.unregistered_is_zero)
                else booked.NONE)
        return Baseline(targets=targets, limits=limits, names=frozenset(names),
                        used=usage.usage(conn, ids, names, ctx.aliases),
                        booked=held)

    def over_limits_grown(self, conn: Connection, ctx: Context,
                          baseline: Baseline,
                          targets: Optional[list[Target]] = None,
                          reserves: bool = False) -> list[Over]:
        """A claim check's second phase, after the write in the same
        transaction: what the write took over its limit, or further over,
        at any instant from now on. The write's change is usage (plus
        what is reserved, at each instant) now less the baseline; a write
        that leaves a project over, but less so or no more so, passes.

        `targets` replaces the baseline's when projects the write created
        joined them; their limits are read again, their baseline is 0.
        `reserves`: the write changed reservations, not allocations: the
        reservations are read again and usage is not (a claim cannot
        change reservations, nor a reservation usage; both take the lock)."""
        if baseline.limits is None:
            return []
        limits = baseline.limits
        names = set(baseline.names)
        if targets is None:
            targets = baseline.targets
        else:
            limits = self.limits_in_scope(conn, ctx, _project_ids(targets))
        ids = _project_ids(targets)
        held, used_after = baseline.booked, baseline.used
        if reserves and booked.matters(names, ctx.aliases,
                                       ctx.unregistered_is_zero):
            held = booked.read(conn, ids)
            names |= held.names() if ctx.unregistered_is_zero else set()
        elif not reserves:
            if ctx.unregistered_is_zero:
                # A name first used by this write was at 0 before it.
                names |= self._counted(conn, ctx, limits, ids)
            used_after = usage.usage(conn, ids, names, ctx.aliases)
        return booked.judge(targets, names, self._checker(limits),
                            used_before=baseline.used, used_after=used_after,
                            before=baseline.booked, after=held,
                            aliases=ctx.aliases)

    def over_baseline_with(self, baseline: Baseline,
                           deltas: Mapping[str, float],
                           project_id: str) -> list[Over]:
        """What would be over its limit if one of the baseline's targets
        grew by `deltas`, judged on what the baseline read (no statement):
        a further decision in a write that holds the trees' locks. Names
        the baseline did not read count as unused."""
        targets = [tg for tg in baseline.targets if tg.external_id == project_id]
        if baseline.limits is None or not deltas:
            return []
        return self._judge(targets, set(deltas), baseline.limits,
                           lambda name, target: Figures(
                               used=baseline.used.get(name, {}),
                               added={target.id: deltas[name]}))

    def _checker(self, limits: Limits) -> booked.Check:
        return lambda target, name, used, added: self._check(
            target, name, limits=limits, figures=Figures(used=used, added=added))

    def _judge(self, targets: list[Target], names, limits: Limits,
               figures) -> list[Over]:
        """Each target and name through the model's rule, duplicates (a
        tree seen from two of its projects) once."""
        over: dict[tuple, Over] = {}
        for target in targets:
            for name in sorted(names):
                for o in self._check(target, name, limits=limits,
                                     figures=figures(name, target)):
                    over.setdefault((o.resource_name, o.project_id, o.tree), o)
        return list(over.values())

    @abc.abstractmethod
    def _check(self, target: Target, name: str, *, limits: Limits,
               figures: Figures) -> list[Over]:
        """The Over entries for one project and resource."""


def _over(value: float, limit: Optional[int]) -> bool:
    return not lim.is_unlimited(limit) and value > limit


class Flat(Model):
    name = "flat"
    description = ("Limits apply to each project on its own: a project's "
                   "usage may not exceed its limit, or the registered default "
                   "when it has none. The project hierarchy is not considered.")

    def _check(self, target, name, *, limits, figures):
        limit = limits.own(target.id, name)
        current = figures.used.get(target.id, 0) if target.id is not None else 0
        delta = figures.added.get(target.id, 0)
        if _over(current + delta, limit):
            return [Over(resource_name=name, limit=limit, current_usage=current,
                         delta=delta, project_id=target.external_id)]
        return []


class StrictTwoLevel(Model):
    name = "strict_two_level"
    description = ("Project trees are at most two levels deep. A child's limit "
                   "never exceeds its parent's (a child at the default is "
                   "capped at its parent's limit); the children's limits may "
                   "add up to more than the parent's, but the usage of the "
                   "whole tree never exceeds the top-level project's limit.")
    max_depth = 2
    uses_tree = True

    def _check(self, target, name, *, limits, figures):
        own = limits.own(target.id, name)
        if target.project is None or target.root_id == target.id:
            root_limit = own
            limit = own
        else:
            root_limit = limits.own(target.root_id, name)
            limit = lim.min_limit(own, root_limit)
        used, added = figures.used, figures.added
        current = used.get(target.id, 0) if target.id is not None else 0
        delta = added.get(target.id, 0)
        found = []
        if _over(current + delta, limit):
            found.append(Over(resource_name=name, limit=limit,
                              current_usage=current, delta=delta,
                              project_id=target.external_id))
        if target.project is not None:
            tree_used = sum(used.get(pid, 0) for pid in target.tree)
            tree_delta = sum(added.get(pid, 0) for pid in target.tree)
            # A root with nothing below it was already judged above.
            if _over(tree_used + tree_delta, root_limit) and (
                    target.root_id != target.id or tree_used != current
                    or tree_delta != delta):
                found.append(Over(resource_name=name, limit=root_limit,
                                  current_usage=tree_used, delta=tree_delta,
                                  project_id=target.root_external_id, tree=True))
        return found

    def validate_limits(self, conn: Connection, rows: list[dict]) -> None:
        for row in rows:
            self._validate_one(conn, row)

    def _validate_one(self, conn: Connection, row: dict) -> None:
        service_id, rkey, name = (row["service_id"], row["region_key"],
                                  row["resource_name"])
        default = lim.registered_defaults(conn, service_id, rkey, [name]).get(name)
        owner = projects.by_ids(conn, [row["owner_id"]])[row["owner_id"]]
        value = row["resource_limit"]

        def explicit(owner_ids):
            return {o: v for (o, _n), v in lim.explicit_limits(
                conn, service_id, rkey, owner_ids, [name]).items()}

        def describe(p):
            return f"{'domain' if p.is_domain else 'project'} {p.external_id}"

        # Upwards: the owner's parent (a project, else the domain when the
        # domain has a limit of its own).
        parent = None
        parent_limit = None
        if not owner.is_domain and owner.parent_id is not None:
            parent = projects.by_ids(conn, [owner.parent_id])[owner.parent_id]
            parent_limit = explicit([parent.id]).get(parent.id, default)
        elif not owner.is_domain and owner.domain_id is not None:
            found = explicit([owner.domain_id])
            if owner.domain_id in found:
                parent = projects.by_ids(conn, [owner.domain_id])[owner.domain_id]
                parent_limit = found[owner.domain_id]
        if parent is not None and lim.exceeds(value, parent_limit):
            raise errors.InvalidLimit(
                f"Invalid resource limit: {describe(owner)} would have a limit "
                f"of {value} for {name}, above its parent {describe(parent)}'s "
                f"limit of {parent_limit}. Raise the parent's limit first or "
                "choose a lower value (-1, unlimited, is above any limit).")
        # Downwards: children with limits of their own.
        if owner.is_domain:
            child_ids = list(conn.scalars(select(t.projects.c.id).where(
                t.projects.c.domain_id == owner.id,
                t.projects.c.parent_id.is_(None))))
        else:
            child_ids = projects.children(conn, owner.id)
        for child_id, child_limit in sorted(explicit(child_ids).items()):
            if lim.exceeds(child_limit, value):
                child = projects.by_ids(conn, [child_id])[child_id]
                raise errors.InvalidLimit(
                    f"Invalid resource limit: {describe(owner)} would have a "
                    f"limit of {value} for {name}, below the limit of "
                    f"{child_limit} of its child {describe(child)}. Lower the "
                    "child's limit first.")


MODELS = {m.name: m for m in (Flat, StrictTwoLevel)}


def get_model(name: str) -> Model:
    try:
        return MODELS[name]()
    except KeyError:
        raise ValueError(f"unknown quota model {name!r}; choose one of "
                         f"{', '.join(sorted(MODELS))}")
