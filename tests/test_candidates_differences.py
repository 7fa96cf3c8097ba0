"""Where placement_lite answers differently from Placement 16 on purpose
(docs/placement-differences.md): each test pins our answer, so nobody
"fixes" it into Placement's."""
from __future__ import annotations

import pytest

from placement_lite.candidates import engine
from placement_lite.api.provider_filters import query_dialect
from placement_lite.candidates.query import parse_candidate_request
from placement_lite.candidates.terms import parse_provider_filters
from placement_lite.errors import Invalid
from tests.backends import fresh_database
from tests.candidates_world import World

LATEST = query_dialect((1, 39))


@pytest.fixture
def world():
    with fresh_database("sqlite") as db:
        yield World(db)


def _find(world, **params):
    req = parse_candidate_request(
        {k: v if isinstance(v, list) else [v] for k, v in params.items()}, LATEST)
    with world.db.read() as conn:
        result = engine.find(conn, req)
    return [{world.name_of(result.uuids[rp]): {result.class_names[rc]: n
                                               for rc, n in res.items()}
             for rp, res in cand.allocations.items()}
            for cand in result.candidates]


def test_unnumbered_and_numbered_groups_on_one_provider_are_not_double_counted(
        world):
    # Placement (group_policy isolate) answers numa0{VCPU:6}+numa1{VCPU:2}
    # for this request: 8 VCPU for a request of 6.
    world.provider("cn")
    world.provider("numa0", parent="cn", inventory={"VCPU": 8})
    world.provider("numa1", parent="cn", inventory={"VCPU": 8})
    found = _find(world, resources="VCPU:4", resources1="VCPU:2",
                  group_policy="isolate")
    assert sorted(found, key=repr) == sorted([
        {"numa0": {"VCPU": 6}}, {"numa1": {"VCPU": 6}},
        {"numa0": {"VCPU": 4}, "numa1": {"VCPU": 2}},
        {"numa1": {"VCPU": 4}, "numa0": {"VCPU": 2}}], key=repr)


def test_in_tree_applies_to_a_resourceless_same_subtree_group(world):
    # Placement ignores in_tree_B here and answers from both trees.
    for tree in ("1", "2"):
        world.provider("r" + tree)
        world.provider("n" + tree, parent="r" + tree, inventory={"VCPU": 4},
                       traits=["CUSTOM_T"])
    found = _find(world, resources_A="VCPU:1", required_B="CUSTOM_T",
                  in_tree_B=world.uuids["r1"], same_subtree="_A,_B",
                  group_policy="none")
    assert found == [{"n1": {"VCPU": 1}}]


def test_a_resourceless_group_of_forbidden_traits_matches_providers(world):
    # Placement answers nothing for a resourceless group with only '!'.
    world.provider("r1")
    world.provider("n1", parent="r1", inventory={"VCPU": 4}, traits=["CUSTOM_T"])
    world.provider("r2")
    world.provider("n2", parent="r2", inventory={"VCPU": 4})
    req = parse_candidate_request(
        {"resources_A": ["VCPU:1"], "required_B": ["!CUSTOM_T"],
         "same_subtree": ["_A,_B"], "group_policy": ["none"]}, LATEST)
    with world.db.read() as conn:
        result = engine.find(conn, req)
    mapped = sorted((world.name_of(result.uuids[cand.mappings["_A"][0]]),
                     world.name_of(result.uuids[cand.mappings["_B"][0]]))
                    for cand in result.candidates)
    # _B lands on a provider without the trait at or above _A's: never n1.
    assert mapped == [("n1", "r1"), ("n2", "n2"), ("n2", "r2")]


def test_an_unknown_trait_is_a_400_whatever_else_matched(world):
    # Placement answers 200 with nothing when member_of already matched
    # no provider, and only then looks the trait up.
    world.provider("cn", inventory={"VCPU": 4})
    with pytest.raises(Invalid, match="No such trait"):
        _find(world, resources="VCPU:1", required="CUSTOM_NOPE",
              member_of="11111111-1111-1111-1111-111111111111")


def test_required_and_forbidden_same_trait_on_the_provider_list_is_a_400():
    # Placement lists nothing (200) for required=T&required=!T.
    with pytest.raises(Invalid, match="Conflicting required and forbidden"):
        parse_provider_filters({"required": ["CUSTOM_T", "!CUSTOM_T"]}, LATEST)
