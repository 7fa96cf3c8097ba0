"""The candidate engine: the lazy combination step, and a property test
comparing the engine with a brute-force reading of Placement's rules on
small random provider worlds."""
from __future__ import annotations

import itertools
import time

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st
from sqlalchemy import delete, insert

from placement_lite.candidates import combiner, engine
from placement_lite.candidates.facts import Facts, Room
from placement_lite.candidates.plan import Lookups, Plan
from placement_lite.candidates.reader import Reader
from placement_lite.api.provider_filters import query_dialect
from placement_lite.candidates.query import (
    CandidateRequest, RequestGroup, parse_candidate_request)
from placement_lite.db import facts_log
from placement_lite.db import tables as t
from tests.backends import fresh_database
from tests.candidates_world import World

SHARES = "MISC_SHARES_VIA_AGGREGATE"


class _Walk:
    """The combination step alone, over inventory facts set by the test."""

    def __init__(self, req, rc_ids):
        self.plan = Plan(req, Lookups(rc_ids, {}, {}, {}))
        self.inventory = {}
        self.budget = combiner.Budget()

    def combine(self, options):
        view = combiner.View(Facts(inventory=self.inventory))
        return combiner.combine(self.plan, view, options, self.budget)


def _search(req, rc_ids):
    return _Walk(req, rc_ids)


def test_wide_symmetric_tree_is_combined_lazily():
    # 8 children x 6 groups is 262144 combinations; the first ten come at once.
    groups = {str(i): RequestGroup(suffix=str(i), resources={"X": 1})
              for i in range(1, 7)}
    search = _search(CandidateRequest(groups=groups, group_policy="none"), {"X": 1})
    search.inventory = {(c, 1): Room(6, 0, 6) for c in range(2, 10)}
    options = [list(range(2, 10))] * 6
    start = time.perf_counter()
    first = list(itertools.islice(search.combine(options), 10))
    assert time.perf_counter() - start < 0.05
    assert first[0] == (2,) * 6 and len(set(first)) == 10


def test_merged_amounts_respect_capacity():
    groups = {s: RequestGroup(suffix=s, resources={"X": 2}) for s in "123"}
    search = _search(CandidateRequest(groups=groups, group_policy="none"), {"X": 1})
    search.inventory = {(7, 1): Room(5, 0, 5), (8, 1): Room(6, 2, 3)}
    found = list(search.combine([[7, 8]] * 3))
    for combo in found:
        assert combo.count(7) <= 2  # 3 x 2 > 5
        assert combo.count(8) <= 1  # 2 x 2 > max_unit 3, and 2 + 4 > 6
    # Only two on 7 and one on 8 fits, in three orders.
    assert sorted(found) == [(7, 7, 8), (7, 8, 7), (8, 7, 7)]


def test_isolate_never_reuses_a_provider():
    groups = {s: RequestGroup(suffix=s, resources={"X": 1}) for s in "123"}
    search = _search(CandidateRequest(groups=groups, group_policy="isolate"),
                     {"X": 1})
    search.inventory = {(c, 1): Room(9, 0, 9) for c in range(1, 5)}
    found = list(search.combine([[1, 2, 3, 4]] * 3))
    assert len(found) == 4 * 3 * 2
    assert all(len(set(combo)) == 3 for combo in found)


def test_combination_depth_is_not_bounded_by_the_stack():
    # Far more slots than Python's recursion limit (a request is capped
    # well below this; the search must not depend on the cap).
    count = 3000
    groups = {str(i): RequestGroup(suffix=str(i), resources={"X": 1})
              for i in range(1, count + 1)}
    search = _search(CandidateRequest(groups=groups, group_policy="none"), {"X": 1})
    search.inventory = {(7, 1): Room(count, 0, count), (8, 1): Room(count, 0, count)}
    first = list(itertools.islice(search.combine([[7, 8]] * count), 3))
    assert first == [(7,) * count, (7,) * (count - 1) + (8,),
                     (7,) * (count - 2) + (8, 7)]


