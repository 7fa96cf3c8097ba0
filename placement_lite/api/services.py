"""What every resource is built with: settings, the database, the policy."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from placement_lite.config import Settings
from placement_lite.db.engine import Database
from placement_lite.api.metrics import Metrics
from placement_lite.api.policy import Policy
from placement_lite.candidates.ahead import AheadCache
from placement_lite.candidates.facts_cache import FactsCache
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
    # The same two-phase checks for reservation writes (create, change,
    # cancel, end: ledger/reservations.py), told the projects that own the
    # reservation before and after. create_app puts quota's in
    # (quota.reserved: quota at every instant, and lease hours, whose
    # second phase also takes the write's charge).
    reservation_checks: list[ClaimCheck] = field(default_factory=list)
    # The process's request and search metrics (create_app sets them; a
    # resource built without them must still work).
    metrics: Optional[Metrics] = None
    # (template, resource) for every route as routed, filled in by
    # create_app once every resource exists: the OpenAPI document is built
    # from it.
    routed: list[tuple[str, object]] = field(default_factory=list)
    # The process's copy of the providers' facts for the candidate engine
    # (None when settings.facts_in_memory is off).
    facts: Optional[FactsCache] = None
    # Without that copy, the reservation windows not ended, kept alone
    # for plain candidates (candidates/ahead.py).
    ahead: Optional[AheadCache] = None

    def facts_now(self, conn):
        """The copy as of `conn`'s transaction, or None to read all from SQL."""
        return self.facts.current(conn) if self.facts is not None else None

    def reserved_ahead(self, conn, snapshot):
        """The extra `used` plain candidates leave for what is reserved
        from now on (candidates/ahead.py), or None: from `snapshot`, the
        copy facts_now gave, or read from SQL when there is none."""
        if snapshot is not None:
            return self.facts.ahead.overlay(conn, snapshot.ahead)
        if self.ahead is None:
            # Services made without create_app (tests): two threads making
            # one each at once would each keep a correct one.
            self.ahead = AheadCache()
        return self.ahead.overlay(conn)

    def provider_hint(self):
        """Provider uuid -> id as the copy last read had it (not checked
        against the database: its users verify), or None."""
        snap = self.facts.latest() if self.facts is not None else None
        return snap.by_uuid if snap is not None else None
