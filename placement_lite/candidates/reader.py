"""The candidate engine's reading side: the only part that runs SQL.

Per slice of trees (a range of root provider ids), one query per request
group returns the providers that can serve it (capacity, traits,
aggregates, tree), with the facts the combination step needs as named
columns (the statements: candidates/statements.py); sharing providers are
read once per request. What comes back is an immutable Facts value
(candidates/facts.py).
"""
from __future__ import annotations

import threading
from typing import Iterable, Optional

from sqlalchemy import bindparam, case, func, select
from sqlalchemy.engine import Connection

from placement_lite.candidates import filters, statements, steps
from placement_lite.candidates.facts import (
    NO_SHARING, Facts, Room, Sharing, Slice, most_used)
from placement_lite.candidates.overlay import Overlay
from placement_lite.candidates.plan import Plan
from placement_lite.db import tables as t
from placement_lite.ledger import capacity

RP = t.resource_providers
IN_CHUNK = 500
# Slice statements by request shape (see Reader._built): a busy service
# sees the same few flavors again and again.
STATEMENT_CACHE_SIZE = 256
_STATEMENTS: dict = {}
_STATEMENTS_LOCK = threading.Lock()
_SHARING_PROVIDERS = (
    select(t.resource_provider_traits.c.resource_provider_id)
    .select_from(t.resource_provider_traits.join(
        t.traits, t.traits.c.id == t.resource_provider_traits.c.trait_id))
    .where(t.traits.c.name == filters.SHARING_TRAIT))
_SLICE = RP.c.root_provider_id.between(bindparam("slice_lo"), bindparam("slice_hi"))
_INV = t.inventories
# The inventory of the providers an overlay names, to check them again.
_ROOMS = select(_INV.c.resource_provider_id, _INV.c.resource_class_id, _INV.c.total,
                _INV.c.reserved, _INV.c.allocation_ratio, _INV.c.used)
_ROOMS_BY = (_ROOMS.where(_INV.c.resource_provider_id.between(bindparam("lo"), bindparam("hi"))),
             _ROOMS.where(_INV.c.resource_provider_id.in_(bindparam("ids", expanding=True))))


def chunks(seq, size=IN_CHUNK):
    seq = list(seq)
    for i in range(0, len(seq), size):
        yield seq[i:i + size]


# Ids per range statement, where the ids are dense.
RANGE_CHUNK = 10000


def selecting(statements, ids: Iterable[int]):
    """(statement, parameters) pairs selecting `ids`: a range where the ids
    are dense (cheaper than a long IN list; the caller drops the extras),
    an IN list where they are sparse."""
    ranged, listed = statements
    ids = sorted(set(ids))
    if ids and ids[-1] - ids[0] < 2 * len(ids):
        # Dense as a whole: a range has no parameter list to bound, so
        # one statement covers many more ids than an IN list would
        # (each statement is a round trip to a database server).
        for part in chunks(ids, RANGE_CHUNK):
            yield ranged, {"lo": part[0], "hi": part[-1]}
        return
    for part in chunks(ids):
        lo, hi = part[0], part[-1]
        if hi - lo < 2 * len(part):
            yield ranged, {"lo": lo, "hi": hi}
        else:
            yield listed, {"ids": part}


def _columns(result) -> dict:
    """Column name -> position, read once per result."""
    return {name: i for i, name in enumerate(result.keys())}


class Draft:
    """The dicts a Facts value is made of while rows come in."""

    def __init__(self):
        self.uuid, self.root, self.parent = {}, {}, {}
        self.trait_flags, self.agg_ok, self.agg_bad = {}, {}, {}
        self.inventory, self.root_agg_bad, self.rows = {}, {}, {}
        self.root_ok, self.alone = set(), set()

    def add(self, key, rp: int, root: int) -> None:
        self.rows.setdefault(key, {}).setdefault(root, []).append(rp)

    def provider(self, rp, root, uuid, parent) -> None:
        self.uuid[rp] = uuid
        self.root[rp] = root
        self.parent[rp] = parent

    def facts(self) -> Facts:
        return Facts(self.uuid, self.root, self.parent, self.trait_flags,
                     self.agg_ok, self.agg_bad, self.inventory,
                     frozenset(self.root_ok), frozenset(self.alone),
                     self.root_agg_bad, self.rows)


