"""Why a candidates query answers what it does.

explain() runs the real search (engine.find, with the settings of the
real route) with an observer, so the candidates it reports are the
answer. Around it, it counts what each of a group's filters removes,
with the very clauses the reader uses (candidates/steps.py), and, for
named providers, says which step kept their tree out and with what
numbers.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

from sqlalchemy import and_, distinct, func, select
from sqlalchemy.engine import Connection

from placement_lite.candidates import engine, filters, steps
from placement_lite.candidates.explain_reserved import KIND, Reserved
from placement_lite.candidates.facts import Sharing, Slice
from placement_lite.candidates.plan import Plan
from placement_lite.candidates.query import CandidateRequest
from placement_lite.candidates.why import Why
from placement_lite.db import tables as t

RP = t.resource_providers
FIRST_FEW = 5


@dataclass
class Count:
    """One step: how many providers and trees were left before and after
    it (None where the step does not count that)."""
    step: str
    detail: str
    providers_before: Optional[int]
    providers_after: Optional[int]
    trees_before: Optional[int]
    trees_after: Optional[int]


@dataclass
class Explanation:
    groups: dict  # suffix -> [Count, ...]
    search: list  # [Count, ...] the engine's own steps
    result: engine.Result
    providers: dict = field(default_factory=dict)  # uuid -> report dict
    randomized: bool = False


class Recorder(engine.Observer):
    """Remembers what the search did, tree by tree."""

    def __init__(self):
        self.sharing: Optional[Sharing] = None
        self.offered: set = set()  # roots some slot found a provider in
        self.anchors: set = set()  # of those, passing root_required
        self.unserved: dict = {}  # root -> slot index nobody serves
        self.combined: dict = {}  # root -> (found, refused by older rule)
        self.slices: list = []  # (lo, hi) of every slice read
        self.result: Optional[engine.Result] = None
        self.drawn: Optional[list] = None  # what drawing.py kept, if it ran

    def shared(self, sharing: Sharing) -> None:
        self.sharing = sharing

    def sliced(self, lo: int, hi: int, part: Optional[Slice]) -> None:
        self.slices.append((lo, hi))
        if part is not None:
            self.offered |= part.offered
            self.anchors.update(part.anchors)

    def drew(self, found: list) -> None:
        self.drawn = list(found)

    def tree_unserved(self, anchor: int, slot: int) -> None:
        self.unserved[anchor] = slot

    def tree_combined(self, anchor: int, found: int, older_rule: int) -> None:
        self.combined[anchor] = (found, older_rule)

    def reached(self, root: int) -> bool:
        return any(lo <= root <= hi for lo, hi in self.slices)


def _counts(conn, clauses) -> tuple:
    row = conn.execute(select(func.count(), func.count(distinct(
        RP.c.root_provider_id))).where(*clauses)).one()
    return int(row[0]), int(row[1])


def _roots_serving(conn, clauses) -> dict:
    """root -> providers passing `clauses`."""
    out: dict = {}
    for rp, root in conn.execute(select(RP.c.id, RP.c.root_provider_id).where(*clauses)):
        out.setdefault(root, set()).add(rp)
    return out


def numbered_steps(plan: Plan, suffix: str, reserved=None) -> list:
    """A numbered group's steps, with the reservations' one after its
    capacity steps where the search ran with an overlay."""
    group = plan.req.groups[suffix]
    found = steps.numbered_steps(group, plan.lookups, RP)
    if reserved is None:
        return found
    at = sum(1 for s in found if s.kind == "resources")
    wanted = [(s.rc, s.amount) for s in found[:at]]
    return found[:at] + [reserved.funnel_step(RP, wanted)] + found[at:]


def _numbered_funnel(conn, plan: Plan, suffix: str, total: tuple,
                     reserved=None) -> list:
    out, clauses, before = [], [], total
    for step in numbered_steps(plan, suffix, reserved):
        clauses.append(step.clause)
        after = _counts(conn, clauses)
        out.append(Count(step.kind, step.detail, before[0], after[0], before[1], after[1]))
        before = after
    return out


def _unnumbered_funnel(conn, plan: Plan, total: tuple, reserved=None) -> tuple:
    """Per class: the trees where some provider can give it (every class
    so far); then what reservations hold (`reserved`: explain_reserved's,
    where the search ran with an overlay); then each filter on the
    providers giving them; then the required traits, which hold for the
    providers chosen together (here: some provider giving a class in the
    tree has one of each set). Returns the counts and the roots served in
    the end."""
    g = plan.unnumbered
    lk = plan.lookups
    out: list = []
    before = total
    serving: dict = {}  # class id -> root -> providers
    roots_left: set = set()

    def tally(step, detail):
        nonlocal before, roots_left
        trees = None
        for by_root in serving.values():
            trees = set(by_root) if trees is None else trees & set(by_root)
        roots_left = trees or set()
        providers = set()
        for by_root in serving.values():
            for root in roots_left:
                providers |= by_root[root]
        after = (len(providers), len(roots_left))
        out.append(Count(step, detail, before[0], after[0], before[1], after[1]))
        before = after

    capacity = {}
    for name, amount in sorted(g.resources.items()):
        rc = lk.rc_ids[name]
        capacity[rc] = filters.has_capacity(RP.c.id, rc, amount)
        serving[rc] = _roots_serving(conn, [capacity[rc]])
        tally("resources", f"{name}:{amount}")
    if reserved is not None:
        for name, amount in sorted(g.resources.items()):
            rc = lk.rc_ids[name]
            capacity[rc] = and_(capacity[rc], reserved.clause(RP.c.id, rc, amount))
            serving[rc] = _roots_serving(conn, [capacity[rc]])
        tally(KIND, reserved.detail)
    so_far: list = []
    for step in steps.unnumbered_steps(g, lk, RP):
        so_far.append(step.clause)
        serving = {rc: _roots_serving(conn, [capacity[rc]] + so_far) for rc in serving}
        tally(step.kind, step.detail)
    for any_of in g.required:
        marked = set(conn.scalars(select(RP.c.id).where(filters.has_any_trait(
            RP.c.id, filters.known_ids(any_of, lk.trait_ids)))))
        keep = {root for root in roots_left
                if any(by_root[root] & marked for by_root in serving.values())}
        serving = {rc: {r: v for r, v in by_root.items() if r in keep}
                   for rc, by_root in serving.items()}
        tally("required" if len(any_of) == 1 else "any_of", ",".join(sorted(any_of)))
    return out, roots_left


def _search_counts(plan: Plan, rec: Recorder, result: engine.Result,
                   own: int, bound: Optional[int]) -> list:
    """The engine's own steps, over the trees the search reached."""
    req = plan.req
    out = []
    offered = {a for a in rec.offered if rec.reached(a)}
    sharing = rec.sharing
    eligible = set().union(*sharing.by_key.values()) if sharing and sharing.by_key else set()
    served = rec.anchors - set(rec.unserved)
    out.append(Count("offered", "trees where some group has a provider, or a "
                     "sharing provider serves", None, None, None, len(offered)))
    if req.root_required or req.root_forbidden:
        detail = ",".join(sorted(req.root_required) + [
            "!" + n for n in sorted(req.root_forbidden)])
        out.append(Count("root_required", detail, None, None, len(offered),
                         len(rec.anchors)))
    serving = len(sharing.anchors) if sharing else 0
    out.append(Count("sharing", f"every group (and class of the unnumbered "
                     f"group) has a provider in the tree or one of "
                     f"{len(eligible)} sharing providers (serving {serving} "
                     f"trees); {own} trees by their own providers alone",
                     None, None, len(rec.anchors), len(served)))
    combined = {a for a, (found, refused) in rec.combined.items() if found or refused}
    rules = []
    if plan.isolate:
        rules.append("group_policy=isolate")
    if req.same_subtrees:
        rules += ["same_subtree=" + ",".join(sorted(s)) for s in req.same_subtrees]
    if plan.multi_rcs:
        rules.append("merged capacity")
    if plan.unnumbered is not None and plan.unnumbered.required:
        rules.append("the unnumbered group's traits together")
    out.append(Count("group_policy", "; ".join(rules) or "nothing to check",
                     None, None, len(served), len(combined)))
    if not req.nested_aware:
        out.append(Count("one_provider_per_tree", "before 1.29", None, None,
                         len(combined), sum(1 for f, _r in rec.combined.values() if f)))
    # A tree left mid-way at the bound reports nothing: count what came.
    found = max(sum(f for f, _r in rec.combined.values()), len(result.candidates))
    detail = f"limit={req.limit}" if req.limit else "no limit"
    if bound:
        detail += f"; search bound {bound}"
    out.append(Count("limit", detail, found, len(result.candidates), None, None))
    return out