def test_groups_that_cannot_all_fit_are_refused_at_once():
    groups = {str(i): RequestGroup(suffix=str(i), resources={"X": 1})
              for i in range(1, 42)}
    search = _search(CandidateRequest(groups=groups, group_policy="none"), {"X": 1})
    # 2 x 20 units for 41 groups: no split fits (2^41 to try one by one).
    search.inventory = {(7, 1): Room(20, 0, 20), (8, 1): Room(22, 2, 20)}
    assert list(search.combine([[7, 8]] * 41)) == []


def test_member_of_admits_only_sharing_providers_in_the_aggregate():
    # Placement since bug 1792503: with member_of, a sharing provider
    # contributes only if it is itself in the named aggregate(s); the
    # anchor's root being in them is not enough.
    with fresh_database("sqlite") as db:
        world = World(db)
        world.provider("cn", inventory={"VCPU": 4}, aggs=["a", "x"])
        world.provider("ss_x", inventory={"DISK_GB": 100}, traits=[SHARES],
                       aggs=["x"])
        world.provider("ss_a", inventory={"DISK_GB": 100}, traits=[SHARES],
                       aggs=["a", "x"])
        def found(**params):
            req = parse_candidate_request(
                {k: [v] for k, v in params.items()}, query_dialect((1, 39)))
            with db.read() as conn:
                result = engine.find(conn, req)
            return sorted(sorted(world.name_of(result.uuids[rp])
                                 for rp in cand.allocations)
                          for cand in result.candidates)
        assert found(resources="VCPU:1,DISK_GB:10") == [
            ["cn", "ss_a"], ["cn", "ss_x"]]
        assert found(resources="VCPU:1,DISK_GB:10",
                     member_of=world.agg("a")) == [["cn", "ss_a"]]
        assert found(resources="VCPU:1,DISK_GB:10",
                     member_of=world.agg("x")) == [["cn", "ss_a"], ["cn", "ss_x"]]


def test_summary_traits_come_in_placements_order():
    # Placement lists a provider's traits in the order the traits were
    # created (by trait id), not by name: a standard trait before a custom
    # one created later.
    from placement_lite.candidates import summaries
    with fresh_database("sqlite") as db:
        world = World(db)
        world.provider("cn", inventory={"VCPU": 4},
                       traits=["CUSTOM_ZED", "HW_NUMA_ROOT", "CUSTOM_ALPHA"])
        req = parse_candidate_request({"resources": ["VCPU:1"]},
                                      query_dialect((1, 39)))
        with db.read() as conn:
            result = engine.find(conn, req)
            [summary] = summaries.summarize(conn, result, True)
        assert summary.traits == ["HW_NUMA_ROOT", "CUSTOM_ZED", "CUSTOM_ALPHA"]


def test_groups_that_fit_in_sum_but_not_in_units_are_refused_quickly():
    # 2 x 101 units hold at most 50 groups of 2 each: 101 groups fit the
    # total (202) but no split. Trying the splits one by one is 2^100
    # steps; a dead end reached before (same level, same amounts placed)
    # is not searched again.
    count = 101
    groups = {str(i): RequestGroup(suffix=str(i), resources={"X": 2})
              for i in range(1, count + 1)}
    search = _search(CandidateRequest(groups=groups, group_policy="none"), {"X": 1})
    search.inventory = {(7, 1): Room(101, 0, 101), (8, 1): Room(101, 0, 101)}
    assert list(search.combine([[7, 8]] * count)) == []