class FactsReader:
    """The one interface the search (engine.Search) reads facts through,
    with two implementations: Reader here, asking SQL, and
    memory.MemoryReader, asking the process's copy of the facts and SQL
    only for `used`. The differential tests hold them to the same
    answers, and their filters are the same steps (steps.py).

    - sharing(): the sharing providers, read once per request;
    - slice(lo, hi, sharing): the facts of the trees rooted in [lo, hi],
      as an immutable Slice (None: some slot has no provider there);
    - bounds(): the lowest and highest provider id.

    This class makes a Slice of a reader's own reads, which each
    implementation gives: _slice_scope, _slice_rows, _slice_inventory,
    _slice_roots, _parents."""

    plan: Plan
    has_sharing: bool

    def slice(self, lo: int, hi: int, sharing: Sharing) -> Optional[Slice]:
        """The facts of the trees rooted in [lo, hi]; None when some slot
        has no provider there (nor a sharing one)."""
        plan = self.plan
        draft = Draft()
        scope = self._slice_scope(lo, hi)
        if not self._slice_rows(scope, draft, sharing):
            return None
        anchors = set()
        for rows in draft.rows.values():
            anchors.update(rows)
        anchors.update(a for a in sharing.anchors if lo <= a <= hi)
        offered = frozenset(anchors)
        if anchors:
            self._slice_inventory(scope, draft)
            g = plan.unnumbered
            if plan.req.root_required or plan.req.root_forbidden or (
                    sharing.anchors and g is not None and g.forbidden_aggs):
                self._slice_roots(scope, draft)
                anchors &= draft.root_ok
            if plan.need_parents:
                self._parents(draft, sharing.facts.parent)
        return Slice(lo, hi, draft.facts(), tuple(sorted(anchors)), offered)

    def _sharing_done(self, draft: Draft, by_key: dict, eligible: set,
                      anchors: dict) -> Sharing:
        """Each sharing provider also serves its own tree."""
        for ss in eligible:
            anchors.setdefault(draft.root[ss], set()).add(ss)
        if self.plan.need_parents:
            self._parents(draft, {})
        self.has_sharing = True
        return Sharing(draft.facts(), by_key, anchors)