def explain(conn: Connection, req: CandidateRequest, max_candidates: int = 0,
            randomize: bool = False, providers: Sequence[str] = (),
            snapshot=None, reserved: Optional[Reserved] = None) -> Explanation:
    """The real answer to `req`, how each step narrowed it, and why each
    provider named (by uuid) is not in it. `snapshot`: the route's copy
    of the facts (engine.find), so the answer is the route's.
    `reserved`: the overlay the route answers with (what reservations
    hold, explain_reserved.Reserved), or None: searched with it, counted
    as a step of each group and worded in the reasons."""
    overlay = reserved.overlay if reserved is not None else None
    lookups = engine.resolve(conn, req, snapshot)
    rec = Recorder()
    result = engine.find(conn, req, max_candidates, randomize, observer=rec,
                         lookups=lookups, snapshot=snapshot, overlay=overlay) \
        if lookups else engine.Result([], {}, {})
    if lookups is None:
        # An in_tree naming no provider: nothing is searched.
        return Explanation({}, [Count("in_tree", "names no provider", None, None,
                                      None, 0)], result, {
            uuid: {"excluded": True, "reasons": [
                {"group": None, "step": "in_tree",
                 "reason": "in_tree names no provider"}]} for uuid in providers})
    return explained(conn, Plan(req, lookups), rec, result, max_candidates,
                     randomize, providers, reserved)


