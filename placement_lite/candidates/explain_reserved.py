"""Explain's part for reservations: what the overlay a search ran with
(extra `used` per provider and class, overlay.py) keeps out, as a step of
each group's funnel and in the words of a reason.

The routes leave room for reservations through an overlay: the plain
route for the most reserved at any instant from now on (ahead.py), the
window route for the most reserved in its window, a request naming a
reservation's marker for what that reservation has left on its providers
(drawing.py). The funnel's SQL clauses (steps.py) know only what is
allocated; a provider they pass is kept out by the overlay where its
`used` plus the extra leaves no room for the amount asked: the reader's
own test (reader.Reader._fits). Those providers are few (the overlay
names them), so the step is a NOT IN list of them.
"""
from __future__ import annotations

from typing import Optional

from sqlalchemy import and_, bindparam, select, true

from placement_lite.candidates import steps
from placement_lite.candidates.facts import most_used
from placement_lite.candidates.filters import capacity_conditions
from placement_lite.candidates.overlay import Overlay
from placement_lite.db import tables as t
from placement_lite.ledger import capacity, reservation_room, timeline

KIND = "reserved_ahead"
IN_CHUNK = 500
_INV = t.inventories
_ROOMY = (select(_INV.c.resource_provider_id, _INV.c.total, _INV.c.reserved,
                 _INV.c.allocation_ratio, _INV.c.used)
          .where(_INV.c.resource_class_id == bindparam("rc"),
                 _INV.c.resource_provider_id.in_(bindparam("ids", expanding=True))))


class Reserved:
    """One explanation's overlay, and how its reasons word it."""

    def __init__(self, conn, overlay: Overlay, detail: str,
                 label: str = "reserved ahead", drawing=None):
        """`detail`: the funnel step's; `label`: what the overlay's extra
        is called in a reason; `drawing`: (reservation uuid, drawing.Held)
        for a request naming its marker, whose keys say what it has left."""
        self.conn = conn
        self.overlay = overlay
        self.detail = detail
        self.label = label
        self.drawing = drawing
        self._removed: dict = {}

    @classmethod
    def ahead(cls, conn, overlay: Optional[Overlay]) -> Optional["Reserved"]:
        """The plain route's: the most reserved from now on."""
        return cls(conn, overlay, "the most reserved at any instant from now "
                   "on") if overlay else None

    @classmethod
    def window(cls, conn, overlay: Optional[Overlay], start: int,
               end: int) -> Optional["Reserved"]:
        """The window route's, for [start, end)."""
        return cls(conn, overlay, f"the most reserved at any instant from "
                   f"{timeline.iso(start)} to {timeline.iso(end)}",
                   "reserved in the window") if overlay else None

    def removed(self, rc: int, amount: int) -> frozenset:
        """The providers with room for `amount` of `rc` by what is
        allocated, and none beside the overlay's extra."""
        key = (rc, amount)
        found = self._removed.get(key)
        if found is not None:
            return found
        extra = self.overlay.extra
        ids = sorted(rp for rp, rows in self.overlay.by_provider.items()
                     if any(c == rc for c, _n in rows))
        out = set()
        stmt = _ROOMY.where(*capacity_conditions(_INV, amount))
        for i in range(0, len(ids), IN_CHUNK):
            for rp, total, reserved, ratio, used in self.conn.execute(
                    stmt, {"rc": rc, "ids": ids[i:i + IN_CHUNK]}):
                cap = capacity.capacity_from(total, reserved, ratio)
                if int(used or 0) + extra[(rp, rc)] > most_used(cap, amount):
                    out.add(rp)
        found = self._removed[key] = frozenset(out)
        return found

    def clause(self, rp_id, rc: int, amount: int):
        """SQL: the provider `rp_id` is not one the overlay keeps out."""
        gone = self.removed(rc, amount)
        return rp_id.notin_(sorted(gone)) if gone else true()

    def step(self, rp, rc: int, amount: int, name: str) -> steps.Step:
        """One class's step, for a provider's reasons."""
        return steps.Step(KIND, f"{name}:{amount}",
                          lambda: self.clause(rp.c.id, rc, amount), rc=rc, amount=amount)

    def funnel_step(self, rp, wanted) -> steps.Step:
        """One step for a group's funnel: a provider the overlay keeps out
        of any of `wanted` ((class id, amount), ...) goes."""
        return steps.Step(KIND, self.detail, lambda: and_(true(), *(
            self.clause(rp.c.id, rc, amount) for rc, amount in wanted)))

    def worded(self, key: tuple, name: str, amount: int, cap, used: int) -> Optional[str]:
        """The capacity reason with the overlay's extra on `key`, or None
        where it has none."""
        extra = self.overlay.get(key)
        if not extra:
            return None
        if self.drawing is not None:
            r_uuid, held = self.drawing
            if key in held.left:
                return (f"{name}: needs {amount}, reservation {r_uuid} has "
                        f"{held.left[key]} of it left here (capacity "
                        f"{capacity.display(cap)}, used {used})")
        return (f"{name}: needs {amount}, free {capacity.display(cap - used - extra)} "
                f"of capacity {capacity.display(cap)} (used {used}, {self.label} "
                f"{extra})")


def short_on(conn, provider_id: int) -> list:
    """The reservations lacking room on a provider from now on, as a
    report lists them: the reservation, the class, the first instant it
    lacks room from and how much it lacks there (ledger/reservation_room,
    which the reservations' `short` and the metrics gauge use)."""
    found = reservation_room.short_on(conn, provider_id)
    if not found:
        return []
    r, rc = t.reservations, t.resource_classes
    uuids = dict(conn.execute(select(r.c.id, r.c.uuid).where(r.c.id.in_(
        sorted({s.held.reservation_id for s in found})))).all())
    names = dict(conn.execute(select(rc.c.id, rc.c.name).where(rc.c.id.in_(
        sorted({s.key[1] for s in found})))).all())
    return [{"reservation": uuids[s.held.reservation_id],
             "resource_class": names[s.key[1]],
             "start": timeline.iso(s.first.start), "missing": s.missing}
            for s in sorted(found, key=lambda s: (s.first.start, names[s.key[1]]))]