def test_dead_ends_are_remembered_per_placement_not_per_order():
    # Every split of 3 + 3 groups over two providers of 3 slots each
    # is a candidate, and a 7th group that fits nowhere kills them all;
    # with one more unit on provider 8 the candidates all come back.
    groups = {str(i): RequestGroup(suffix=str(i), resources={"X": 1})
              for i in range(1, 8)}
    search = _search(CandidateRequest(groups=groups, group_policy="none"), {"X": 1})
    search.inventory = {(7, 1): Room(3, 0, 3), (8, 1): Room(3, 0, 3)}
    assert list(search.combine([[7, 8]] * 7)) == []
    search = _search(CandidateRequest(groups=groups, group_policy="none"), {"X": 1})
    search.inventory = {(7, 1): Room(3, 0, 3), (8, 1): Room(4, 0, 4)}
    found = list(search.combine([[7, 8]] * 7))
    # choose which 3 of the 7 go to provider 7
    assert len(found) == 35 and all(c.count(7) == 3 for c in found)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_combination_matches_the_product(data):
    # The walk (with its remembered dead ends) yields exactly the product
    # of the options that passes capacity and isolation, in order.
    count = data.draw(st.integers(1, 7))
    amounts = [data.draw(st.integers(1, 3)) for _ in range(count)]
    policy = data.draw(st.sampled_from(["none", "isolate"]))
    groups = {str(i + 1): RequestGroup(suffix=str(i + 1), resources={"X": a})
              for i, a in enumerate(amounts)}
    search = _search(CandidateRequest(groups=groups, group_policy=policy),
                     {"X": 1})
    caps = {rp: data.draw(st.integers(1, 9)) for rp in (1, 2, 3, 4)}
    search.inventory = {(rp, 1): Room(cap, 0, cap) for rp, cap in caps.items()}
    # The SQL offers a provider for a slot only when the slot alone fits.
    options = [data.draw(st.lists(
        st.sampled_from([rp for rp in caps if caps[rp] >= a] or [None]),
        min_size=1, max_size=4, unique=True)) for a in amounts]
    assume(all(None not in opts for opts in options))
    expected = []
    for combo in itertools.product(*options):
        used = {}
        for rp, a in zip(combo, amounts):
            used[rp] = used.get(rp, 0) + a
        if any(total > caps[rp] for rp, total in used.items()
               if list(combo).count(rp) > 1):
            continue
        if policy == "isolate" and count > 1 and len(set(combo)) != count:
            continue
        expected.append(combo)
    assert list(search.combine(options)) == expected


def _packing(count, caps, amounts):
    groups = {str(i): RequestGroup(suffix=str(i), resources={"X": a})
              for i, a in zip(range(1, count + 1), amounts)}
    search = _search(CandidateRequest(groups=groups, group_policy="none"), {"X": 1})
    search.inventory = {(rp, 1): Room(cap, 0, cap) for rp, cap in caps.items()}
    return search, [sorted(caps)] * count


def test_groups_that_fit_only_in_whole_units_are_refused_at_once():
    # 8 x 31 units, 121 groups of 2: 242 <= 248, but each provider takes
    # at most 15 groups (120).
    search, options = _packing(121, {rp: 31 for rp in range(1, 9)}, [2] * 121)
    assert list(search.combine(options)) == [] and search.budget.work == 0


def test_a_tree_giving_nothing_is_left_after_a_bounded_search(monkeypatch):
    # As above with one group of 1 among them (no common unit): still no
    # split fits; the search gives up on the tree instead of trying them all.
    monkeypatch.setattr(combiner, "TREE_STEPS", 5000)
    search, options = _packing(122, {rp: 31 for rp in range(1, 9)},
                               [1] + [2] * 121)
    assert list(search.combine(options)) == []
    assert 5000 <= search.budget.work <= 5001 and not search.budget.cut_short


def test_a_request_stops_searching_at_its_budget(monkeypatch):
    monkeypatch.setattr(combiner, "REQUEST_STEPS", 3000)
    search, options = _packing(122, {rp: 31 for rp in range(1, 9)},
                               [1] + [2] * 121)
    assert list(search.combine(options)) == []
    assert search.budget.cut_short


