"""The SQL prefilter: which providers can take part, as Core clauses.

Everything here builds SQLAlchemy Core expressions over a provider id
column, so the same pieces narrow GET /resource_providers and every
request group of GET /allocation_candidates in a handful of set-based
queries (never one query per provider). Names are turned into ids once
per request; unknown traits and resource classes are a 400, unknown
aggregates simply match nothing.
"""
from __future__ import annotations

from typing import Iterable, Mapping

from sqlalchemy import (
    Integer, and_, exists, false, literal, select, true)
from sqlalchemy.engine import Connection

from placement_lite.db import tables as t
from placement_lite.ledger import capacity, lookup, resource_classes

SHARING_TRAIT = "MISC_SHARES_VIA_AGGREGATE"


def trait_ids(conn: Connection, names: Iterable[str], context: str = "") -> dict:
    """context: what Placement's message says before "No such trait(s)"
    on this route."""
    return lookup.ids_by_name(
        conn, t.traits.c.name, t.traits.c.id, names,
        lambda missing: f"{context}No such trait(s): {', '.join(missing)}.")


def resource_class_ids(conn: Connection, names: Iterable[str]) -> dict:
    return resource_classes.ids_for(conn, names, lambda missing: (
        "Invalid resource class in resources parameter: No such "
        f"resource class {', '.join(missing)}."))


def aggregate_ids(conn: Connection, uuids: Iterable[str]) -> dict:
    """uuid -> id of the aggregates that exist (an unknown aggregate just
    matches nothing, unlike ledger.aggregates.aggregate_ids, which creates
    them)."""
    uuids = sorted(set(uuids))
    if not uuids:
        return {}
    stmt = lookup.lookup_statement(t.placement_aggregates.c.uuid,
                                   t.placement_aggregates.c.id)
    return dict(conn.execute(stmt, {"names": uuids}).all())


def known_ids(names: Iterable[str], mapping: Mapping[str, int]) -> list:
    """The ids of the names `mapping` knows, sorted (unknown aggregates
    match nothing, so they drop out)."""
    return sorted({mapping[n] for n in names if n in mapping})


# -- traits -----------------------------------------------------------------

def has_any_trait(rp_id, ids: Iterable[int]):
    rpt = t.resource_provider_traits
    ids = sorted(set(ids))
    if not ids:
        return false()
    return exists().where(rpt.c.resource_provider_id == rp_id,
                          rpt.c.trait_id.in_(ids))


def trait_clauses(rp_id, required: Iterable[Iterable[str]],
                  forbidden: Iterable[str], ids: Mapping[str, int]) -> list:
    """The provider has one trait of every any-of set and none forbidden."""
    clauses = [has_any_trait(rp_id, known_ids(any_of, ids)) for any_of in required]
    bad = known_ids(forbidden, ids)
    if bad:
        clauses.append(~has_any_trait(rp_id, bad))
    return clauses


# -- aggregates -------------------------------------------------------------

def in_any_aggregate(rp_id, ids: Iterable[int]):
    rpa = t.resource_provider_aggregates
    ids = sorted(set(ids))
    if not ids:
        return false()
    return exists().where(rpa.c.resource_provider_id == rp_id,
                          rpa.c.aggregate_id.in_(ids))


def aggregate_clauses(rp_id, member_of: Iterable[Iterable[str]],
                      forbidden: Iterable[str], ids: Mapping[str, int]) -> list:
    """The provider itself is in one aggregate of every any-of set and in
    none of the forbidden ones."""
    clauses = [in_any_aggregate(rp_id, known_ids(any_of, ids)) for any_of in member_of]
    bad = known_ids(forbidden, ids)
    if bad:
        clauses.append(~in_any_aggregate(rp_id, bad))
    return clauses


# -- trees ------------------------------------------------------------------

def in_tree_clause(root_id, provider_uuid: str):
    """root_id (a root_provider_id column) is the root of provider_uuid's tree."""
    rp = t.resource_providers.alias("tree_member")
    return root_id.in_(select(rp.c.root_provider_id)
                       .where(rp.c.uuid == provider_uuid).scalar_subquery())


# -- capacity ---------------------------------------------------------------

def capacity_conditions(inv, amount: int) -> list:
    """`amount` more of inv's class fits: unit limits, step size and the
    free capacity (total - reserved) * allocation_ratio - used."""
    amt = literal(int(amount), Integer)
    return [
        inv.c.min_unit <= amt,
        inv.c.max_unit >= amt,
        (amt % inv.c.step_size) == 0,
        (inv.c.total - inv.c.reserved) * inv.c.allocation_ratio
        >= inv.c.used + amt,
        # A stored NaN ratio would pass the comparison above on PostgreSQL.
        capacity.ratio_is_finite(inv.c.allocation_ratio),
    ]


def has_capacity(rp_id, rc_id: int, amount: int):
    inv = t.inventories.alias("cap_inv")
    return exists().where(inv.c.resource_provider_id == rp_id,
                          inv.c.resource_class_id == rc_id,
                          *capacity_conditions(inv, amount))


def capacity_clauses(rp_id, resources: Mapping[str, int],
                     rc_ids: Mapping[str, int]) -> list:
    return [has_capacity(rp_id, rc_ids[name], amount)
            for name, amount in sorted(resources.items())]


# -- the provider list ------------------------------------------------------

def provider_filter_select(conn: Connection, flt):
    """A select of the ids of providers matching a ProviderListFilter
    (see terms.parse_provider_filters), for GET /resource_providers."""
    rp = t.resource_providers
    clauses = []
    if flt.resources:
        rc_ids = resource_class_ids(conn, flt.resources)
        clauses += capacity_clauses(rp.c.id, flt.resources, rc_ids)
    if flt.required or flt.forbidden:
        names = set(flt.forbidden).union(*flt.required) if flt.required \
            else set(flt.forbidden)
        clauses += trait_clauses(
            rp.c.id, flt.required, flt.forbidden,
            trait_ids(conn, names, 'Invalid trait(s) in "required" parameter: '))
    if flt.member_of or flt.forbidden_aggs:
        uuids = set(flt.forbidden_aggs).union(*flt.member_of) \
            if flt.member_of else set(flt.forbidden_aggs)
        clauses += aggregate_clauses(rp.c.id, flt.member_of, flt.forbidden_aggs,
                                     aggregate_ids(conn, uuids))
    if flt.in_tree:
        clauses.append(in_tree_clause(rp.c.root_provider_id, flt.in_tree))
    return select(rp.c.id).where(and_(*clauses) if clauses else true())
