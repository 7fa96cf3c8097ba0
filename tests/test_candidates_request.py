"""Parsing the allocation-candidate query language."""
import pytest

from placement_lite.api.provider_filters import query_dialect
from placement_lite.candidates.query import parse_candidate_request
from placement_lite.candidates.terms import parse_provider_filters
from placement_lite.errors import Invalid

AGG1 = "11111111-1111-1111-1111-111111111111"
AGG2 = "22222222-2222-2222-2222-222222222222"
LATEST = (1, 39)
# Placement's words for a refused `in:` and for an empty trait, the same
# for required$S and for root_required.
IN_BEFORE_1_39 = ("Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,"
                  "CUSTOM_MAGIC' only supported since microversion 1.39.")
EMPTY_TRAIT = ("Invalid query string parameters: Expected 'required' parameter "
               "value of the form: HW_CPU_X86_VMX,!CUSTOM_MAGIC. Got an empty "
               "trait in: A,,B")


def parse(version=LATEST, **params):
    return parse_candidate_request(
        {k: v if isinstance(v, list) else [v] for k, v in params.items()},
        query_dialect(version))


def bad(version=LATEST, **params):
    with pytest.raises(Invalid) as exc:
        parse(version, **params)
    return exc.value.detail


def test_unnumbered_group():
    req = parse(resources="VCPU:2,MEMORY_MB:512", required="A,!B",
                member_of=AGG1, in_tree=AGG2, limit="3")
    group = req.groups[""]
    assert group.resources == {"VCPU": 2, "MEMORY_MB": 512}
    assert group.required == [{"A"}] and group.forbidden == {"B"}
    assert group.member_of == [{AGG1}] and group.in_tree == AGG2
    assert not group.use_same_provider and req.limit == 3


def test_any_of_traits_and_repeats_from_1_39():
    group = parse(resources="VCPU:1", required=["in:A,B", "C"]).groups[""]
    assert group.required == [{"A", "B"}, {"C"}]


def test_last_required_wins_before_1_39():
    group = parse((1, 38), resources="VCPU:1", required=["A", "B"]).groups[""]
    assert group.required == [{"B"}]


def test_in_prefix_is_refused_before_1_39_naming_the_version():
    for key in ("required", "required1"):
        detail = bad((1, 38), resources1="VCPU:1", **{key: "in:A,B"})
        assert detail.startswith(IN_BEFORE_1_39)
    # Only the last value counts before 1.39, as in Placement.
    group = parse((1, 38), resources="VCPU:1", required=["in:A", "B"]).groups[""]
    assert group.required == [{"B"}]


def test_in_prefix_errors_start_with_placements_phrase():
    assert bad(resources="VCPU:1", required="in:A,,B").startswith(
        "Invalid query string parameters: Expected 'required' parameter value "
        "of the form: in:HW_CPU_X86_VMX,CUSTOM_MAGIC. Got an empty trait in: ")
    assert bad(resources="VCPU:1", required="in:A,!B").startswith(
        "Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,"
        "CUSTOM_MAGIC' does not support forbidden traits.")


def test_empty_and_forbidden_trait_messages():
    assert bad(resources="VCPU:1", required="A,,B").startswith(EMPTY_TRAIT)
    assert bad((1, 21), resources="VCPU:1", required="A,!B").startswith(
        "Invalid query string parameters: Expected 'required' parameter value "
        "of the form: HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: A,!B")
    # Suffixed keys keep Placement's phrase and name the key after it.
    detail = bad(resources1="VCPU:1", required1="A,,B")
    assert detail.startswith("Invalid query string parameters: Expected "
                             "'required' parameter") and "required1" in detail


def test_repeated_bangs_forbid_the_trait_as_placement_does():
    assert parse(resources="VCPU:1", required="!!A").groups[""].forbidden == {"A"}


def test_forbidden_traits_need_1_22():
    assert "Expected 'required'" in bad((1, 21), resources="VCPU:1", required="!A")
    assert parse((1, 22), resources="VCPU:1", required="!A").groups[""].forbidden == {"A"}


def test_forbidden_inside_in_is_refused():
    bad(resources="VCPU:1", required="in:A,!B")


def test_conflicting_traits():
    assert "Conflicting" in bad(resources="VCPU:1", required="A,!A")
    # An any-of set is only a conflict when every member is forbidden.
    parse(resources="VCPU:1", required=["in:A,B", "!A"])
    bad(resources="VCPU:1", required=["in:A,B", "!A,!B"])


