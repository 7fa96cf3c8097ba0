"""Room for reservations: what the providers offer, what is allocated,
what other reservations hold over a window; the admission check, and
the intervals where a reservation has lost its room.

For one provider and class, the room is `capacity - allocated`, where
allocated is what open allocations hold, `used - drawn` (an open
allocation has no end, so it counts at every instant; a drawn one counts
inside its reservation's amount, ledger/draws.py), and what
reservations hold is a step function of the instant (ledger/timeline).
An amount `a` fits at t when `reserved(t) + a <= room`.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Mapping, NamedTuple, Optional

from sqlalchemy import bindparam, func, not_, or_, select
from sqlalchemy.engine import Connection

from placement_lite import errors
from placement_lite.db import clock
from placement_lite.db import tables as t
from placement_lite.ledger import capacity, timeline, windows

Key = tuple[int, int]  # (provider id, class id)
_ra = t.reservation_amounts
_inv = t.inventories


class Held(NamedTuple):
    """One reservation's window on one key."""
    reservation_id: int
    start: int
    end: int
    amount: int


@dataclass
class Room:
    """The inventory rows of some keys and the windows held on them."""
    inventories: dict[Key, object]
    windows: dict[Key, list[Held]]

    def free(self, key: Key) -> float:
        inv = self.inventories.get(key)
        # Drawn allocations live inside their reservations' amounts,
        # which the windows count: only the open ones take room always.
        return 0 if inv is None else capacity.capacity_of(inv) - capacity.open_usage(inv)

    def others(self, key: Key, reservation_id: Optional[int]
               ) -> list[timeline.Window]:
        return [(h.start, h.end, h.amount) for h in self.windows.get(key, ())
                if h.reservation_id != reservation_id]


# Per key, a range of the index (provider, class, end_at) bounded on both
# sides by the longest window (ledger/windows.py): a key's windows far
# beyond the period are not visited. The bound is read in this statement,
# under the providers' locks, so it covers every window a writer on these
# providers committed before them.
_OVERLAPPING = windows.overlapping(select(
    _ra.c.reservation_id, _ra.c.resource_provider_id, _ra.c.resource_class_id,
    _ra.c.start_at, _ra.c.end_at, _ra.c.amount).where(
    _ra.c.resource_provider_id.in_(bindparam("rps", expanding=True)),
    _ra.c.resource_class_id.in_(bindparam("rcs", expanding=True))))


def read(conn: Connection, keys: Iterable[Key], start: int, end: int) -> Room:
    """The inventories of `keys` and every window on them overlapping
    [start, end): two statements. Read under the providers' locks, this
    is what no other writer can change before we commit."""
    keys = set(keys)
    if not keys:
        return Room({}, {})
    invs = capacity.inventories(conn, {rp for rp, _rc in keys})
    windows: dict[Key, list[Held]] = defaultdict(list)
    if start < end:
        rows = conn.execute(_OVERLAPPING, {
            "rps": sorted({rp for rp, _rc in keys}),
            "rcs": sorted({rc for _rp, rc in keys}),
            "w_start": start, "w_end": end})
        for rid, rp, rc, s, e, amount in rows:
            if (rp, rc) in keys:
                windows[(rp, rc)].append(Held(rid, int(s), int(e), int(amount)))
    return Room({k: v for k, v in invs.items() if k in keys}, dict(windows))


def check(room: Room, key: Key, amount: int, spans: Iterable[tuple[int, int]],
          names: tuple[str, str], reservation_id: Optional[int] = None) -> None:
    """Refuse unless `amount` fits beside the other reservations at every
    instant of each span. `names`: the provider's uuid and the class's."""
    inv = room.inventories.get(key)
    where = f"'{names[1]}' on resource provider '{names[0]}'"
    if inv is None:
        raise errors.Invalid(
            f"Unable to reserve {where}: the provider has no inventory of "
            "that class.")
    if amount < inv.min_unit or amount > inv.max_unit or amount % inv.step_size:
        raise errors.Invalid(
            f"Unable to reserve {where}: the requested amount would violate "
            f"inventory constraints: requested {amount}, min_unit "
            f"{inv.min_unit}, max_unit {inv.max_unit}, step_size "
            f"{inv.step_size}.")
    free = room.free(key)
    others = room.others(key, reservation_id)
    for start, end in spans:
        short = timeline.first_short(others, free, amount, start, end)
        if short is None:
            continue
        cap = capacity.capacity_of(inv)
        raise errors.ReservationNoRoom(
            f"Unable to reserve {where} from {timeline.iso(short.start)} to "
            f"{timeline.iso(short.end)}: requested {amount}, free "
            f"{capacity.display(short.free)} (capacity {capacity.display(cap)}, "
            f"allocated {capacity.open_usage(inv)}, reserved "
            f"{capacity.display(free - short.free)}).")