def test_a_productive_tree_is_not_cut(monkeypatch):
    # The budget counts tries since the tree's last candidate.
    monkeypatch.setattr(combiner, "TREE_STEPS", 50)
    search, options = _packing(6, {rp: 99 for rp in range(1, 9)}, [1] * 6)
    assert len(list(itertools.islice(search.combine(options), 2000))) == 2000


# -- the property test ------------------------------------------------------

CLASSES = ["VCPU", "MEMORY_MB", "DISK_GB"]
TRAITS = ["CUSTOM_A", "CUSTOM_B"]
AGGS = ["a1", "a2"]


@st.composite
def worlds(draw):
    providers = []  # (name, parent, inventory, traits, aggs, used)
    for tree in range(draw(st.integers(1, 3))):
        root = f"r{tree}"
        names = [root]
        providers.append((root, None) + draw(_provider_facts(False)))
        for child in range(draw(st.integers(0, 3))):
            name = f"r{tree}c{child}"
            parent = draw(st.sampled_from(names))
            names.append(name)
            providers.append((name, parent) + draw(_provider_facts(False)))
    for share in range(draw(st.integers(0, 1))):
        providers.append((f"s{share}", None) + draw(_provider_facts(True)))
    return providers


@st.composite
def _provider_facts(draw, sharing):
    inventory = {}
    used = {}
    for rc in draw(st.sets(st.sampled_from(CLASSES), max_size=3)):
        total = draw(st.integers(1, 6))
        inventory[rc] = {"total": total, "reserved": draw(st.sampled_from([0, 0, 1])),
                         "max_unit": draw(st.integers(1, total)),
                         "step_size": draw(st.sampled_from([1, 1, 1, 2]))}
        if draw(st.integers(0, 3)) == 0:
            used[rc] = draw(st.integers(1, total))
    traits = set(draw(st.sets(st.sampled_from(TRAITS))))
    if sharing:
        traits.add(SHARES)
    aggs = draw(st.sets(st.sampled_from(AGGS)))
    return inventory, sorted(traits), sorted(aggs), used


@st.composite
def requests(draw):
    version = draw(st.sampled_from([(1, 28), (1, 39), (1, 39)]))
    modern = version >= (1, 39)
    params = {}
    if draw(st.booleans()):
        rcs = draw(st.sets(st.sampled_from(CLASSES), min_size=1, max_size=2))
        params["resources"] = [",".join(f"{rc}:{draw(st.integers(1, 2))}"
                                        for rc in sorted(rcs))]
        _filters(draw, params, "", modern)
    numbered = draw(st.integers(0 if params else 1, 2))
    for i in range(1, numbered + 1):
        rc = draw(st.sampled_from(CLASSES))
        params[f"resources{i}"] = [f"{rc}:{draw(st.integers(1, 2))}"]
        _filters(draw, params, str(i), modern)
    if numbered > 1:
        params["group_policy"] = [draw(st.sampled_from(["none", "isolate"]))]
    if modern and numbered > 1 and draw(st.booleans()):
        params["same_subtree"] = ["1,2"]
    if modern and draw(st.integers(0, 4)) == 0:
        params["root_required"] = [draw(st.sampled_from(["CUSTOM_A", "!CUSTOM_A"]))]
    return params, version


def _filters(draw, params, suffix, modern):
    choice = draw(st.integers(0, 5))
    if choice == 1:
        params["required" + suffix] = [draw(st.sampled_from(
            ["CUSTOM_A", "!CUSTOM_A", "in:CUSTOM_A,CUSTOM_B", "CUSTOM_A,CUSTOM_B"]
            if modern else ["CUSTOM_A", "!CUSTOM_A", "CUSTOM_A,CUSTOM_B"]))]
    elif choice == 2:
        params["member_of" + suffix] = [draw(st.sampled_from(
            ["AGG:a1", "!AGG:a1", "in:AGG:a1,AGG:a2"]
            if modern else ["AGG:a1", "in:AGG:a1,AGG:a2"]))]