@pytest.mark.parametrize("value", ["", "VCPU", "VCPU:x", "VCPU:0", "VCPU:-1",
                                   "VCPU:1,", ":1"])
def test_bad_resources(value):
    bad(resources=value)


def test_member_of_forms():
    group = parse(resources="VCPU:1", member_of=[f"in:{AGG1},{AGG2}", AGG1,
                                                 f"!{AGG2}"]).groups[""]
    assert group.member_of == [{AGG1, AGG2}, {AGG1}]
    assert group.forbidden_aggs == {AGG2}
    group = parse(resources="VCPU:1", member_of=f"!in:{AGG1},{AGG2}").groups[""]
    assert group.forbidden_aggs == {AGG1, AGG2} and group.member_of == []


def test_member_of_errors():
    assert bad(resources="VCPU:1", member_of=f"in:{AGG1},!{AGG2}").startswith(
        "Invalid query string parameters: Expected 'member_of' parameter to "
        "contain valid UUID(s). Got: !")
    for version in ((1, 24), LATEST):
        assert bad(version, resources="VCPU:1",
                   member_of=f"{AGG1},{AGG2}").startswith(
            "Multiple values for 'member_of' must be prefixed with the 'in:' "
            "or '!in:' keyword using the valid microversion.")
    assert bad((1, 23), resources="VCPU:1", member_of=[AGG1, AGG2]).startswith(
        "Multiple member_of parameters are not supported")
    assert bad(resources="VCPU:1", member_of="nope").startswith(
        "Invalid query string parameters: Expected 'member_of' parameter to "
        "contain valid UUID(s). Got: nope")


def test_forbidden_aggregates_before_1_32_name_the_feature():
    for value in (f"!{AGG1}", f"!in:{AGG1},{AGG2}"):
        assert bad((1, 31), resources="VCPU:1", member_of=value).startswith(
            "Forbidden member_of parameters are not supported in the "
            "specified microversion")
    assert bad((1, 31), resources1="VCPU:1", member_of1=f"!{AGG1}").startswith(
        "Forbidden member_of1 parameters are not supported")
    # A value that is no UUID at all is still that error first.
    assert "valid UUID" in bad((1, 31), resources="VCPU:1", member_of="!nope")


def test_granular_groups_and_suffixes():
    req = parse((1, 25), resources1="VCPU:1", required1="A", resources2="VCPU:1",
                group_policy="none")
    assert list(req.groups) == ["1", "2"]
    assert req.groups["1"].use_same_provider
    # String suffixes from 1.33 only; before, they are not group keys.
    assert parse((1, 33), resources_X="VCPU:1").groups["_X"].resources == {"VCPU": 1}
    assert "resources_X" not in parse((1, 32), resources="VCPU:1",
                                      resources_X="VCPU:1").groups


def test_unnumbered_group_comes_first():
    req = parse(resources1="VCPU:1", resources="MEMORY_MB:1")
    assert list(req.groups) == ["", "1"]


def test_group_policy_required_for_two_numbered_groups():
    assert bad(resources1="VCPU:1", resources2="VCPU:1").startswith(
        'The "group_policy" parameter is required when specifying more than '
        'one "resources{N}" parameter.')
    parse(resources="VCPU:1", resources1="VCPU:1")


def test_repeated_limit_and_group_policy_use_the_first_value():
    req = parse(resources1="VCPU:1", resources2="VCPU:1",
                group_policy=["isolate", "none"], limit=["10", "1"])
    assert req.group_policy == "isolate" and req.limit == 10


def test_repeated_group_values_use_the_last_as_placement_does():
    req = parse(resources=["VCPU:1", "VCPU:2"], in_tree=[AGG1, AGG2])
    assert req.groups[""].resources == {"VCPU": 2}
    assert req.groups[""].in_tree == AGG2
    # Every value is still checked.
    bad(resources=["VCPU:x", "VCPU:2"])


def test_orphans_before_1_36():
    assert "orphaned traits" in bad((1, 35), resources="VCPU:1", required1="A")
    assert "orphaned member_of" in bad((1, 35), resources="VCPU:1",
                                       member_of1=AGG1)
    assert "must specify resources" in bad((1, 35), resources="VCPU:1",
                                           in_tree1=AGG1)
    assert "At least one" in bad((1, 35))


