"""Server-side enforcement: the claim check and the explicit quota check.

The claim check runs in two phases inside the transaction that writes the
allocations, on its one connection: before the write it locks every tree
the write may change and reads their usage, which then includes every
claim in those trees that committed before the lock was granted; after
the write it reads usage again, and the difference is the claim's own
change. A refused claim raises OverLimit and the whole transaction rolls
back, so no recheck step is ever needed, and a claim needs no second
pooled connection.

Whether quota is enforced, and under which model, is the deployment's
choice, not one process's: it is one row in the database (written on the
first start from that process's settings, or by `placement-lite quota
enforcement --set`), and every check reads it in the transaction it
decides in. Two processes started with different flags therefore give the
same answers; start-up refuses a process whose explicit settings disagree
with the row, so the difference does not go unnoticed either.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Optional

from sqlalchemy import func, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from placement_lite import errors
from placement_lite.db import tables as t
from placement_lite.quota import limits as lim
from placement_lite.quota import models, projects, usage

_ROW = 1
FIRST_START = "first start"
ADMIN = "admin command"


@dataclass(frozen=True)
class Enforcement:
    enforce: bool
    model: str
    set_by: str = ""

    def summary(self) -> str:
        """`on, model flat` / `off, model flat`, for start-up lines and messages."""
        return f"{'on' if self.enforce else 'off'}, model {self.model}"

    def as_dict(self) -> dict:
        return {"enforced": self.enforce, "model": self.model}


class EnforcementMismatch(Exception):
    """A process was started with settings that contradict the stored ones."""


# Built once: every allocation write reads it.
_STORED = select(t.quota_enforcement.c.enforce, t.quota_enforcement.c.model,
                 t.quota_enforcement.c.set_by).where(t.quota_enforcement.c.id == _ROW)


def stored(conn: Connection) -> Optional[Enforcement]:
    """The deployment's enforcement, or None if no process has set it yet."""
    row = conn.execute(_STORED).first()
    return Enforcement(bool(row.enforce), row.model, row.set_by) if row else None


def from_settings(settings) -> Enforcement:
    return Enforcement(bool(settings.quota_enforce), settings.quota_model, FIRST_START)


def current(conn: Connection, settings) -> Enforcement:
    """What is in force: the stored row; the settings only where none is
    stored (a database no process has started on: library use, tests)."""
    return stored(conn) or from_settings(settings)


def reconcile(db, settings, strict: bool = True) -> Enforcement:
    """At start-up: store the settings' enforcement if none is stored yet;
    otherwise, with `strict`, refuse settings the operator chose explicitly
    that say otherwise. Returns what is in force."""
    wanted = from_settings(settings)

    def work(conn):
        found = stored(conn)
        if found is not None:
            return found
        try:
            with conn.begin_nested():
                conn.execute(insert(t.quota_enforcement).values(
                    id=_ROW, enforce=wanted.enforce, model=wanted.model,
                    set_by=FIRST_START))
        except IntegrityError:
            # Another process started at the same moment and stored its
            # own; read that one in a new transaction.
            raise errors.RetryableError("quota enforcement stored concurrently")
        return wanted

    found = db.run_write(work)
    if strict:
        _refuse_disagreement(settings, found)
    return found


def _refuse_disagreement(settings, found: Enforcement) -> None:
    problems = []
    if settings.explicit("quota_enforce") and bool(settings.quota_enforce) != found.enforce:
        problems.append(
            f"{settings.describe('quota_enforce')} asks for quota enforcement "
            f"{'on' if settings.quota_enforce else 'off'}")
    if settings.explicit("quota_model") and settings.quota_model != found.model:
        problems.append(f"{settings.describe('quota_model')} asks for the "
                        f"{settings.quota_model} model")
    if problems:
        want_on = settings.quota_enforce if settings.explicit("quota_enforce") \
            else found.enforce
        want_model = settings.quota_model if settings.explicit("quota_model") \
            else found.model
        raise EnforcementMismatch(
            f"{' and '.join(problems)}, but this deployment's database has "
            f"quota enforcement {found.summary()} (set by {found.set_by}). "
            "Every process must answer alike: drop the setting to follow "
            "the deployment, or change the deployment with `placement-lite "
            f"quota enforcement --set {'on' if want_on else 'off'} --model "
            f"{want_model}`.")


