"""Bounds on what one GET /allocation_candidates may ask for: the number
of request groups is capped (a 400 naming the cap); a request at the cap
is answered without exhausting the stack or running one statement per
identical group; and a search for a split that does not exist ends."""
from __future__ import annotations

import os

import pytest
from falcon import testing

from placement_lite.app import create_app
from placement_lite.candidates.query import MAX_REQUEST_GROUPS
from placement_lite.config import Settings
from tests.backends import statements_run

HEADERS = {"x-auth-token": "admin", "openstack-api-version": "placement latest",
           "content-type": "application/json", "accept": "application/json"}


@pytest.fixture
def client(db):
    return testing.TestClient(create_app(Settings(db=db.url), db))


def _provider(client, name, inventories, parent=None):
    body = {"name": name}
    if parent:
        body["parent_provider_uuid"] = parent
    rp = client.simulate_post("/resource_providers", json=body,
                              headers=HEADERS).json
    put = client.simulate_put(
        f"/resource_providers/{rp['uuid']}/inventories", headers=HEADERS,
        json={"resource_provider_generation": 0, "inventories": inventories})
    assert put.status_code == 200, put.text
    return rp["uuid"]


def _groups(count, amount=lambda i: 1):
    return "&".join(f"resources{i}=DISK_GB:{amount(i)}" for i in range(count)) \
        + "&group_policy=none"


def test_more_groups_than_the_cap_is_a_400_naming_it(client):
    _provider(client, "cn", {"DISK_GB": {"total": 100000}})
    # The query of the report: 990 groups used to exhaust the stack (500).
    for count in (MAX_REQUEST_GROUPS + 1, 990):
        got = client.simulate_get("/allocation_candidates",
                                  query_string=_groups(count), headers=HEADERS)
        assert got.status_code == 400, got.text
        detail = got.json["errors"][0]["detail"]
        assert detail.startswith("Invalid query string parameters")
        assert str(MAX_REQUEST_GROUPS) in detail and str(count) in detail
        assert got.json["errors"][0]["code"] == "placement.query.bad_value"


def test_the_unnumbered_group_counts_too(client):
    query = "resources=VCPU:1&" + _groups(MAX_REQUEST_GROUPS)
    got = client.simulate_get("/allocation_candidates", query_string=query,
                              headers=HEADERS)
    assert got.status_code == 400
    assert str(MAX_REQUEST_GROUPS) in got.json["errors"][0]["detail"]


def test_groups_at_the_cap_are_answered(client, db):
    uuid = _provider(client, "cn", {"DISK_GB": {"total": 100000}})
    with statements_run(db) as statements:
        got = client.simulate_get(
            "/allocation_candidates", headers=HEADERS,
            query_string=_groups(MAX_REQUEST_GROUPS))
    assert got.status_code == 200, got.text
    [candidate] = got.json["allocation_requests"]
    assert candidate["allocations"] == {
        uuid: {"resources": {"DISK_GB": MAX_REQUEST_GROUPS}}}
    assert candidate["mappings"] == {
        str(i): [uuid] for i in range(MAX_REQUEST_GROUPS)}
    # Identical groups are read with one statement, not one each.
    assert len(statements) < 20


def test_distinct_groups_at_the_cap_are_answered(client):
    # Two providers with room for every group: every split is a candidate
    # (2^N of them), so the search must stay lazy and stack-safe.
    root = _provider(client, "cn", {})
    a = _provider(client, "a", {"DISK_GB": {"total": 100000}}, root)
    b = _provider(client, "b", {"DISK_GB": {"total": 100000}}, root)
    got = client.simulate_get(
        "/allocation_candidates", headers=HEADERS,
        query_string=_groups(MAX_REQUEST_GROUPS, amount=lambda i: i + 1)
        + "&limit=5")
    assert got.status_code == 200, got.text
    assert len(got.json["allocation_requests"]) == 5
    for cand in got.json["allocation_requests"]:
        assert set(cand["allocations"]) <= {a, b}
        total = sum(r["resources"]["DISK_GB"]
                    for r in cand["allocations"].values())
        assert total == sum(range(1, MAX_REQUEST_GROUPS + 1))


def test_an_unsatisfiable_pile_of_groups_is_refused_quickly(client):
    # Two children of 60 units cannot hold 121 groups of one unit each;
    # without a bound on what is left, the search tried every split.
    root = _provider(client, "cn", {})
    _provider(client, "a", {"DISK_GB": {"total": 60}}, root)
    _provider(client, "b", {"DISK_GB": {"total": 60}}, root)
    got = client.simulate_get("/allocation_candidates", headers=HEADERS,
                              query_string=_groups(121))
    assert got.status_code == 200, got.text
    assert got.json["allocation_requests"] == []