class Reader(FactsReader):
    def __init__(self, conn: Connection, plan: Plan, overlay: Optional[Overlay] = None):
        """`overlay`: extra `used` for this request (overlay.py): the
        statements choose by what is allocated, then the providers the
        overlay names are checked again with it."""
        self.conn = conn
        self.plan = plan
        self.has_sharing = False
        self.overlay = overlay
        # (provider, class) -> (capacity, used) of the providers the
        # overlay names, read as slices meet them.
        self._rooms: dict = {}
        self._rooms_read: set = set()

    # -- the statement cache -----------------------------------------------

    def _built(self, key, build, reuse: bool):
        """Slice statements are re-run with new bounds, within the request
        and across requests of the same shape (building one costs more
        than running it); others are built for their single use."""
        if not reuse:
            return build()
        key = (key, self.plan.slot_shape, self.has_sharing)
        found = _STATEMENTS.get(key)
        if found is None:
            found = build()
            # Writers take the lock so eviction never iterates a dict that
            # another thread is changing; readers need none.
            with _STATEMENTS_LOCK:
                _STATEMENTS[key] = found
                while len(_STATEMENTS) > STATEMENT_CACHE_SIZE:
                    del _STATEMENTS[next(iter(_STATEMENTS))]
        return found

    # -- reading ------------------------------------------------------------

    def _read_rows(self, where, draft: Draft, sharing: Sharing,
                   in_trees: bool = True, params=None) -> bool:
        """Read the providers serving each group; False when, reading the
        trees of a slice, some slot has none there and no sharing provider
        either (the slice has no candidate; the rest is not read)."""
        plan = self.plan
        g = plan.unnumbered
        reuse = params is not None
        if g is not None:
            query = self._built(("unnumbered", in_trees),
                                lambda: statements.unnumbered_select(
                                    plan, where, in_trees, self.has_sharing), reuse)
            result = self.conn.execute(query, params or {})
            col = _columns(result)
            i_id, i_root, i_uuid, i_parent, i_alone = (
                col["id"], col["root_id"], col["uuid"], col["parent_id"], col["alone"])
            flag_cols = [(col[f"rc_{i}"], ("", rc))
                         for i, (rc, _a) in enumerate(plan.wanted)]
            trait_cols = [col[f"trait_{i}"] for i in range(len(g.required))]
            i_ok, i_bad = col.get("agg_ok"), col.get("agg_bad")
            rows = result.all()
            if self.overlay is not None:
                rows = self._overlaid_unnumbered(rows, col, flag_cols, in_trees)
            for row in rows:
                rp, root = row[i_id], row[i_root]
                draft.provider(rp, root, row[i_uuid], row[i_parent])
                if row[i_alone]:
                    draft.alone.add(rp)
                for pos, key in flag_cols:
                    if row[pos]:
                        draft.add(key, rp, root)
                if trait_cols:
                    draft.trait_flags[rp] = tuple(bool(row[p]) for p in trait_cols)
                if i_ok is not None:
                    draft.agg_ok[rp] = bool(row[i_ok])
                if i_bad is not None:
                    draft.agg_bad[rp] = bool(row[i_bad])
            if in_trees and any(key not in draft.rows and key not in sharing.by_key
                                for _pos, key in flag_cols):
                return False
        for suffixes in plan.alike_numbered:
            for suffix in suffixes:
                draft.rows.setdefault(suffix, {})
            query = self._built(("numbered", suffixes[0]),
                                lambda: statements.numbered_select(plan, suffixes[0], where),
                                reuse)
            result = self.conn.execute(query, params or {})
            col = _columns(result)
            i_id, i_root, i_uuid, i_parent = (
                col["id"], col["root_id"], col["uuid"], col["parent_id"])
            rows = result.all()
            if self.overlay is not None:
                rows = self._overlaid_numbered(rows, i_id, suffixes[0])
            if not rows and in_trees and suffixes[0] not in sharing.by_key:
                return False
            for row in rows:
                rp, root = row[i_id], row[i_root]
                draft.provider(rp, root, row[i_uuid], row[i_parent])
                for suffix in suffixes:
                    draft.add(suffix, rp, root)
        return True

    def _read_inventory(self, where, draft: Draft, params=None) -> None:
        if not self.plan.multi_rcs:
            return
        query = self._built("inventory", lambda: statements.inventory_select(self.plan, where),
                            params is not None)
        for row in self.conn.execute(query, params or {}):
            draft.inventory[(row.id, row.rc)] = Room(
                int(capacity.capacity_from(row.total, row.reserved,
                                           row.allocation_ratio)),
                int(row.used or 0) + (self.overlay.get((row.id, row.rc))
                                      if self.overlay is not None else 0),
                row.max_unit)

    # -- an overlay's extra `used` ---------------------------------------------

    def _read_rooms(self, ids: Iterable[int]) -> None:
        ids = sorted(set(ids) - self._rooms_read)
        if not ids:
            return
        self._rooms_read.update(ids)
        rooms = self._rooms
        for stmt, params in selecting(_ROOMS_BY, ids):
            for rp, rc, total, reserved, ratio, used in self.conn.execute(stmt, params):
                rooms[(rp, rc)] = (capacity.capacity_from(total, reserved, ratio),
                                   int(used or 0))

    def _fits(self, rp: int, rc: int, amount: int) -> bool:
        """`amount` more of `rc` fits on `rp` beside what is allocated and
        the overlay's extra (the statements checked it without)."""
        extra = self.overlay.get((rp, rc))
        if not extra:
            return True
        room = self._rooms.get((rp, rc))
        return room is not None and room[1] + extra <= most_used(room[0], amount)

    def _overlaid_unnumbered(self, rows, col: dict, flag_cols: list, in_trees: bool):
        """The unnumbered group's rows with each class the overlay leaves
        no room for unflagged, as unnumbered_select would have had them:
        a provider left with no class goes, and so does one alone in its
        tree that no longer gives every class where no sharing provider
        can help."""
        named = self.overlay.by_provider
        i_id, i_alone = col["id"], col["alone"]
        hit = [row[i_id] for row in rows if row[i_id] in named]
        if not hit:
            return rows
        self._read_rooms(hit)
        need_all = in_trees and not self.has_sharing
        fits, wanted = self._fits, self.plan.wanted
        out = []
        for row in rows:
            rp = row[i_id]
            if rp in named:
                row = list(row)
                for (pos, _key), (rc, amount) in zip(flag_cols, wanted):
                    if row[pos] and not fits(rp, rc, amount):
                        row[pos] = 0
                flags = [row[pos] for pos, _key in flag_cols]
                if not any(flags) or (need_all and row[i_alone] and not all(flags)):
                    continue
            out.append(row)
        return out

    def _overlaid_numbered(self, rows, i_id: int, suffix: str) -> list:
        """A numbered group's rows less the providers the overlay leaves
        without room for one of its amounts."""
        named = self.overlay.by_provider
        hit = [row[i_id] for row in rows if row[i_id] in named]
        if not hit:
            return rows
        self._read_rooms(hit)
        rc_ids = self.plan.lookups.rc_ids
        wanted = [(rc_ids[name], amount)
                  for name, amount in self.plan.req.groups[suffix].resources.items()]
        fits = self._fits
        return [row for row in rows if row[i_id] not in named
                or all(fits(row[i_id], rc, amount) for rc, amount in wanted)]

    def _read_roots(self, lo: int, hi: int, draft: Draft) -> None:
        """Anchor facts: root_required, and the unnumbered group's forbidden
        aggregates on roots (which span their trees, and keep sharing
        providers out of them)."""
        plan = self.plan
        lk = plan.lookups
        g = plan.unnumbered
        bad = g is not None and g.forbidden_aggs
        cols = [RP.c.id.label("id")]
        conds = [RP.c.id.between(lo, hi), RP.c.id == RP.c.root_provider_id]
        conds += [step.clause for step in steps.root_steps(plan.req, lk, RP)]
        if bad:
            cols.append(case((filters.in_any_aggregate(
                RP.c.id, filters.known_ids(g.forbidden_aggs, lk.agg_ids)), 1),
                else_=0).label("agg_bad"))
        for row in self.conn.execute(select(*cols).where(*conds)):
            draft.root_ok.add(row.id)
            if bad:
                draft.root_agg_bad[row.id] = bool(row.agg_bad)

    def _parents(self, draft: Draft, known: dict) -> None:
        """Complete the parent links of the providers read so far with
        their ancestors that serve no group (for same_subtree)."""
        while True:
            missing = {p for p in draft.parent.values()
                       if p is not None and p not in draft.parent and p not in known}
            if not missing:
                return
            for part in chunks(sorted(missing)):
                for row in self.conn.execute(select(
                        RP.c.id, RP.c.parent_provider_id).where(RP.c.id.in_(part))):
                    draft.parent[row.id] = row.parent_provider_id

    def sharing(self) -> Sharing:
        """The sharing providers able to serve some slot, and the trees
        each of them serves."""
        ids = list(self.conn.scalars(_SHARING_PROVIDERS))
        if not ids:
            return NO_SHARING
        draft = Draft()
        for part in chunks(ids):
            self._read_rows(RP.c.id.in_(part), draft, NO_SHARING, in_trees=False)
        by_key = {key: {rp for rps in roots.values() for rp in rps}
                  for key, roots in draft.rows.items()}
        eligible = set().union(*by_key.values()) if by_key else set()
        if not eligible:
            return Sharing(draft.facts(), {}, {})
        for part in chunks(sorted(eligible)):
            self._read_inventory(RP.c.id.in_(part), draft)
        rpa = t.resource_provider_aggregates
        other = rpa.alias("other")
        member = RP.alias("member")
        anchors: dict = {}
        for part in chunks(sorted(eligible)):
            query = (select(rpa.c.resource_provider_id.label("sharing"),
                            member.c.root_provider_id.label("anchor"))
                     .select_from(rpa.join(other, other.c.aggregate_id == rpa.c.aggregate_id)
                                  .join(member, member.c.id == other.c.resource_provider_id))
                     .where(rpa.c.resource_provider_id.in_(part)).distinct())
            for row in self.conn.execute(query):
                anchors.setdefault(row.anchor, set()).add(row.sharing)
        return self._sharing_done(draft, by_key, eligible, anchors)

    def bounds(self) -> Optional[tuple]:
        """The lowest and highest provider id, or None with no provider."""
        # Two queries: SQLite answers min() or max() from the index alone,
        # but scans the table for both at once.
        lo = self.conn.execute(select(func.min(RP.c.id))).scalar()
        if lo is None:
            return None
        return lo, self.conn.execute(select(func.max(RP.c.id))).scalar()

    # -- a slice's reads (see FactsReader) -------------------------------------

    def _slice_scope(self, lo: int, hi: int):
        return lo, hi, {"slice_lo": lo, "slice_hi": hi}

    def _slice_rows(self, scope, draft: Draft, sharing: Sharing) -> bool:
        return self._read_rows(_SLICE, draft, sharing, params=scope[2])

    def _slice_inventory(self, scope, draft: Draft) -> None:
        self._read_inventory(_SLICE, draft, params=scope[2])

    def _slice_roots(self, scope, draft: Draft) -> None:
        self._read_roots(scope[0], scope[1], draft)
