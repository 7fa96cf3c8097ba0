"""The candidate engine's reader over a process's copy of the facts.

It answers what candidates/reader.py answers, Facts value for Facts
value, but takes the providers' trees, inventories, traits and
aggregates from a Snapshot (candidates/snapshot.py) and reads from the
database only what claims change: each inventory row's `used`, for the
trees of one slice at a time. Its filters are candidates/steps.py's:
each step the SQL reader runs as a clause, this reader runs as that
step's test of the provider's facts; tests/test_candidates_memory.py and
tests/test_facts_differential.py hold the two readers to the same
answers.
"""
from __future__ import annotations

from typing import Iterable, NamedTuple, Optional

from sqlalchemy import bindparam, select
from sqlalchemy.engine import Connection

from placement_lite.candidates import steps
from placement_lite.candidates.facts import NO_SHARING, Room, Sharing
from placement_lite.candidates.facts import most_used as _most_used
from placement_lite.candidates.filters import known_ids
from placement_lite.candidates.kept import KeptCache, kept_for
from placement_lite.candidates.overlay import Overlay
from placement_lite.candidates.plan import Plan
from placement_lite.candidates.reader import Draft, FactsReader, chunks, selecting
from placement_lite.candidates.snapshot import Snapshot
from placement_lite.db import tables as t
from placement_lite.db.engine import driver_rows

_INV = t.inventories
RP = t.resource_providers
_USED = select(_INV.c.resource_provider_id, _INV.c.resource_class_id, _INV.c.used)
# Rows with nothing used are not read: absent means 0.
_USED_RANGE = _USED.where(
    _INV.c.resource_provider_id.between(bindparam("lo"), bindparam("hi")),
    _INV.c.used != 0)
_USED_LISTED = _USED.where(
    _INV.c.resource_provider_id.in_(bindparam("ids", expanding=True)),
    _INV.c.used != 0)
_UNKNOWN = object()


def _limits(rp: int, checks) -> tuple:
    """Per class of `checks` (MemoryReader._checks), the key of its `used`
    and the most that may be used for the amount to fit: kept with the
    copy, so a request compares without arithmetic."""
    return tuple(((rp, rc), _most_used(cap, amount)) for rc, amount, cap in checks)


class _Flags:
    """What the unnumbered group's providers report besides passing its
    filters (as the SQL reader's columns do): which of its any-of trait
    sets each has, and, read as a sharing provider, whether its own
    aggregates satisfy member_of and touch a forbidden one."""

    def __init__(self, group, lk):
        self.any_of = tuple(frozenset(known_ids(s, lk.trait_ids)) for s in group.required)
        self.member_of = tuple(frozenset(known_ids(s, lk.agg_ids)) for s in group.member_of)
        self.bad_aggs = frozenset(known_ids(group.forbidden_aggs, lk.agg_ids))

    def member(self, aggs: frozenset) -> bool:
        return all(not aggs.isdisjoint(s) for s in self.member_of)


class UnnumberedFacts(NamedTuple):
    """What a provider's facts decide for the unnumbered group."""
    root: int
    limits: tuple  # per class: ((rp, class), the most `used` may be)
    trait_flags: tuple  # has one trait of each any-of set
    alone: bool  # alone in its tree
    in_tree_ok: bool  # passes the filters that hold in its own tree
    agg_ok: bool  # its own aggregates satisfy member_of
    agg_bad: bool  # it is in a forbidden aggregate



