"""Aggregates: uuids grouping providers. A row in placement_aggregates
exists for every uuid some provider was ever associated with; rows are
created on first use.
"""
from __future__ import annotations

from typing import Iterable, Optional

from sqlalchemy import bindparam, insert, literal, select, union_all
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from placement_lite.db import tables as t
from placement_lite.ledger import lookup
from placement_lite.ledger.providers import ProviderRef, bump_generation

_agg = t.placement_aggregates
_rpa = t.resource_provider_aggregates
_rp = t.resource_providers

_OF_PROVIDER = (select(_agg.c.uuid).join(_rpa, _rpa.c.aggregate_id == _agg.c.id)
                .where(_rpa.c.resource_provider_id == bindparam("p_id"))
                .order_by(_agg.c.id))
_BY_UUID = lookup.lookup_statement(_agg.c.uuid, _agg.c.id)
_LOCK = select(_rp.c.id).where(_rp.c.id == bindparam("p_id")).with_for_update()


def provider_aggregates(conn: Connection, provider: ProviderRef) -> list[str]:
    """The aggregate uuids of one provider, in the order the aggregates
    were first used (Placement's order: its query reads them by id)."""
    return list(conn.scalars(_OF_PROVIDER, {"p_id": provider.id}))


# The aggregates asked for (uuid, id) and the ones the provider is in
# (its links), in one round trip.
_WANTED_AND_HELD = union_all(
    select(literal("wanted"), _agg.c.uuid, _agg.c.id)
    .where(_agg.c.uuid.in_(bindparam("names", expanding=True))),
    select(literal("held"), literal(""), _rpa.c.aggregate_id)
    .where(_rpa.c.resource_provider_id == bindparam("p_id")))


def _create(conn: Connection, uuids: list[str]) -> dict[str, int]:
    """uuid -> id of new aggregate rows (or of the rows a racing writer
    created first)."""
    for agg_uuid in uuids:
        try:
            # A savepoint, so losing a race to create the same aggregate
            # usually does not cost the caller its transaction. MariaDB may
            # instead answer the race with a deadlock that rolls back the
            # whole transaction (see ledger/consumers.py); that error is
            # not an IntegrityError, so it escapes to run_write, which
            # retries the whole write in a new transaction.
            with conn.begin_nested():
                conn.execute(insert(_agg).values(uuid=agg_uuid))
        except IntegrityError:
            # The other writer's row is committed by the time the unique
            # index lets us know about it, so the read below finds it.
            pass
    return dict(conn.execute(_BY_UUID, {"names": uuids}).all())


def set_provider_aggregates(conn: Connection, provider: ProviderRef,
                            uuids: Iterable[str],
                            generation: Optional[int] = None,
                            bump: bool = True) -> int:
    """Make `uuids` the provider's aggregates; returns its generation.

    With `bump` the provider's generation is incremented (checked against
    `generation` when given: ConcurrentUpdate, 409, if stale); without it
    (microversions before 1.19) the generation is left alone. So unlike
    traits and inventory, the provider's aggregates are read only under
    its lock: a generation seen unchanged does not prove they are.
    """
    if bump:
        new_generation = bump_generation(conn, provider, generation)
    else:
        # Still serialise writers of this provider's links.
        conn.execute(_LOCK, {"p_id": provider.id})
        new_generation = provider.generation
    wanted = sorted(set(uuids))
    ids: dict[str, int] = {}
    held: set[int] = set()
    for kind, agg_uuid, agg_id in conn.execute(
            _WANTED_AND_HELD, {"names": wanted, "p_id": provider.id}):
        if kind == "held":
            held.add(agg_id)
        else:
            ids[agg_uuid] = agg_id
    missing = [u for u in wanted if u not in ids]
    if missing:
        ids.update(_create(conn, missing))
    lookup.sync_provider_links(conn, _rpa, "aggregate_id", provider.id,
                               ids.values(), have=held)
    return new_generation