def change(db, enforce: Optional[bool] = None,
           model: Optional[str] = None) -> tuple[Enforcement, Enforcement]:
    """The admin action: set the deployment's enforcement and/or model.
    Returns (before, after). A model the stored projects and limits break
    (trees too deep, a child's limit above its parent's) is refused."""
    if model is not None:
        models.get_model(model)  # ValueError naming the choices

    def work(conn):
        before = stored(conn)
        base = before or Enforcement(False, "flat", FIRST_START)
        after = Enforcement(base.enforce if enforce is None else enforce,
                            base.model if model is None else model, ADMIN)
        if after.model != base.model:
            _fits(conn, models.get_model(after.model))
        E = t.quota_enforcement
        values = dict(enforce=after.enforce, model=after.model, set_by=ADMIN)
        if before is None:
            conn.execute(insert(E).values(id=_ROW, **values))
        else:
            conn.execute(update(E).where(E.c.id == _ROW).values(
                updated_at=func.now(), **values))
        return before or base, after

    return db.run_write(work)


def _fits(conn: Connection, model: models.Model) -> None:
    """Raise errors.ModelDoesNotFit if the stored tree or limits break `model`."""
    if model.max_depth is not None:
        P = t.projects
        for row in conn.execute(select(P.c.id).where(
                P.c.is_domain.is_(False), P.c.parent_id.is_not(None))):
            project = projects.by_ids(conn, [row.id])[row.id]
            level = projects.depth(conn, project)
            if level > model.max_depth:
                raise errors.ModelDoesNotFit(
                    f"Project {project.external_id} is at depth {level}; the "
                    f"{model.name} model allows project trees at most "
                    f"{model.max_depth} levels deep. Move or delete it first.")
    rows = [dict(r._mapping) for r in conn.execute(select(t.project_limits))]
    try:
        model.validate_limits(conn, rows)
    except errors.InvalidLimit as exc:
        raise errors.ModelDoesNotFit(
            f"The stored limits do not fit the {model.name} model: {exc}") from None


def context_from(settings) -> models.Context:
    return models.Context(
        service_type=settings.quota_service_type,
        region_id=settings.quota_region_id,
        aliases=dict(settings.quota_resource_usage or {}),
        unregistered_is_zero=settings.quota_unregistered_is_zero)


def describe(over: list[models.Over]) -> str:
    parts = []
    for o in over:
        whose = (f"project tree {o.project_id}" if o.tree
                 else f"project {o.project_id}")
        shown = o.as_dict()
        total = models.num(o.current_usage + o.reserved + o.delta)
        if o.at is None:
            parts.append(f"{o.resource_name} for {whose} would be {total}, "
                         f"over its limit of {o.limit} (in use "
                         f"{shown['current_usage']}, requested {shown['delta']})")
            continue
        parts.append(f"{o.resource_name} for {whose} would be {total} from "
                     f"{shown['at']}, over its limit of {o.limit} (in use "
                     f"{shown['current_usage']}, reserved then "
                     f"{shown['reserved']}, requested {shown['delta']})")
    return "Quota exceeded: " + "; ".join(parts) + "."


def refuse(over: list[models.Over]) -> None:
    if over:
        raise errors.OverLimit(describe(over), over=[o.as_dict() for o in over])