class MemoryReader(FactsReader):
    def __init__(self, conn: Connection, plan: Plan, snapshot: Snapshot,
                 kept: Optional[KeptCache] = None, overlay: Optional[Overlay] = None):
        """`kept`: where the process keeps what each request shape's
        filters decide of each provider (None: this request alone).
        `overlay`: extra `used` for this request (overlay.py), added to
        every `used` read, so all that reads `used` sees it."""
        self.conn = conn
        self.overlay = overlay
        self.plan = plan
        self.snap = snapshot
        self.kept = kept
        self.has_sharing = False
        # (rp, class id) -> used, for every provider in `used_read`.
        self.used: dict = {}
        self.used_read: set = set()
        self.all_read = False
        g = plan.unnumbered
        self._unnumbered = _Flags(g, plan.lookups) if g is not None else None
        # Each group's filter steps (steps.py), built on a first verdict
        # this request cannot find kept.
        self._steps: dict = {}

    # -- used ---------------------------------------------------------------

    def read_used(self, ids: Iterable[int]) -> None:
        """Read `used` for the inventory of these providers (those not
        read yet in this request)."""
        if self.all_read:
            return
        ids = sorted(set(ids) - self.used_read)
        if not ids:
            return
        self.used_read.update(ids)
        used = self.used
        overlay = self.overlay
        if overlay is not None:
            asked = set(ids)
        for stmt, params in selecting((_USED_RANGE, _USED_LISTED), ids):
            # Thousands of rows per full answer: as the driver's tuples.
            rows = driver_rows(self.conn, stmt, params)
            if overlay is None:
                used.update({(rp, rc): n for rp, rc, n in rows})
            else:
                # A range may also give providers read before, whose
                # `used` holds their extra already: those rows are left.
                used.update({(rp, rc): n for rp, rc, n in rows if rp in asked})
        if overlay is not None:
            overlay.add(used, asked)

    def read_all_used(self) -> None:
        """Read `used` for every provider's inventory, in one statement:
        for an answer over every tree (by_tree.tree_parts), or the rest of
        one given as it is found (flow.py). What was read before stays as
        read: the candidates given so far were made from it."""
        found = self.snap.bounds
        if found is not None:
            # Rows of a provider created since the copy was read are not
            # looked up: harmless.
            rows = driver_rows(self.conn, _USED_RANGE, {"lo": found[0], "hi": found[1]})
            read = self.used_read
            fresh = ({(rp, rc): n for rp, rc, n in rows if rp not in read}
                     if read else {(rp, rc): n for rp, rc, n in rows})
            if self.overlay is not None:
                self.overlay.add(fresh, skip=read)
            self.used.update(fresh)
        self.all_read = True

    # -- the filters ----------------------------------------------------------

    def _static(self, kind) -> dict:
        """Per provider id, what its facts alone decide for this request
        shape: worked out once per copy and shape (by the caller, in its
        loop, on a provider's first ask), so a request only checks
        capacity against `used`."""
        return kept_for(self.kept, self.snap, (self.plan.slot_shape, kind))

    def verdicts(self, kind: str, suffix: str = "", resources=()) -> tuple:
        """(what is kept, how to work out one provider's) of the verdicts
        of a group's filters: kind "unnumbered", or "numbered" for group
        `suffix` asking for `resources` ((class id, amount) pairs)."""
        if kind == "unnumbered":
            return self._static("unnumbered"), self._unnumbered_facts
        return (self._static(("numbered", suffix)),
                self._numbered_facts(suffix, resources))

    def _checks(self, inv: dict, resources) -> list:
        """(class, amount, capacity or None where the unit limits refuse)."""
        out = []
        for rc, amount in resources:
            row = inv.get(rc)
            ok = (row is not None and row.min_unit <= amount <= row.max_unit
                  and row.step_size > 0 and amount % row.step_size == 0)
            out.append((rc, amount, row.capacity if ok else None))
        return out

    def _tests(self, suffix: str) -> tuple:
        """The tests of a group's filter steps, the very steps the SQL
        reader runs as clauses: for the unnumbered group, (those holding
        everywhere, those holding in the provider's own tree)."""
        found = self._steps.get(suffix)
        if found is None:
            group = self.plan.req.groups[suffix]
            lk = self.plan.lookups
            if suffix:
                found = (tuple(s.test for s in steps.numbered_steps(group, lk, RP)
                               if s.test is not None),)
            else:
                every = steps.unnumbered_steps(group, lk, RP)
                found = (tuple(s.test for s in every if s.kind in steps.EVERYWHERE),
                         tuple(s.test for s in every if s.kind not in steps.EVERYWHERE))
            self._steps[suffix] = found
        return found

    def view(self, rp: int) -> steps.ProviderView:
        snap = self.snap
        root = snap.root[rp]
        return steps.ProviderView(rp, snap.traits[rp], snap.aggregates[rp], root,
                                  snap.aggregates[root])

    def _unnumbered_facts(self, rp: int) -> Optional[UnnumberedFacts]:
        """For the unnumbered group: None when the provider can never
        serve it; else what its facts decide."""
        snap, flags = self.snap, self._unnumbered
        checks = self._checks(snap.inventory[rp], self.plan.wanted)
        if all(cap is None for _rc, _a, cap in checks):
            return None
        everywhere, in_tree = self._tests("")
        view = self.view(rp)
        if not all(test(view) for test in everywhere):
            return None
        traits, aggs = view.traits, view.aggregates
        return UnnumberedFacts(
            view.root, _limits(rp, checks),
            tuple(not traits.isdisjoint(s) for s in flags.any_of),
            len(snap.members[view.root]) == 1, all(test(view) for test in in_tree),
            flags.member(aggs), not aggs.isdisjoint(flags.bad_aggs))

    def _unnumbered_rows(self, providers, draft: Draft, in_trees: bool) -> None:
        """The providers (in (root, id) order) able to serve some class
        of the unnumbered group, as SQL reader's unnumbered_select."""
        asked = self._unnumbered
        snap = self.snap
        need_all = in_trees and not self.has_sharing
        used = self.used.get
        keys = [("", rc) for rc, _amount in self.plan.wanted]
        # Each class's providers by root, filled here and filed in the
        # draft only when some provider serves the class: an absent key
        # tells the caller no provider in these trees does.
        filed = [draft.rows.get(key) or {} for key in keys]
        flag_aggs = not in_trees and bool(asked.member_of)
        flag_bad = not in_trees and bool(self.plan.unnumbered.forbidden_aggs)
        any_of = bool(asked.any_of)
        uuid, parent = snap.uuid, snap.parent
        d_uuid, d_root, d_parent, alone_ids = (
            draft.uuid, draft.root, draft.parent, draft.alone)
        static, build = self._static("unnumbered"), self._unnumbered_facts
        known = static.get  # bound once: Kept is a dict subclass
        for rp in providers:
            entry = known(rp, _UNKNOWN)
            if entry is _UNKNOWN:
                entry = static.settle(rp, build)
            if entry is None:
                continue
            root, limits, trait_flags, alone, in_tree_ok, agg_ok, agg_bad = entry
            if in_trees and not in_tree_ok:
                continue
            flags = [used(key, 0) <= most for key, most in limits]
            if not any(flags):
                continue
            if need_all and alone and not (all(flags) and all(trait_flags)):
                continue
            if flag_aggs:
                draft.agg_ok[rp] = agg_ok
            if flag_bad:
                draft.agg_bad[rp] = agg_bad
            # Draft.provider, without a call per provider.
            d_uuid[rp] = uuid[rp]
            d_root[rp] = root
            d_parent[rp] = parent[rp]
            if alone:
                alone_ids.add(rp)
            for by_root, flag in zip(filed, flags):
                if flag:
                    by_root.setdefault(root, []).append(rp)
            if any_of:
                draft.trait_flags[rp] = trait_flags
        for key, by_root in zip(keys, filed):
            if by_root:
                draft.rows[key] = by_root

    def _numbered_facts(self, suffix: str, resources):
        """For a numbered group: rp -> None when the provider can never
        serve it, else per class its `used` key and the most that may be
        used for the amount to fit."""
        snap = self.snap

        def build(rp: int):
            checks = self._checks(snap.inventory[rp], resources)
            if any(cap is None for _rc, _a, cap in checks):
                return None
            (tests,) = self._tests(suffix)
            view = self.view(rp)
            if not all(test(view) for test in tests):
                return None
            return _limits(rp, checks)
        return build

    def _numbered_rows(self, providers, suffix: str, resources) -> list:
        used = self.used.get
        static = self._static(("numbered", suffix))
        build = self._numbered_facts(suffix, resources)
        out = []
        known = static.get  # bound once: Kept is a dict subclass
        for rp in providers:
            limits = known(rp, _UNKNOWN)
            if limits is _UNKNOWN:
                limits = static.settle(rp, build)
            if limits is None:
                continue
            for key, most in limits:
                if used(key, 0) > most:
                    break
            else:
                out.append(rp)
        return out

    def _rows(self, providers: list, draft: Draft, sharing: Sharing,
              in_trees: bool = True) -> bool:
        """As Reader._read_rows, over `providers` in (root, id) order."""
        plan, snap = self.plan, self.snap
        if self._unnumbered is not None:
            self._unnumbered_rows(providers, draft, in_trees)
            if in_trees and any(key not in draft.rows and key not in sharing.by_key
                                for key in (("", rc) for rc, _a in plan.wanted)):
                return False
        rc_ids = plan.lookups.rc_ids
        for suffixes in plan.alike_numbered:
            for suffix in suffixes:
                draft.rows.setdefault(suffix, {})
            group = plan.req.groups[suffixes[0]]
            resources = [(rc_ids[name], amount)
                         for name, amount in sorted(group.resources.items())]
            rows = self._numbered_rows(providers, suffixes[0], resources)
            if not rows and in_trees and suffixes[0] not in sharing.by_key:
                return False
            uuid, parent, roots = snap.uuid, snap.parent, snap.root
            d_uuid, d_root, d_parent = draft.uuid, draft.root, draft.parent
            filed = [draft.rows[suffix] for suffix in suffixes]
            for rp in rows:  # Draft.provider, without a call each
                root = d_root[rp] = roots[rp]
                d_uuid[rp] = uuid[rp]
                d_parent[rp] = parent[rp]
                for by_root in filed:
                    by_root.setdefault(root, []).append(rp)
        return True

    def _inventory(self, providers: Iterable[int], draft: Draft) -> None:
        multi = self.plan.multi_rcs
        if not multi:
            return
        snap, used = self.snap, self.used
        for rp in providers:
            for rc, row in snap.inventory[rp].items():
                if rc in multi:
                    draft.inventory[(rp, rc)] = Room(
                        int(row.capacity), used.get((rp, rc), 0), row.max_unit)

    def _roots(self, roots: list, draft: Draft) -> None:
        """As Reader._read_roots: root_required, and the unnumbered
        group's forbidden aggregates on roots."""
        plan, snap = self.plan, self.snap
        lk = plan.lookups
        g = plan.unnumbered
        bad = g is not None and g.forbidden_aggs
        bad_ids = frozenset(known_ids(g.forbidden_aggs, lk.agg_ids)) if bad else ()
        tests = [step.test for step in steps.root_steps(plan.req, lk, RP)]
        for root in roots:
            if tests and not all(test(self.view(root)) for test in tests):
                continue
            draft.root_ok.add(root)
            if bad:
                draft.root_agg_bad[root] = not snap.aggregates[root].isdisjoint(bad_ids)

    def _parents(self, draft: Draft, known: dict) -> None:
        parent = self.snap.parent
        while True:
            missing = {p for p in draft.parent.values()
                       if p is not None and p not in draft.parent and p not in known}
            if not missing:
                return
            for p in missing:
                draft.parent[p] = parent[p]

    # -- the reader's interface (see engine.Search) ---------------------------

    def sharing(self) -> Sharing:
        snap = self.snap
        ids = snap.sharing
        if not ids:
            return NO_SHARING
        # Only the usage of those whose facts let them serve some slot
        # matters: the others are left out below whatever they use.
        self.read_used([rp for rp in ids if self._may_serve(rp)])
        draft = Draft()
        root = snap.root
        for part in chunks(ids):
            self._rows(sorted(part, key=lambda rp: (root[rp], rp)), draft,
                       NO_SHARING, in_trees=False)
        by_key = {key: {rp for rps in roots.values() for rp in rps}
                  for key, roots in draft.rows.items()}
        eligible = set().union(*by_key.values()) if by_key else set()
        if not eligible:
            return Sharing(draft.facts(), {}, {})
        self._inventory(sorted(eligible), draft)
        anchors: dict = {}
        for ss in eligible:
            for agg in snap.aggregates[ss]:
                for member in snap.in_aggregate.get(agg, ()):
                    anchors.setdefault(root[member], set()).add(ss)
        return self._sharing_done(draft, by_key, eligible, anchors)

    def _may_serve(self, rp: int) -> bool:
        """The provider's facts let it serve some slot with nothing used
        (its kept verdicts, worked out on a first ask)."""
        rc_ids = self.plan.lookups.rc_ids
        kinds = [self.verdicts("unnumbered")] + [
            self.verdicts("numbered", suffixes[0], [
                (rc_ids[name], amount) for name, amount in
                sorted(self.plan.req.groups[suffixes[0]].resources.items())])
            for suffixes in self.plan.alike_numbered]
        for kept, build in kinds:
            found = kept.get(rp, _UNKNOWN)
            if (kept.settle(rp, build) if found is _UNKNOWN else found) is not None:
                return True
        return False

    def bounds(self) -> Optional[tuple]:
        return self.snap.bounds

    # -- a slice's reads (see FactsReader) -------------------------------------

    def _slice_scope(self, lo: int, hi: int):
        snap = self.snap
        roots = snap.roots_between(lo, hi)
        providers = [rp for r in roots for rp in snap.members[r]]
        self.read_used(providers)
        return roots, providers

    def _slice_rows(self, scope, draft: Draft, sharing: Sharing) -> bool:
        return self._rows(scope[1], draft, sharing)

    def _slice_inventory(self, scope, draft: Draft) -> None:
        self._inventory(scope[1], draft)

    def _slice_roots(self, scope, draft: Draft) -> None:
        self._roots(scope[0], draft)