def reference(world, providers, req):
    """Every candidate by Placement's rules, by brute force."""
    facts = {}
    for name, parent, inventory, traits, aggs, used in providers:
        facts[name] = dict(parent=parent, inventory=inventory, traits=set(traits),
                           aggs=set(aggs), used=used)
    def root(n):
        while facts[n]["parent"]:
            n = facts[n]["parent"]
        return n
    def ancestors(n):
        out = {n}
        while facts[n]["parent"]:
            n = facts[n]["parent"]
            out.add(n)
        return out
    roots = sorted({root(n) for n in facts})
    sharing = [n for n in facts if SHARES in facts[n]["traits"]]
    def anchors_of(s):
        out = {root(s)}
        for n in facts:
            if facts[n]["aggs"] & facts[s]["aggs"]:
                out.add(root(n))
        return out
    def fits(n, rc, amount, already=0):
        inv = facts[n]["inventory"].get(rc)
        if not inv:
            return False
        cap = inv["total"] - inv["reserved"]
        total = already + amount
        used = facts[n]["used"].get(rc, 0)
        if already:
            return used + total <= cap and total <= inv["max_unit"]
        return (amount <= inv["max_unit"] and amount % inv["step_size"] == 0
                and used + amount <= cap)
    def uuid_aggs(n):
        return {world.agg(a) for a in facts[n]["aggs"]}
    def member_ok(n, member_of):
        return all(uuid_aggs(n) & set(any_of) for any_of in member_of)
    def traits_ok(names, required, forbidden):
        have = set().union(*(facts[n]["traits"] for n in names))
        if have & forbidden and any(facts[n]["traits"] & forbidden for n in names):
            return False
        return all(have & any_of for any_of in required)

    out = set()
    for anchor in roots:
        if req.root_required - facts[anchor]["traits"]:
            continue
        if req.root_forbidden & facts[anchor]["traits"]:
            continue
        serving = [n for n in facts if root(n) == anchor] + [
            s for s in sharing if anchor in anchors_of(s) and root(s) != anchor]
        slots = []
        for suffix, group in req.groups.items():
            if suffix:
                opts = [n for n in serving
                        if all(fits(n, rc, a) for rc, a in group.resources.items())
                        and traits_ok([n], group.required, group.forbidden)
                        and member_ok(n, group.member_of)
                        and not uuid_aggs(n) & group.forbidden_aggs]
                slots.append((suffix, group.resources, opts))
                continue
            for rc, amount in group.resources.items():
                opts = []
                for n in serving:
                    if not fits(n, rc, amount) or facts[n]["traits"] & group.forbidden:
                        continue
                    # In the tree, the provider or its root must be in the
                    # aggregates; a sharing provider from elsewhere must
                    # be in them itself (Placement since bug 1792503).
                    if group.member_of and not (
                            member_ok(n, group.member_of) or (
                                root(n) == anchor
                                and member_ok(anchor, group.member_of))):
                        continue
                    if group.forbidden_aggs and (
                            (uuid_aggs(n) | uuid_aggs(anchor)) & group.forbidden_aggs):
                        continue
                    opts.append(n)
                slots.append(("", {rc: amount}, opts))
        for combo in itertools.product(*[s[2] for s in slots]):
            unnumbered = [n for s, n in zip(slots, combo) if not s[0]]
            if "" in req.groups and not traits_ok(
                    unnumbered, req.groups[""].required, set()):
                continue
            numbered = [n for s, n in zip(slots, combo) if s[0]]
            if req.group_policy == "isolate" and len(numbered) > 1 and \
                    len(set(numbered)) != len(numbered):
                continue
            amounts = {}
            ok = True
            for (suffix, res, _), n in zip(slots, combo):
                for rc, a in res.items():
                    before = amounts.get((n, rc), 0)
                    if before and not fits(n, rc, a, before):
                        ok = False
                    amounts[(n, rc)] = before + a
            if not ok:
                continue
            for subtree in req.same_subtrees:
                rps = {n for s, n in zip(slots, combo) if s[0] in subtree}
                if len(rps) > 1 and not set.intersection(
                        *(ancestors(n) for n in rps)) & rps:
                    ok = False
            if not req.nested_aware:
                by_root = {}
                for n in {n for (n, _rc) in amounts}:
                    by_root.setdefault(root(n), set()).add(n)
                if any(len(v) > 1 for v in by_root.values()):
                    ok = False
            if not ok:
                continue
            mappings = {}
            for (suffix, _, _), n in zip(slots, combo):
                mappings.setdefault(suffix, set()).add(n)
            out.add((frozenset(amounts.items()),
                     frozenset((k, frozenset(v)) for k, v in mappings.items())))
    return out


