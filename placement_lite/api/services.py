"""What every resource is built with: settings, the database, the policy."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from placement_lite.config import Settings
from placement_lite.db.engine import Database
from placement_lite.api.policy import Policy


@dataclass
class Services:
    settings: Settings
    db: Database
    policy: Policy
    # Optional collectors (metrics); resources must work without them.
    extras: dict[str, Any] = field(default_factory=dict)
