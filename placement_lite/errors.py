"""Every domain error, one class per condition, each with its code.

Domain code (ledger/, candidates/, quota/, db/) raises these and never
thinks in HTTP; api/errors.py maps them onto statuses once, by kind:

  NotFound -> 404   Invalid -> 400   Conflict -> 409   Forbidden -> 403
  OutcomeUnknown -> 503

A class names its area too (LedgerError, QueryError, QuotaError), so a
caller can catch one area's errors without catching another's. The kinds
raised bare (errors.Invalid("...")) are the conditions Placement gives no
code of their own: they carry placement.undefined_code, as Placement's do.

This module imports nothing of ours: every layer may import it.
"""
from __future__ import annotations

DEFAULT_CODE = "placement.undefined_code"


class DomainError(Exception):
    code = DEFAULT_CODE

    def __init__(self, detail: str):
        super().__init__(detail)
        self.detail = detail


# Kinds: how the api layer answers them ---------------------------------------

class NotFound(DomainError):
    """The named thing does not exist (404)."""


class Invalid(DomainError):
    """The request is well-formed but asks for something impossible (400)."""


class Conflict(DomainError):
    """The request conflicts with what is stored (409)."""


class Forbidden(DomainError):
    """Policy or quota refuses the request (403)."""


# Areas ------------------------------------------------------------------------

class LedgerError(DomainError):
    """Providers, inventories, classes, traits, consumers, allocations."""


class QueryError(DomainError):
    """The candidate / provider-filter query language."""


class QuotaError(DomainError):
    """Projects, limits, the catalog, usage counting, claims, leases."""


# Ledger -------------------------------------------------------------------------

class ResourceProviderNotFound(LedgerError, NotFound):
    pass


class ReshapeProviderNotFound(LedgerError, Invalid):
    """A reshape names a provider that does not exist: the body is what is
    wrong (400), with Placement's code for it."""
    code = "placement.resource_provider.not_found"


class UnknownResourceClass(LedgerError, Invalid):
    """A request names a resource class that does not exist (400)."""


class ResourceClassNotFound(LedgerError, NotFound):
    pass


class TraitNotFound(LedgerError, NotFound):
    pass


class InventoryNotFound(LedgerError, NotFound):
    pass


class NoInventoryRecord(LedgerError, Invalid):
    """An update names a class the provider has no inventory of (400)."""


class DuplicateName(LedgerError, Conflict):
    code = "placement.duplicate_name"


class ConcurrentUpdate(LedgerError, Conflict):
    """The caller's view is stale (a provider or consumer generation moved).

    Not retried: another attempt would read the same stored generation.
    The caller must re-read and decide again.
    """
    code = "placement.concurrent_update"


class InventoryInUse(LedgerError, Conflict):
    code = "placement.inventory.inuse"


class ProviderInUse(LedgerError, Conflict):
    code = "placement.resource_provider.inuse"


class CannotDeleteParent(LedgerError, Conflict):
    code = "placement.resource_provider.cannot_delete_parent"


class CapacityExceeded(LedgerError, Conflict):
    """A claim does not fit the provider's inventory."""


# Reservations ------------------------------------------------------------------

class ReservationNotFound(LedgerError, NotFound):
    pass


class ReservationNoRoom(LedgerError, Conflict):
    """Some instant of the window lacks room for an amount."""
    code = "placement.reservation.no_room"


class ReservationExists(LedgerError, Conflict):
    code = "placement.reservation.exists"


class ReservationEnded(LedgerError, Conflict):
    """An ended reservation can only be removed from the records."""
    code = "placement.reservation.ended"


class ReservationStarted(LedgerError, Conflict):
    """An active reservation cannot be cancelled or have its start moved."""
    code = "placement.reservation.started"


class ReservationNotStarted(LedgerError, Conflict):
    """Only an active reservation can be ended (a pending one is cancelled)."""
    code = "placement.reservation.not_started"