@pytest.fixture(scope="module")
def shared_db():
    with fresh_database("sqlite") as db:
        with db.write() as conn:
            conn.execute(insert(t.traits), [{"name": n} for n in TRAITS])
        yield db


def _clear(db):
    with db.write() as conn:
        for table in (t.allocations, t.consumers, t.users, t.projects,
                      t.resource_provider_aggregates, t.placement_aggregates,
                      t.resource_provider_traits, t.inventories):
            conn.execute(delete(table))
        conn.execute(t.resource_providers.update().values(
            parent_provider_id=None, root_provider_id=None))
        conn.execute(delete(t.resource_providers))
        facts_log.reset(conn)


def build(db, world, request):
    """A generated world in `db` (with a holder of each aggregate nobody
    in it is in) and a generated request over it: (World, CandidateRequest)."""
    _clear(db)
    built = World(db)
    for name, parent, inventory, traits, aggs, used in world:
        built.provider(name, parent=parent, inventory=inventory, traits=traits,
                       aggs=aggs, used=used)
    for agg in AGGS:
        if agg not in built.aggs:
            built.provider(f"holder-{agg}", aggs=[agg])
    params, version = request
    params = {k: [v.replace("AGG:a1", built.agg("a1")).replace(
        "AGG:a2", built.agg("a2")) for v in vals] for k, vals in params.items()}
    return built, parse_candidate_request(params, query_dialect(version))


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(world=worlds(), request=requests())
def test_engine_matches_brute_force(shared_db, world, request):
    built, req = build(shared_db, world, request)
    with shared_db.read() as conn:
        result = engine.find(conn, req, 0)
    names = {built.ids[n]: n for n in built.ids}
    got = set()
    for cand in result.candidates:
        amounts = frozenset(((names[rp], result.class_names[rc]), a)
                            for rp, res in cand.allocations.items()
                            for rc, a in res.items())
        mappings = frozenset((k, frozenset(names[rp] for rp in v))
                             for k, v in cand.mappings.items())
        key = (amounts, mappings)
        assert key not in got, "duplicate candidate"
        got.add(key)
    expected = reference(built, world + [
        (f"holder-{a}", None, {}, [], [a], {}) for a in AGGS
        if a not in {x for p in world for x in p[4]}], req)
    assert got == expected
    # The combiner alone, over the facts the reader gives for every tree
    # at once (no orchestrator, no slicing), agrees too.
    with shared_db.read() as conn:
        plan = Plan(req, engine.resolve(conn, req))
        read = Reader(conn, plan)
        sharing = read.sharing()
        lo, hi = read.bounds()
        part = read.slice(lo, hi, sharing)
    choices = list(combiner.slice_choices(plan, sharing, part, combiner.Budget(),
                                          set())) if part else []
    combined = set()
    for chosen in choices:
        amounts, mappings = {}, {}
        for slot, rp in zip(plan.slots, chosen):
            for rc, a in slot.resources.items():
                key = (names[rp], result.class_names[rc])
                amounts[key] = amounts.get(key, 0) + a
            mappings.setdefault(slot.suffix, set()).add(names[rp])
        combined.add((frozenset(amounts.items()),
                      frozenset((k, frozenset(v)) for k, v in mappings.items())))
    assert combined == expected and len(choices) == len(expected)
