"""Server-side enforcement: the claim check and the explicit quota check.

The claim check runs inside the transaction that wrote the allocations,
after they are written and before commit. It first locks every tree it
touches, then reads usage, which then includes this claim and every claim
in the same tree that committed before the lock was granted, and the
committed usage (through a second connection), which is the usage before
this claim. A refused claim raises OverLimit and the whole transaction
rolls back, so no recheck step is ever needed.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Optional

from sqlalchemy.engine import Connection

from placement_lite.ledger import errors
from placement_lite.quota import models, projects, usage


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
        parts.append(f"{o.resource_name} for {whose} would be "
                     f"{models.num(o.current_usage + o.delta)}, over its limit "
                     f"of {o.limit} (in use {shown['current_usage']}, "
                     f"requested {shown['delta']})")
    return "Quota exceeded: " + "; ".join(parts) + "."


def refuse(over: list[models.Over]) -> None:
    if over:
        raise errors.OverLimit(describe(over), over=[o.as_dict() for o in over])


class Enforcer:
    def __init__(self, settings, db=None):
        self.model = models.get_model(settings.quota_model)
        self.ctx = context_from(settings)
        # The Database claims are written to; without it a claim check
        # cannot tell the claim from the usage before it and refuses
        # whatever is over after the write.
        self.db = db

    def check_deltas(self, conn: Connection, project_id: str,
                     deltas: Mapping[str, float]) -> None:
        """Would adding `deltas` to the project's usage stay within limits?"""
        usage.require_sources(deltas, self.ctx.aliases)
        targets = self.model.targets(conn, [project_id])
        refuse(self.model.over_limits(conn, self.ctx, targets, dict(deltas)))

    def locked_targets(self, conn: Connection,
                       project_ids: Iterable[str]) -> list[models.Target]:
        """The targets, read again once their trees are locked, for a
        decision that writes: the tree cannot change under it."""
        targets = self.model.targets(conn, project_ids)
        projects.lock_trees(conn, [tg.root_id for tg in targets
                                   if tg.root_id is not None])
        return self.model.targets(conn, project_ids)

    def claim_check(self, conn: Connection, project_ids: Iterable[str]) -> None:
        """services.claim_checks entry: usage as written must be in limits."""
        project_ids = [p for p in set(project_ids or ()) if p]
        if not project_ids:
            return
        targets = self.model.targets(conn, project_ids)
        projects.lock_trees(conn, [tg.root_id for tg in targets
                                   if tg.root_id is not None])
        if self.db is None:
            refuse(self.model.over_limits(conn, self.ctx, targets, None))
            return
        # With the tree locked, a second connection reads the committed
        # usage: the usage before this claim, since every other claim in
        # the tree either committed already or waits behind the lock.
        with self.db.read() as before:
            refuse(self.model.over_limits(conn, self.ctx, targets, None,
                                          baseline=before))


def claim_check(settings, db) -> Optional[object]:
    """The check create_app registers when quota is enforced."""
    if not settings.quota_enforce:
        return None
    return Enforcer(settings, db).claim_check