class Shortfall(NamedTuple):
    """An interval where a reservation's amount no longer fits: `free`
    is what the others leave there (less than the amount, perhaps
    below zero)."""
    provider_id: int
    class_id: int
    start: int
    end: int
    free: float


def shortfalls(room: Room, reservation_id: int,
               amounts: Mapping[Key, int], start: int, end: int
               ) -> list[Shortfall]:
    """Every interval of [start, end) where one of the amounts does not
    fit beside the other reservations, by key, then time."""
    out = []
    for key in sorted(amounts):
        free = room.free(key)
        for step in timeline.steps(room.others(key, reservation_id), start, end):
            if step.amount + amounts[key] > free:
                out.append(Shortfall(key[0], key[1], step.start, step.end,
                                     capacity.display(free - step.amount)))
    return out


def _candidate_keys(conn: Connection, provider_id: Optional[int] = None
                    ) -> list[Key]:
    """Keys (of `provider_id` alone, when given) where what live
    reservations hold in total does not fit the room: only there can any
    instant lack it. One grouped statement."""
    cap = (_inv.c.total - _inv.c.reserved) * _inv.c.allocation_ratio
    held = func.sum(_ra.c.amount)
    live = [_ra.c.end_at > clock.now_expr(conn.dialect.name)]
    if provider_id is not None:
        live.append(_ra.c.resource_provider_id == provider_id)
    rows = conn.execute(
        select(_ra.c.resource_provider_id, _ra.c.resource_class_id)
        .select_from(_ra.outerjoin(_inv, (
            _inv.c.resource_provider_id == _ra.c.resource_provider_id)
            & (_inv.c.resource_class_id == _ra.c.resource_class_id)))
        .where(*live)
        .group_by(_ra.c.resource_provider_id, _ra.c.resource_class_id,
                  _inv.c.total, _inv.c.reserved, _inv.c.allocation_ratio,
                  _inv.c.used, _inv.c.drawn)
        .having(or_(_inv.c.total.is_(None),
                    not_(capacity.ratio_is_finite(_inv.c.allocation_ratio)),
                    held + _inv.c.used - _inv.c.drawn > cap)))
    return [(rp, rc) for rp, rc in rows]


class Short(NamedTuple):
    """A reservation's window on one key that lacks room from now on, and
    the first interval where it does."""
    key: Key
    held: Held
    first: Shortfall

    @property
    def missing(self) -> float:
        return capacity.display(self.held.amount - self.first.free)


def _short(conn: Connection, keys: list[Key], once: bool = False) -> list[Short]:
    """The reservations' windows on `keys` that lack room from now on, by
    key, then start; `once`: only the first found of each reservation."""
    if not keys:
        return []
    now = clock.now(conn)
    far = conn.scalar(select(func.max(_ra.c.end_at)))
    room = read(conn, keys, now, int(far))
    out: list[Short] = []
    seen: set[int] = set()
    for key in sorted(room.windows):
        for h in sorted(room.windows[key], key=lambda h: (h.start, h.reservation_id)):
            if once and h.reservation_id in seen:
                continue
            found = shortfalls(room, h.reservation_id, {key: h.amount},
                               max(h.start, now), h.end)
            if found:
                seen.add(h.reservation_id)
                out.append(Short(key, h, found[0]))
    return out


def count_short(conn: Connection) -> int:
    """How many reservations lack room at some instant from now on: the
    `/metrics` gauge. Cheap when all is well: one grouped statement finds
    no key where the live reservations' total exceeds the room."""
    return len({s.held.reservation_id for s in _short(conn, _candidate_keys(conn), once=True)})


def short_on(conn: Connection, provider_id: int) -> list[Short]:
    """The reservations that lack room on one provider from now on (one
    per reservation and class), as count_short finds them: one grouped
    statement when none does."""
    return _short(conn, _candidate_keys(conn, provider_id))