class ReservationNotActive(LedgerError, Conflict):
    """A claim names the marker class of a reservation that does not exist,
    has not started or has ended: it has nothing to draw from now."""
    code = "placement.reservation.not_active"


class ReservationOtherProject(LedgerError, Conflict):
    """Only the holder's consumers draw from a reservation."""
    code = "placement.reservation.other_project"


class ReservationNotHeld(LedgerError, Conflict):
    """A drawing claim names a class the reservation does not hold there."""
    code = "placement.reservation.not_held"


class ReservationOverdrawn(LedgerError, Conflict):
    """Draws would take more than the reservation holds at a key."""
    code = "placement.reservation.overdrawn"


# Candidates / query ---------------------------------------------------------------
# Placement tags only some of its query 400s with a specific code; the rest
# carry the undefined code, and so do ours.

class InvalidQuery(QueryError, Invalid):
    pass


class QueryBadValue(QueryError, Invalid):
    code = "placement.query.bad_value"


class QueryMissingValue(QueryError, Invalid):
    code = "placement.query.missing_value"


class DuplicateQueryKey(QueryError, Invalid):
    """A parameter that may appear once came twice (any route's query)."""
    code = "placement.query.duplicate_key"

    def __init__(self, key: str):
        super().__init__(f"Query parameter {key!r} may be specified only once.")
        self.key = key


# Quota: limits, projects, catalog, usage, enforcement, leases -----------------------

class DuplicateLimit(QuotaError, Conflict):
    code = "placement.quota.duplicate_limit"


class NoLimitReference(QuotaError, Forbidden):
    code = "placement.quota.no_registered_limit"


class RegisteredLimitInUse(QuotaError, Forbidden):
    code = "placement.quota.registered_limit_in_use"


class LimitNotFound(QuotaError, NotFound):
    code = "placement.quota.limit_not_found"


class InvalidLimit(QuotaError, Invalid):
    code = "placement.quota.invalid_limit"


class TreeTooDeep(QuotaError, Forbidden):
    code = "placement.quota.project_tree_too_deep"


class ProjectNotFound(QuotaError, NotFound):
    code = "placement.quota.project_not_found"


class ProjectHasChildren(QuotaError, Forbidden):
    code = "placement.quota.project_has_children"


class ProjectInUse(QuotaError, Conflict):
    code = "placement.quota.project_in_use"


class CatalogNotFound(QuotaError, NotFound):
    code = "placement.quota.catalog_not_found"


class CatalogInUse(QuotaError, Conflict):
    code = "placement.quota.catalog_in_use"


class UnknownResource(QuotaError, Invalid):
    code = "placement.quota.unknown_resource"


class ModelDoesNotFit(QuotaError, Invalid):
    code = "placement.quota.model_does_not_fit"


class OverLimit(QuotaError, Forbidden):
    """A claim would take a project over its quota limit."""
    code = "placement.quota.over_limit"

    def __init__(self, detail: str, over: list | None = None):
        super().__init__(detail)
        self.over = over or []


class LeaseDenied(QuotaError, Forbidden):
    """A lease filter refuses the lease; the detail is shown to the user."""
    code = "placement.lease.denied"


class MalformedLease(QuotaError, Invalid):
    code = "placement.lease.malformed"


# The database and the outcome of a write ---------------------------------------------

class RetryableError(Exception):
    """Raised by domain code when a fresh transaction may succeed.

    `Database.run_write` catches it (and database lock/deadlock errors) and
    runs the whole unit of work again in a new transaction.
    """


class RaceLost(ConcurrentUpdate, RetryableError):
    """Another transaction won a race this one could not see coming (a
    unique insert, a row deleted meanwhile). `Database.run_write` retries
    it in a new transaction; only when retries run out does the caller
    get the 409."""


class OutcomeUnknown(DomainError):
    """The connection to the database was lost during COMMIT: the write
    may or may not have been stored. Never retried; the caller must read
    the state back before deciding again (503)."""
    code = "placement.outcome_unknown"
