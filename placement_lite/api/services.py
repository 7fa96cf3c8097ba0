"""What every resource is built with: settings, the database, the policy."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from placement_lite.config import Settings
from placement_lite.db.engine import Database
from placement_lite.api.policy import Policy
from placement_lite.ledger.allocations import ClaimCheck
from placement_lite.quota.enforce import Enforcer


@dataclass
class Services:
    settings: Settings
    db: Database
    policy: Policy
    # The process's one quota enforcer (POST /quota/check, lease budgets).
    enforcer: Enforcer
    # Checks every allocation-writing request runs in two phases inside its
    # write transaction (ledger.allocations.ClaimCheck); the enforcer is
    # one. A check refuses a claim by raising a ledger error (OverLimit).
    claim_checks: list[ClaimCheck] = field(default_factory=list)
    # Optional collectors (metrics); resources must work without them.
    extras: dict[str, Any] = field(default_factory=dict)