class Enforcer:
    """Quota decisions for one process: built once by the app and shared
    by the claim check, POST /quota/check and the lease budget. It holds
    no per-decision state, so threads share it; what is enforced, and
    under which model, is read from the database in each decision's
    transaction.

    As the allocation writers' claim check it runs in two phases, in the
    write's own transaction and connection (ledger.allocations.ClaimCheck):
    before_write locks the trees of the projects the write may change and
    reads their usage; the check it returns runs after the write and
    refuses (OverLimit, rolling the whole write back) what the write took
    over a limit. A second claim in a tree waits for the lock, so it reads
    its baseline only once the first has committed.
    """

    def __init__(self, settings):
        self.settings = settings
        # The settings' model: what a database nobody has started on is
        # checked with. Decisions use model_for(conn), the deployment's.
        self.model = models.get_model(settings.quota_model)
        self.ctx = context_from(settings)

    def in_force(self, conn: Connection) -> Enforcement:
        return current(conn, self.settings)

    def model_for(self, conn: Connection) -> models.Model:
        return self._model(self.in_force(conn).model)

    def _model(self, name: str) -> models.Model:
        return self.model if name == self.model.name else models.get_model(name)

    # POST /quota/check and the lease budget -----------------------------------

    def check_deltas(self, conn: Connection, project_id: str,
                     deltas: Mapping[str, float]) -> None:
        """Would a claim adding `deltas` to the project's usage be granted?
        With enforcement off, claims are not checked, so neither is this."""
        usage.require_sources(deltas, self.ctx.aliases)
        enforcement = self.in_force(conn)
        if not enforcement.enforce:
            return
        model = self._model(enforcement.model)
        refuse(model.over_limits_with(conn, self.ctx,
                                      model.targets(conn, [project_id]),
                                      dict(deltas)))

    def locked_targets(self, conn: Connection,
                       project_ids: Iterable[str]) -> list[models.Target]:
        """The targets, read again once their trees are locked, for a
        decision that writes: the tree cannot change under it."""
        model = self.model_for(conn)
        self._lock(conn, model, project_ids)
        return model.targets(conn, project_ids)

    def over_if_added(self, conn: Connection, targets: list[models.Target],
                      deltas: Mapping[str, float]) -> list[models.Over]:
        """What would be over its limit, under the deployment's model, if
        each target's usage grew by `deltas`; whether that refuses
        anything is the caller's to say."""
        return self.model_for(conn).over_limits_with(conn, self.ctx, targets,
                                                     deltas)

    # The claim check ------------------------------------------------------------

    def before_write(self, conn: Connection, project_ids: Iterable[str]
                     ) -> Callable[[Connection], None]:
        """Phase one, before the write: lock the trees and read the
        baseline. Returns phase two, to run after the write."""
        return self.guard(conn, project_ids)

    def guard(self, conn: Connection, project_ids: Iterable[str],
              reserves: bool = False) -> "AfterWrite":
        """before_write, for a write of allocations or, with `reserves`,
        of reservations (whose windows phase two then reads again)."""
        project_ids = tuple(sorted({p for p in project_ids or () if p}))
        enforcement = self.in_force(conn)
        if not project_ids or not enforcement.enforce:
            return AfterWrite(self, project_ids)
        model = self._model(enforcement.model)
        targets = self._lock(conn, model, project_ids)
        return AfterWrite(self, project_ids, model,
                          model.claim_baseline(conn, self.ctx, targets,
                                               reserves),
                          reserves)

    @staticmethod
    def _lock(conn: Connection, model: models.Model,
              project_ids: Iterable[str]) -> list[models.Target]:
        """The targets as read before their trees' locks were taken."""
        targets = model.targets(conn, project_ids)
        projects.lock_trees(conn, [tg.root_id for tg in targets
                                   if tg.root_id is not None])
        return targets


@dataclass(frozen=True)
class AfterWrite:
    """A decision's second phase, called after the write on the same
    connection, and what its first phase read. `model` and `baseline` are
    None when nothing is enforced: the call then checks nothing."""
    enforcer: Enforcer
    project_ids: tuple[str, ...] = ()
    model: Optional[models.Model] = None
    baseline: Optional[models.Baseline] = None
    reserves: bool = False

    def __call__(self, conn: Connection) -> None:
        if self.model is None:
            return
        joined = None
        if not all(tg.project is not None for tg in self.baseline.targets):
            # A project first seen in this write now exists: it joins the
            # check, its tree locked too, with nothing used before.
            joined = self.enforcer._lock(conn, self.model, self.project_ids)
        refuse(self.model.over_limits_grown(conn, self.enforcer.ctx,
                                            self.baseline, joined,
                                            reserves=self.reserves))