def explained(conn: Connection, plan: Plan, rec: Recorder, result: engine.Result,
              max_candidates: int, randomize: bool, providers: Sequence[str],
              reserved: Optional[Reserved], within: Optional[set] = None
              ) -> Explanation:
    """The explanation of a search of `plan` that `rec` heard and that
    answered `result`: the groups' funnels, the search's steps, and a
    report per provider named. `within`: the roots of the only trees the
    search walked, where it did not walk them all."""
    req = plan.req
    total = _counts(conn, [])
    groups: dict = {}
    own_roots: Optional[set] = None
    for suffix in req.groups:
        if suffix:
            counts = _numbered_funnel(conn, plan, suffix, total, reserved)
            clauses = [s.clause for s in numbered_steps(plan, suffix, reserved)]
            roots = set(_roots_serving(conn, clauses))
        else:
            counts, roots = _unnumbered_funnel(conn, plan, total, reserved)
        groups[suffix] = counts
        own_roots = roots if own_roots is None else own_roots & roots
    if within is not None:
        own_roots = (own_roots or set()) & within
    bound = max_candidates if max_candidates and max_candidates > 0 else None
    search = _search_counts(plan, rec, result, len(own_roots or ()), bound)
    rec.result = result
    why = Why(conn, plan, rec, reserved)
    reports = {uuid: why.report(uuid) for uuid in providers}
    return Explanation(groups, search, result, reports, bool(randomize and req.limit))