def test_groups_no_split_can_hold_are_answered_within_the_search_budget(client):
    # Eight children of 31 units; one group of 1 and 121 of 2 fit their
    # total (243 <= 248) but no split (each child holds 15 groups of 2).
    # The search gives up on the tree after a bounded number of tries
    # instead of trying every split.
    root = _provider(client, "cn", {})
    for k in range(8):
        _provider(client, f"c{k}", {"DISK_GB": {"total": 31}}, root)
    query = "resources0=DISK_GB:1&" + "&".join(
        f"resources{i}=DISK_GB:2" for i in range(1, 122)) + "&group_policy=none"
    got = client.simulate_get("/allocation_candidates", query_string=query,
                              headers=HEADERS)
    assert got.status_code == 200, got.text
    assert got.json["allocation_requests"] == []


@pytest.mark.parametrize("path", ["/allocation_candidates", "/resource_providers"])
def test_a_filter_repeated_hundreds_of_times_is_answered(client, path):
    # 990 `required` (or member_of) terms made one SQL condition each,
    # deeper than SQLite parses (a 500); repeats now collapse.
    _provider(client, "cn", {"VCPU": {"total": 8}})
    prefix = "resources=VCPU:1&" if path == "/allocation_candidates" else ""
    for repeated in ("required=HW_CPU_X86_AVX2",
                     "required=in:HW_CPU_X86_AVX2,HW_CPU_X86_SSE",
                     "member_of=11111111-1111-1111-1111-111111111111"):
        got = client.simulate_get(path, headers=HEADERS,
                                  query_string=prefix + "&".join([repeated] * 990))
        assert got.status_code == 200, got.text


def test_too_many_distinct_filters_in_a_group_is_a_400(client):
    from placement_lite.candidates.terms import MAX_GROUP_TERMS
    query = "resources=VCPU:1&" + "&".join(
        f"member_of=11111111-1111-1111-1111-{i:012d}"
        for i in range(MAX_GROUP_TERMS + 1))
    got = client.simulate_get("/allocation_candidates", headers=HEADERS,
                              query_string=query)
    assert got.status_code == 400
    assert str(MAX_GROUP_TERMS) in got.json["errors"][0]["detail"]


KEYS = ["resources", "required", "member_of", "in_tree"]
VALUES = ["VCPU:1", "VCPU:0", "VCPU:99999999999", "DISK_GB:1,VCPU:1", "VCPU",
          ":", "", ",", "!", "!!", "in:", "!in:", "in:,", "HW_CPU_X86_AVX2",
          "!HW_CPU_X86_AVX2", "in:HW_CPU_X86_AVX2,HW_CPU_X86_SSE", "CUSTOM_NOPE",
          "11111111-1111-1111-1111-111111111111", "!11111111-1111-1111-1111-111111111111",
          "in:11111111-1111-1111-1111-111111111111,x", "\u00e9\u2603", "%00",
          "1111111111111111111111111111111111", "none", "isolate", "_A,_B", "1"]


def test_no_candidates_query_is_a_5xx(client):
    # Hostile parameter names, values and microversions on both routes
    # that speak the request-group language: never a 5xx, and every
    # error says what is wrong. CANDIDATE_FUZZ_EXAMPLES sets the count.
    from hypothesis import HealthCheck, given, settings, strategies as st
    from urllib.parse import quote

    root = _provider(client, "cn", {"VCPU": {"total": 8}})
    _provider(client, "numa", {"VCPU": {"total": 4}, "DISK_GB": {"total": 9}},
              root)
    key = st.one_of(
        st.builds(lambda k, s: k + s, st.sampled_from(KEYS),
                  st.sampled_from(["", "1", "2", "_A", "_B", "0"])),
        st.sampled_from(["group_policy", "limit", "root_required",
                         "same_subtree"]))
    value = st.one_of(st.sampled_from(VALUES), st.text(max_size=8))

    examples = int(os.environ.get("CANDIDATE_FUZZ_EXAMPLES", 300))

    @settings(max_examples=examples, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(pairs=st.lists(st.tuples(key, value), min_size=1, max_size=8),
           version=st.sampled_from(["1.10", "1.17", "1.21", "1.25", "1.31",
                                    "1.33", "1.36", "1.38", "latest"]))
    def check(pairs, version):
        query = "&".join(f"{quote(k)}={quote(v)}" for k, v in pairs)
        for path in ("/allocation_candidates", "/resource_providers"):
            got = client.simulate_get(
                path, query_string=query, headers={
                    **HEADERS, "openstack-api-version": f"placement {version}"})
            assert got.status_code < 500, (path, query, version, got.text)
            if got.status_code >= 400:
                assert got.json["errors"][0]["detail"]

    check()


def test_a_group_nothing_can_serve_ends_the_reading_early(client, db):
    # The first group fits no provider: the other 99 are not queried.
    _provider(client, "cn", {"DISK_GB": {"total": 100}})
    with statements_run(db) as statements:
        got = client.simulate_get(
            "/allocation_candidates", headers=HEADERS,
            query_string="resources0=DISK_GB:1000&" + _groups(
                100, amount=lambda i: i + 1).replace("resources0=", "resources100="))
    assert got.status_code == 200, got.text
    assert got.json["allocation_requests"] == []
    assert len(statements) < 20
