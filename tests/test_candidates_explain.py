"""Explain: it answers with the real search's candidates, its funnel ends
where the search does, and each kind of reason names the step and the
numbers."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from placement_lite.api.provider_filters import query_dialect
from placement_lite.candidates import engine, explain
from placement_lite.candidates.query import parse_candidate_request
from tests.backends import fresh_database
from tests.candidates_world import World
from tests.test_candidates_engine import (
    SHARES, build, requests, shared_db, worlds)  # noqa: F401

LATEST = query_dialect((1, 39))


def _req(**params):
    return parse_candidate_request({k: [v] for k, v in params.items()}, LATEST)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(world=worlds(), request=requests())
def test_explain_agrees_with_the_answer(shared_db, world, request):  # noqa: F811
    built, req = build(shared_db, world, request)
    named = list(built.uuids.values())
    with shared_db.read() as conn:
        real = engine.find(conn, req, 0)
        told = explain.explain(conn, req, 0, False, named)

    def keys(result):
        return [(tuple(result.uuids[rp] for rp in c.providers),
                 sorted((result.uuids[rp], sorted(res.items()))
                        for rp, res in c.allocations.items()))
                for c in result.candidates]

    assert keys(told.result) == keys(real)
    in_answer = {real.uuids[rp] for c in real.candidates for rp in c.providers}
    limit = told.search[-1]
    assert limit.step == "limit" and limit.providers_after == len(real.candidates)
    for uuid, report in told.providers.items():
        if uuid in in_answer:
            # A provider in some candidate: its tree is not excluded.
            assert not report["excluded"] and report["candidates"] > 0
        if report["excluded"]:
            assert report["reasons"], (uuid, report)
        else:
            assert not report["reasons"]
    # The search's steps end with some tree left exactly when there are
    # candidates, and narrow as they go.
    trees = [s for s in told.search if s.trees_after is not None]
    assert (trees[-1].trees_after > 0) == bool(real.candidates)
    for before, step in zip(trees, trees[1:]):
        assert step.trees_before == before.trees_after, step
        assert step.trees_after <= step.trees_before, step


@pytest.fixture
def db():
    with fresh_database("sqlite") as db:
        yield db


def _why(db, req, *uuids):
    with db.read() as conn:
        found = explain.explain(conn, req, 0, False, list(uuids))
    return [r["reason"] for u in uuids for r in found.providers[u]["reasons"]]


def test_reason_capacity_names_the_numbers(db):
    w = World(db)
    w.provider("cn", inventory={"VCPU": {"total": 16, "allocation_ratio": 4.0}},
               used={"VCPU": 58})
    [_group, reason] = _why(db, _req(resources1="VCPU:8"), w.uuids["cn"])
    assert reason == f"{w.uuids['cn']}: VCPU: needs 8, free 6 of capacity 64 (used 58)"


def test_reason_unit_limits(db):
    w = World(db)
    w.provider("cn", inventory={"VCPU": {"total": 16, "max_unit": 4}})
    reasons = _why(db, _req(resources1="VCPU:8"), w.uuids["cn"])
    assert reasons[-1].endswith("VCPU: needs 8, above its max_unit 4")


def test_reason_missing_trait(db):
    w = World(db)
    w.provider("cn", inventory={"VCPU": 4})
    reasons = _why(db, _req(resources1="VCPU:1", required1="HW_CPU_X86_AVX2"),
                   w.uuids["cn"])
    assert reasons[-1] == f"{w.uuids['cn']}: lacks trait HW_CPU_X86_AVX2"


def test_reason_any_of_traits(db):
    w = World(db)
    w.provider("cn", inventory={"VCPU": 4})
    reasons = _why(db, _req(resources1="VCPU:1",
                            required1="in:HW_CPU_X86_AVX2,HW_CPU_X86_SSE"),
                   w.uuids["cn"])
    assert reasons[-1] == (f"{w.uuids['cn']}: has none of traits "
                           "HW_CPU_X86_AVX2, HW_CPU_X86_SSE")


def test_reason_forbidden_trait(db):
    w = World(db)
    w.provider("cn", inventory={"VCPU": 4}, traits=["CUSTOM_GOLD"])
    reasons = _why(db, _req(resources1="VCPU:1", required1="!CUSTOM_GOLD"),
                   w.uuids["cn"])
    assert reasons[-1] == f"{w.uuids['cn']}: has forbidden trait CUSTOM_GOLD"


def test_reason_forbidden_aggregate(db):
    w = World(db)
    w.provider("cn", inventory={"VCPU": 4}, aggs=["bad"])
    bad = w.agg("bad")
    reasons = _why(db, _req(resources="VCPU:1", member_of="!" + bad), w.uuids["cn"])
    assert reasons[-1] == f"{w.uuids['cn']}: in forbidden aggregate {bad}"


def test_reason_not_in_aggregate(db):
    w = World(db)
    w.provider("cn", inventory={"VCPU": 4})
    w.provider("other", aggs=["a"])
    reasons = _why(db, _req(resources1="VCPU:1", member_of1=w.agg("a")),
                   w.uuids["cn"])
    assert reasons[-1] == f"{w.uuids['cn']}: not in aggregate(s) {w.agg('a')}"


def test_reason_no_provider_and_no_sharing_provider(db):
    w = World(db)
    w.provider("cn", inventory={"VCPU": 4})
    [reason] = _why(db, _req(resources="VCPU:1,DISK_GB:10"), w.uuids["cn"])
    assert reason == ("no provider in the tree has DISK_GB and no sharing "
                      "provider is in its aggregates")


def test_a_sharing_provider_fills_the_gap(db):
    w = World(db)
    w.provider("cn", inventory={"VCPU": 4}, aggs=["a"])
    w.provider("ss", inventory={"DISK_GB": 100}, traits=[SHARES], aggs=["a"])
    with db.read() as conn:
        found = explain.explain(conn, _req(resources="VCPU:1,DISK_GB:10"), 0,
                                False, [w.uuids["cn"]])
    assert not found.providers[w.uuids["cn"]]["excluded"]
    sharing = next(s for s in found.search if s.step == "sharing")
    assert sharing.detail.endswith(
        "or one of 1 sharing providers (serving 2 trees); 0 trees by their "
        "own providers alone")
    # Offered: cn's tree and the sharing provider's own; served: cn's.
    assert (sharing.trees_before, sharing.trees_after) == (2, 1)


def _steps_and_reasons(db, req, uuid):
    with db.read() as conn:
        found = explain.explain(conn, req, 0, False, [uuid])
    return [(r["step"], r["reason"]) for r in found.providers[uuid]["reasons"]]


def test_every_failing_step_of_the_unnumbered_group_is_a_reason(db):
    # Issue 26: no room, no trait and a forbidden aggregate; the trait
    # and the aggregate were left out once capacity had failed.
    w = World(db)
    w.provider("cn", inventory={"VCPU": 8, "MEMORY_MB": 4096}, aggs=["bad"])
    cn, bad = w.uuids["cn"], w.agg("bad")
    req = _req(resources="VCPU:80,MEMORY_MB:8192", required="HW_CPU_X86_AVX2",
               member_of="!" + bad)
    assert _steps_and_reasons(db, req, cn) == [
        ("resources", "no provider of the tree (or sharing one) can give "
         "MEMORY_MB:8192"),
        ("resources", f"{cn}: MEMORY_MB: needs 8192, above its max_unit 4096"),
        ("resources", "no provider of the tree (or sharing one) can give VCPU:80"),
        ("resources", f"{cn}: VCPU: needs 80, above its max_unit 8"),
        ("forbidden_aggregates", f"{cn}: in forbidden aggregate {bad}"),
        ("required", "no provider of the tree (or sharing one) has trait "
         "HW_CPU_X86_AVX2")]


def test_every_failing_step_of_a_numbered_group_is_a_reason(db):
    w = World(db)
    w.provider("cn", inventory={"VCPU": 8}, aggs=["bad"])
    cn, bad = w.uuids["cn"], w.agg("bad")
    req = _req(resources1="VCPU:80", required1="HW_CPU_X86_AVX2",
               member_of1="!" + bad)
    assert _steps_and_reasons(db, req, cn) == [
        (None, "group 1: no provider of the tree passes its filters"),
        ("resources", f"{cn}: VCPU: needs 80, above its max_unit 8"),
        ("required", f"{cn}: lacks trait HW_CPU_X86_AVX2"),
        ("forbidden_aggregates", f"{cn}: in forbidden aggregate {bad}")]


def test_a_served_class_brings_no_reasons_of_its_own(db):
    # VCPU fails; MEMORY_MB is served, so the provider's other failing
    # steps are reported once, under the class that is not served.
    w = World(db)
    w.provider("cn", inventory={"VCPU": 8, "MEMORY_MB": 4096})
    cn = w.uuids["cn"]
    req = _req(resources="VCPU:80,MEMORY_MB:1024", required="HW_CPU_X86_AVX2")
    assert _steps_and_reasons(db, req, cn) == [
        ("resources", "no provider of the tree (or sharing one) can give VCPU:80"),
        ("resources", f"{cn}: VCPU: needs 80, above its max_unit 8"),
        ("required", "no provider of the tree (or sharing one) has trait "
         "HW_CPU_X86_AVX2")]


def test_reason_root_required(db):
    w = World(db)
    w.provider("cn", inventory={"VCPU": 4})
    w.provider("gold", traits=["CUSTOM_GOLD"])
    reasons = _why(db, _req(resources="VCPU:1", root_required="CUSTOM_GOLD"),
                   w.uuids["cn"])
    assert reasons == [f"{w.uuids['cn']}: root lacks trait CUSTOM_GOLD"]


def test_reason_in_tree(db):
    w = World(db)
    w.provider("cn", inventory={"VCPU": 4})
    w.provider("cn2", inventory={"VCPU": 4})
    reasons = _why(db, _req(resources1="VCPU:1", in_tree1=w.uuids["cn2"]),
                   w.uuids["cn"])
    assert reasons[-1] == f"{w.uuids['cn']}: not in the tree of {w.uuids['cn2']}"


def test_reason_group_policy(db):
    w = World(db)
    w.provider("cn", inventory={"VCPU": 4})
    req = _req(resources1="VCPU:1", resources2="VCPU:1", group_policy="isolate")
    reasons = _why(db, req, w.uuids["cn"])
    assert reasons == ["every group has providers, but no combination of them "
                       "satisfies group_policy=isolate, merged capacity"]


def test_reason_limit(db):
    w = World(db)
    w.provider("cn1", inventory={"VCPU": 4})
    w.provider("cn2", inventory={"VCPU": 4})
    reasons = _why(db, _req(resources="VCPU:1", limit="1"), w.uuids["cn2"])
    assert reasons == ["not reached: the search had its candidates before this tree"]


def test_funnel_counts_each_filter_in_order(db):
    w = World(db)
    w.provider("cn1", inventory={"VCPU": 4}, traits=["CUSTOM_GOLD"])
    w.provider("cn2", inventory={"VCPU": 4})
    w.provider("cn3", inventory={"VCPU": 1})
    with db.read() as conn:
        found = explain.explain(conn, _req(resources1="VCPU:2",
                                           required1="CUSTOM_GOLD"))
    counts = [(c.step, c.detail, c.providers_before, c.providers_after)
              for c in found.groups["1"]]
    assert counts == [("resources", "VCPU:2", 3, 2),
                      ("required", "CUSTOM_GOLD", 2, 1)]
    assert len(found.result.candidates) == 1


def test_cli_prints_the_explain_answer(capsys):
    from placement_lite import cli
    from tests import servers
    with fresh_database("sqlite") as db:
        w = World(db)
        w.provider("cn1", inventory={"VCPU": {"total": 8, "reserved": 2}})
        w.provider("cn2", inventory={"VCPU": 16})
        db.dispose()
        with servers.serve(db.url) as srv:
            code = cli.main(["explain", "--url", srv.base, "--token", "admin",
                             f"/allocation_candidates?resources=VCPU:8"
                             f"&explain_provider={w.uuids['cn1']}"])
            out = capsys.readouterr().out
            assert code == 0
            assert out.startswith("Candidates: 1 (first 1 shown)\n")
            assert f"  1. {w.uuids['cn2']}: VCPU 8\n" in out
            assert "Group (unnumbered):" in out
            assert "resources" in out and "2 -> 1" in out
            assert f"Provider {w.uuids['cn1']} (tree {w.uuids['cn1']}): not in " \
                "the answer" in out
            assert (f"  - [group (unnumbered), resources] {w.uuids['cn1']}: VCPU: "
                    "needs 8, free 6 of capacity 6 (used 0)") in out
            # Refused: the message of the service, and a non-zero status.
            code = cli.main(["explain", "--url", srv.base, "--token", "someone",
                             "resources=VCPU:8"])
            err = capsys.readouterr().err
            assert code == 1 and "403" in err


def test_cli_prints_absent_counts_and_trees_as_dashes():
    from placement_lite import explain_text
    answer = {
        "candidates": {"count": 0, "first": [], "randomized": False},
        "groups": [],
        "search": [
            {"step": "offered", "detail": "trees where some group has a provider",
             "providers_before": None, "providers_after": None,
             "trees_before": None, "trees_after": 0},
            {"step": "limit", "detail": "no limit", "providers_before": 0,
             "providers_after": 0, "trees_before": None, "trees_after": None}],
        "providers": {"p1": {"tree": None, "excluded": True, "candidates": 0,
                             "reasons": [{"group": None, "step": None,
                                          "provider": "p1", "reason":
                                          "no resource provider has uuid p1"}]},
                      "p2": {"excluded": True, "reasons": [
                          {"group": None, "step": "in_tree",
                           "reason": "in_tree names no provider"}]}}}
    out = explain_text.render(answer)
    assert "None" not in out
    offered = next(line for line in out.splitlines() if "offered" in line)
    assert offered.split()[1:5] == ["-", "-", "->", "0"]
    limit = next(line for line in out.splitlines() if " limit " in line)
    assert limit.split()[1:5] == ["0", "->", "0", "-"]
    assert "Provider p1: not in the answer\n" in out
    assert "Provider p2: not in the answer\n  - [in_tree] in_tree names no " \
        "provider\n" in out


def test_console_explain_page(db):
    from urllib.parse import urlencode
    from tests.test_ui import (
        CN1, CN2, NUMA0, NUMA1, _caller, _client, build_world, page, text)
    client = _client(db, ui=True)
    build_world(_caller(client))
    query = "resources=VCPU:12,DISK_GB:10"
    shown = page(client, "/ui/explain?" + urlencode(
        {"q": "/allocation_candidates?" + query, "providers": f"{CN1} {CN2}"}))
    assert shown.status_code == 200
    seen = text(shown)
    # cn2: VCPU (16 - 4) * 2 = 24, 12 used: 12 free; cn1's NUMA nodes 8
    # each, 4 used on numa0.
    assert "1 candidate " in seen + " "
    assert '<ol class="funnel">' in shown.text
    assert f"{NUMA0}: VCPU: needs 12, free 4 of capacity 8 (used 4)" in seen
    assert f"{NUMA1}: VCPU: needs 12, free 8 of capacity 8 (used 0)" in seen
    assert f"{CN1}: has no VCPU inventory" in seen
    assert "In the answer: 1 candidate from its tree." in seen
    # A query the API refuses shows the API's message.
    bad = page(client, "/ui/explain?" + urlencode({"q": "resources=VCPU:1&bogus=1"}))
    assert "Invalid query string parameters" in text(bad)
    # A caller the explain rule refuses sees the 403 page.
    assert page(client, "/ui/explain", token="someone").status_code == 403


def test_console_explain_page_names_each_step_whole_and_counts_in_words(db):
    import re
    from html import unescape
    from urllib.parse import urlencode
    from tests.test_ui import _caller, _client, build_world, page
    client = _client(db, ui=True)
    build_world(_caller(client))
    shown = page(client, "/ui/explain?" + urlencode(
        {"q": "resources=VCPU:80,MEMORY_MB:8192&required=HW_CPU_X86_SSE42"}))
    assert shown.status_code == 200

    def cells(table_id):
        body = re.search(rf'id="{table_id}">(.*?)</table>', shown.text, re.S).group(1)
        return [[unescape(re.sub(r"<[^>]+>", "", c)).strip()
                 for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
                for row in re.findall(r"<tr>(.*?)</tr>", body, re.S) if "<td" in row]

    labels = [re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", "", x))).strip()
              for x in re.findall(r'<span class="funnel-label">(.*?)</span>', shown.text)]
    group = cells("group-unnumbered")
    search = cells("search")
    # Every step's whole name, in the funnels as in the tables.
    assert labels == [f"{row[0]} {row[1]}" for row in group + search]
    assert "resources MEMORY_MB:8192" in labels and "required HW_CPU_X86_SSE42" in labels
    assert [row[2:] for row in group] == [["5 → 0", "3 → 0"], ["0 → 0", "0 → 0"],
                                          ["0 → 0", "0 → 0"]]
    steps = {row[0]: row[2:] for row in search}
    # offered counts no "before"; the limit step counts candidates.
    assert steps["offered"] == ["—", "0 trees"]
    assert steps["sharing"] == ["0 trees", "0 trees"]
    assert steps["limit"] == ["0 candidates", "0 candidates"]
    assert "None" not in re.sub(r"<[^>]+>", " ", shown.text)
    found = page(client, "/ui/explain?" + urlencode({"q": "resources=VCPU:12,DISK_GB:10"}))
    counts = re.findall(r'<span class="funnel-count">([^<]*)</span>', found.text)
    assert counts[-1] == "1 candidate" and "1 tree" in counts


def test_openapi_documents_the_route_with_the_candidates_query(db):
    import falcon.testing
    from placement_lite.app import create_app
    from placement_lite.config import Settings
    client = falcon.testing.TestClient(create_app(Settings(db=db.url), db))
    doc = client.simulate_get("/openapi.json").json
    op = doc["paths"]["/explain/allocation_candidates"]["get"]
    names = {p.get("name") for p in op["parameters"]}
    real = doc["paths"]["/allocation_candidates"]["get"]
    assert names == {p.get("name") for p in real["parameters"]} | {
        "explain_provider", "start", "end"}
    # The window, both or neither: optional.
    window = [p for p in op["parameters"] if p.get("name") in ("start", "end")]
    assert [p["required"] for p in window] == [False, False]
    assert "limit" in names
    assert op["summary"] == "Explain an allocation candidates query (ours)"
    # More providers than it explains at once is a 400, by the schema.
    many = "&".join(f"explain_provider=p{i}" for i in range(21))
    found = client.simulate_get("/explain/allocation_candidates?resources=VCPU:1&"
                                + many, headers={"x-auth-token": "admin",
                                                 "openstack-api-version":
                                                 "placement latest"})
    assert found.status_code == 400


# The candidates query's rule: admin or service, whatever the profile
# (open lets anyone in); a project's reader sees no one's providers.
@pytest.mark.parametrize("profile, roles, status", [
    ("secure-rbac", "reader", 403), ("secure-rbac", "member", 403),
    ("secure-rbac", "admin", 200), ("secure-rbac", "service", 200),
    ("legacy", "reader", 403), ("legacy", "service", 200),
    ("open", "member", 200)])
def test_policy_is_the_candidates_querys(db, profile, roles, status):
    import falcon.testing
    from placement_lite.app import create_app
    from placement_lite.config import Settings
    client = falcon.testing.TestClient(create_app(
        Settings(db=db.url, policy_profile=profile), db))
    found = client.simulate_get(
        "/explain/allocation_candidates", query_string="resources=VCPU:1",
        headers={"x-auth-token": "carol:p1", "x-roles": roles,
                 "openstack-api-version": "placement latest"})
    assert found.status_code == status, found.text
