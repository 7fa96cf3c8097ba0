"""What every resource is built with: settings, the database, the policy."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from placement_lite.config import Settings
from placement_lite.db.engine import Database
from placement_lite.api.policy import Policy


@dataclass
class Services:
    settings: Settings
    db: Database
    policy: Policy
    # Checks every allocation-writing request runs inside its write
    # transaction, after the allocations are written and before commit:
    # check(conn, project_external_ids). Quota enforcement registers here;
    # a check refuses a claim by raising a ledger error (OverLimit).
    claim_checks: list[Callable[[Any, set], None]] = field(default_factory=list)
    # Optional collectors (metrics); resources must work without them.
    extras: dict[str, Any] = field(default_factory=dict)
