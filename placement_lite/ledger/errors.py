"""Typed domain errors. Each carries its Placement error code.

The API layer maps the four families (NotFound, Invalid, Conflict,
Forbidden) onto HTTP statuses once, in api/errors.py; domain code never
thinks in HTTP.
"""
from __future__ import annotations

from placement_lite.db.engine import RetryableError

DEFAULT_CODE = "placement.undefined_code"


class LedgerError(Exception):
    code = DEFAULT_CODE

    def __init__(self, detail: str, code: str | None = None):
        super().__init__(detail)
        self.detail = detail
        if code is not None:
            self.code = code


class NotFound(LedgerError):
    """The named thing does not exist (404)."""


class ResourceProviderNotFound(NotFound):
    pass


class Invalid(LedgerError):
    """The request is well-formed JSON but asks for something impossible (400)."""


class UnknownResourceClass(Invalid):
    """A request names a resource class that does not exist (400)."""


class Conflict(LedgerError):
    """The request conflicts with what is stored (409)."""


class Forbidden(LedgerError):
    """Policy or quota refuses the request (403)."""


class DuplicateName(Conflict):
    code = "placement.duplicate_name"


class ConcurrentUpdate(Conflict):
    """The caller's view is stale (a provider or consumer generation moved).

    Not retried: another attempt would read the same stored generation.
    The caller must re-read and decide again.
    """
    code = "placement.concurrent_update"


class RaceLost(ConcurrentUpdate, RetryableError):
    """Another transaction won a race this one could not see coming (a
    unique insert, a row deleted meanwhile). `Database.run_write` retries
    it in a new transaction; only when retries run out does the caller
    get the 409."""


class InventoryInUse(Conflict):
    code = "placement.inventory.inuse"


class ProviderInUse(Conflict):
    code = "placement.resource_provider.inuse"


class CannotDeleteParent(Conflict):
    code = "placement.resource_provider.cannot_delete_parent"


class CapacityExceeded(Conflict):
    """A claim does not fit the provider's inventory."""


class OutcomeUnknown(LedgerError):
    """The connection to the database was lost during COMMIT: the write
    may or may not have been stored. Never retried; the caller must read
    the state back before deciding again (503)."""
    code = "placement.outcome_unknown"


class OverLimit(Forbidden):
    """A claim would take a project over its quota limit."""
    code = "placement.quota.over_limit"

    def __init__(self, detail: str, over: list | None = None):
        super().__init__(detail)
        self.over = over or []
