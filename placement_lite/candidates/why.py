"""Why one provider's tree is not in a candidates answer, in words and
numbers. Which providers pass which step is asked of the database with
the reader's own clauses (candidates/steps.py); the facts read here only
word the reason."""
from __future__ import annotations

from sqlalchemy import select

from placement_lite.candidates import filters, steps
from placement_lite.candidates.explain_reserved import KIND, short_on
from placement_lite.candidates.plan import Plan
from placement_lite.db import tables as t
from placement_lite.ledger import capacity

RP = t.resource_providers


class Why:
    def __init__(self, conn, plan: Plan, rec, reserved=None):
        self.conn = conn
        self.plan = plan
        self.rec = rec  # explain.Recorder of the real search
        # explain_reserved.Reserved: the overlay the search ran with.
        self.reserved = reserved
        self.names = {rc: name for name, rc in plan.lookups.rc_ids.items()}

    # -- facts for the wording ---------------------------------------------

    def _uuids(self, ids) -> dict:
        return dict(self.conn.execute(select(RP.c.id, RP.c.uuid).where(
            RP.c.id.in_(sorted(ids)))).all())

    def _linked(self, ids, link, link_col, named, name_col) -> dict:
        """Provider id -> the set of `name_col` of the `named` rows its
        `link` rows (joined on `link_col`) tie it to."""
        out: dict = {rp: set() for rp in ids}
        for rp, name in self.conn.execute(
                select(link.c.resource_provider_id, name_col)
                .join(named, named.c.id == link_col)
                .where(link.c.resource_provider_id.in_(sorted(ids)))):
            out[rp].add(name)
        return out

    def _traits(self, ids) -> dict:
        rpt, tr = t.resource_provider_traits, t.traits
        return self._linked(ids, rpt, rpt.c.trait_id, tr, tr.c.name)

    def _aggregates(self, ids) -> dict:
        rpa, agg = t.resource_provider_aggregates, t.placement_aggregates
        return self._linked(ids, rpa, rpa.c.aggregate_id, agg, agg.c.uuid)

    def _inventory(self, rp, rc):
        inv = t.inventories
        row = self.conn.execute(select(
            inv.c.total, inv.c.reserved, inv.c.min_unit, inv.c.max_unit,
            inv.c.step_size, inv.c.allocation_ratio,
            inv.c.used).where(
                inv.c.resource_provider_id == rp,
                inv.c.resource_class_id == rc)).first()
        return row

    # -- wording -----------------------------------------------------------

    def _capacity(self, rp, step) -> str:
        name = self.names[step.rc]
        row = self._inventory(rp, step.rc)
        if row is None:
            return f"has no {name} inventory"
        amount = step.amount
        if amount > row.max_unit:
            return f"{name}: needs {amount}, above its max_unit {row.max_unit}"
        if amount < row.min_unit:
            return f"{name}: needs {amount}, below its min_unit {row.min_unit}"
        if amount % row.step_size:
            return f"{name}: needs {amount}, not a multiple of its step_size {row.step_size}"
        cap = int(capacity.capacity_from(row.total, row.reserved, row.allocation_ratio))
        used = int(row.used or 0)
        # What reservations hold there, where the search left room for it.
        worded = self.reserved.worded((rp, step.rc), name, amount, cap, used) \
            if self.reserved is not None else None
        return worded or (f"{name}: needs {amount}, free {cap - used} of capacity "
                          f"{cap} (used {used})")

    def _word(self, rp, step, root, traits, aggs) -> str:
        kind = step.kind
        if kind in ("resources", KIND):
            return self._capacity(rp, step)
        if kind == "required":
            return f"lacks trait {step.names[0]}"
        if kind == "any_of":
            return "has none of traits " + ", ".join(step.names)
        if kind == "forbidden":
            return "has forbidden trait " + ", ".join(
                sorted(traits.get(rp, set()) & set(step.names)))
        if kind == "member_of":
            return "neither it nor its root is in aggregate(s) " + step.detail \
                if not step.numbered else "not in aggregate(s) " + step.detail
        if kind == "forbidden_aggregates":
            bad = (aggs.get(rp, set()) | (aggs.get(root, set()) if not step.numbered
                                          else set())) & set(step.names)
            return "in forbidden aggregate " + ", ".join(sorted(bad))
        return f"not in the tree of {step.detail}"

    def _reserved_step(self, rc, amount):
        return self.reserved.step(RP, rc, amount, self.names[rc])

    # -- per group ---------------------------------------------------------

    def _failures(self, candidates, group_steps) -> tuple:
        """(providers passing every step, [(step, providers failing it)])
        in step order. Every step is asked of every candidate, not only
        of those the steps before kept: a provider short of room and
        lacking a trait has two reasons, and an operator fixing only the
        first would still find the tree out (issue 26)."""
        left = set(candidates)
        failed: list = []
        for step in group_steps:
            passing = set(self.conn.scalars(select(RP.c.id).where(
                RP.c.id.in_(sorted(candidates)), step.clause)))
            if set(candidates) - passing:
                failed.append((step, set(candidates) - passing))
            left &= passing
        return left, failed

    def _explain_failures(self, label, failed, root, uuids) -> list:
        every = set().union(*(rps for _step, rps in failed)) if failed else set()
        traits = self._traits(every | {root})
        aggs = self._aggregates(every | {root})
        return [{"group": label, "step": step.kind, "provider": uuids[rp],
                 "reason": f"{uuids[rp]}: {self._word(rp, step, root, traits, aggs)}"}
                for step, rps in failed for rp in sorted(rps)]

    def _numbered(self, suffix, cands, root, uuids) -> list:
        group = self.plan.req.groups[suffix]
        found = steps.numbered_steps(group, self.plan.lookups, RP)
        if self.reserved is not None:
            at = sum(1 for s in found if s.kind == "resources")
            found[at:at] = [self._reserved_step(s.rc, s.amount) for s in found[:at]]
        found = [_Numbered(s, True) for s in found]
        passing, failed = self._failures(cands, found)
        if passing:
            return []
        return [{"group": suffix, "step": None, "provider": None,
                 "reason": f"group {suffix}: no provider of the tree passes "
                 "its filters"}] + self._explain_failures(suffix, failed, root, uuids)

    def _unnumbered(self, cands, root, uuids, sharers) -> list:
        g = self.plan.unnumbered
        lk = self.plan.lookups
        out, serving, short = [], set(), set()
        rest = [_Numbered(s, False) for s in steps.unnumbered_steps(g, lk, RP)]
        kept, rest_failed = self._failures(cands, rest)
        for name, amount in sorted(g.resources.items()):
            rc = lk.rc_ids[name]
            room = [_Numbered(steps.Step(
                "resources", f"{name}:{amount}",
                lambda rc=rc, amount=amount: filters.has_capacity(RP.c.id, rc, amount),
                rc=rc, amount=amount), False)]
            if self.reserved is not None:
                room.append(_Numbered(self._reserved_step(rc, amount), False))
            roomy, failed = self._failures(cands, room)
            passing = roomy & kept
            if passing:
                serving |= passing
                continue
            if all(self._inventory(rp, rc) is None for rp in cands):
                where = "no sharing provider is in its aggregates" if not sharers \
                    else "no sharing provider in its aggregates has it"
                out.append({"group": "", "step": "resources", "provider": None,
                            "reason": f"no provider in the tree has {name} and {where}"})
                continue
            out.append({"group": "", "step": "resources", "provider": None,
                        "reason": f"no provider of the tree (or sharing one) "
                        f"can give {name}:{amount}"})
            out += self._explain_failures("", failed, root, uuids)
            short |= {rp for rp in cands if self._inventory(rp, rc) is not None}
        # The other filters once, after every class, as explain orders
        # them; only for providers that have a class nobody could give,
        # since elsewhere they keep out nothing the tree needed.
        out += self._explain_failures("", [(step, rps & short) for step, rps in
                                           rest_failed if rps & short], root, uuids)
        if not g.required:
            return out
        # With every class served, the traits must be among the servers;
        # otherwise the request fails already, and a trait counts as
        # missing only if no provider of the tree (or sharing one) has it.
        served = not out
        traits = self._traits(serving if served else set(cands))
        have = set().union(*traits.values()) if traits else set()
        whom = "no provider serving the unnumbered group" if served \
            else "no provider of the tree (or sharing one)"
        for any_of in g.required:
            if not have & any_of:
                names = ", ".join(sorted(any_of))
                out.append({"group": "", "step": "required" if len(any_of) == 1
                            else "any_of", "provider": None,
                            "reason": f"{whom} has trait {names}" if len(any_of) == 1
                            else f"{whom} has any of traits {names}"})
        return out

    def _root_reasons(self, root, uuids) -> list:
        req = self.plan.req
        traits = self._traits({root})[root]
        out = [f"root lacks trait {n}" for n in sorted(req.root_required - traits)]
        out += [f"root has forbidden trait {n}"
                for n in sorted(req.root_forbidden & traits)]
        return [{"group": None, "step": "root_required", "provider": uuids[root],
                 "reason": f"{uuids[root]}: {r}"} for r in out]

    def _search_reasons(self, root) -> list:
        rec = self.rec
        if root not in rec.combined and root not in rec.unserved and (
                not rec.reached(root) or root in rec.anchors):
            # Its slice was read, or not, but the search had its
            # candidates before it came to this tree.
            return [{"group": None, "step": "limit", "provider": None, "reason":
                     "not reached: the search had its candidates before this tree"}]
        found, refused = rec.combined.get(root, (0, 0))
        if refused and not found:
            return [{"group": None, "step": "one_provider_per_tree", "provider": None,
                     "reason": "before 1.29 a candidate takes from one provider "
                     f"per tree; all {refused} combinations here take from more"}]
        plan = self.plan
        rules = (["group_policy=isolate"] if plan.isolate else []) + (
            ["same_subtree"] if plan.req.same_subtrees else []) + (
            ["merged capacity"] if plan.multi_rcs else [])
        return [{"group": None, "step": "group_policy", "provider": None, "reason":
                 "every group has providers, but no combination of them "
                 "satisfies " + (", ".join(rules) or "the groups together")}]

    def report(self, uuid: str) -> dict:
        row = self.conn.execute(select(RP.c.id, RP.c.root_provider_id).where(
            RP.c.uuid == uuid)).first()
        if row is None:
            return {"tree": None, "excluded": True, "candidates": 0, "reasons": [
                {"group": None, "step": None, "provider": uuid,
                 "reason": f"no resource provider has uuid {uuid}"}]}
        root = row.root_provider_id
        tree = set(self.conn.scalars(select(RP.c.id).where(
            RP.c.root_provider_id == root)))
        sharing = self.rec.sharing
        sharers = set(sharing.anchors.get(root, ())) if sharing else set()
        cands = tree | sharers
        uuids = self._uuids(cands)
        out = self._report(root, tree, cands, uuids, sharers)
        short = short_on(self.conn, row.id)
        if short:
            out["short"] = short
        return out

    def _report(self, root, tree, cands, uuids, sharers) -> dict:
        result = self.rec.result
        count = sum(1 for c in result.candidates if tree & set(c.providers))
        out = {"tree": uuids[root], "excluded": not count, "candidates": count,
               "reasons": []}
        if count:
            return out
        reasons = self._root_reasons(root, uuids)
        for suffix in self.plan.req.groups:
            reasons += self._numbered(suffix, cands, root, uuids) if suffix \
                else self._unnumbered(cands, root, uuids, sharers)
        out["reasons"] = reasons or self._search_reasons(root)
        return out


class _Numbered:
    """A step, and whether it is a numbered group's (its wording differs)."""
    __slots__ = ("step", "numbered")

    def __init__(self, step, numbered):
        self.step = step
        self.numbered = numbered

    def __getattr__(self, name):
        return getattr(self.step, name)