def test_resourceless_groups_from_1_36():
    req = parse(required_A="T", resources_B="VCPU:1", same_subtree="_A,_B",
                group_policy="none")
    assert req.groups["_A"].resources == {} and req.same_subtrees == [{"_A", "_B"}]
    assert "same_subtree" in bad(required_A="T", resources_B="VCPU:1",
                                 group_policy="none")
    assert "Real suffixes" in bad(resources_B="VCPU:1", same_subtree="_B,_C")
    assert "Empty string" in bad(resources_B="VCPU:1", same_subtree="_B,")
    assert "at least one" in bad(required_A="T", same_subtree="_A")
    # The unnumbered group may not be resourceless either.
    bad(required="T", resources_B="VCPU:1")


def test_root_required():
    req = parse(resources="VCPU:1", root_required="A,!B")
    assert req.root_required == {"A"} and req.root_forbidden == {"B"}
    assert bad(resources="VCPU:1", root_required="A,!A").startswith(
        "Conflicting required and forbidden traits found in root_required: A")
    assert bad(resources="VCPU:1", root_required=["A", "B"]).startswith(
        "Query parameter 'root_required' may be specified only once.")
    assert parse((1, 34), resources="VCPU:1").root_required == set()
    # Placement parses it as a pre-1.39 trait list: no 'in:', '!!A' is !A.
    assert bad(resources="VCPU:1", root_required="in:A,B").startswith(
        IN_BEFORE_1_39)
    assert bad(resources="VCPU:1", root_required="A,,B").startswith(EMPTY_TRAIT)
    assert parse(resources="VCPU:1", root_required="!!B").root_forbidden == {"B"}


def test_nested_awareness():
    assert not parse((1, 28), resources="VCPU:1").nested_aware
    assert parse((1, 29), resources="VCPU:1").nested_aware


def test_in_tree_must_be_a_uuid():
    assert bad(resources="VCPU:1", in_tree="x").startswith(
        "Invalid query string parameters: Expected 'in_tree' parameter to be "
        "a format of uuid. Got: x")
    assert "in_tree1" in bad(resources1="VCPU:1", in_tree1="x")


def test_badly_formed_resources_start_with_placements_phrase():
    for key in ("resources", "resources1"):
        assert bad(**{key: "VCPU"}).startswith(
            "Badly formed resources parameter. Expected resources query "
            "string parameter in form: ?resources=VCPU:2,MEMORY_MB:1024. "
            "Got: VCPU.")


def test_features_are_data():
    assert query_dialect((1, 16)).limit and not query_dialect((1, 15)).limit
    assert query_dialect((1, 39)).any_traits


def test_provider_filters():
    flt = parse_provider_filters({"resources": ["VCPU:1"], "required": ["A,!B"],
                                  "member_of": [AGG1, f"!{AGG2}"],
                                  "in_tree": [AGG1]},
                                 query_dialect(LATEST))
    assert flt.resources == {"VCPU": 1}
    assert flt.required == [{"A"}] and flt.forbidden == {"B"}
    assert flt.member_of == [{AGG1}] and flt.forbidden_aggs == {AGG2}
    with pytest.raises(Invalid):
        parse_provider_filters({"required": ["!B"]}, query_dialect((1, 18)))
    with pytest.raises(Invalid):
        parse_provider_filters({"required": ["A,!A"]}, query_dialect(LATEST))


def test_repeated_filters_collapse_and_distinct_ones_are_capped():
    from placement_lite.candidates.terms import MAX_GROUP_TERMS
    group = parse(resources="VCPU:1", required=["A"] * 900,
                  member_of=[AGG1] * 900).groups[""]
    assert group.required == [{"A"}] and group.member_of == [{AGG1}]
    many = [f"CUSTOM_T{i}" for i in range(MAX_GROUP_TERMS + 1)]
    detail = bad(resources1="VCPU:1", required1=many)
    assert detail.startswith("Invalid query string parameters")
    assert str(MAX_GROUP_TERMS) in detail and "required1" in detail
    parse(resources1="VCPU:1", required1=many[:-1])
    aggs = [f"in:{AGG1},11111111-1111-1111-1111-{i:012d}"
            for i in range(MAX_GROUP_TERMS + 1)]
    assert str(MAX_GROUP_TERMS) in bad(resources="VCPU:1", member_of=aggs)
    classes = ",".join(f"CUSTOM_C{i}:1" for i in range(MAX_GROUP_TERMS + 1))
    assert str(MAX_GROUP_TERMS) in bad(resources=classes)
    assert str(MAX_GROUP_TERMS) in bad(
        resources="VCPU:1", root_required=",".join(many))
