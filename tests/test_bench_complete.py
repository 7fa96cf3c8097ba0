"""bench/complete.py: the benchmark's check that a timed candidates answer
holds what the database does, as pure functions (no server)."""
from __future__ import annotations

import json

import pytest

from bench import complete, grow


def _answer(n, groups=("", "_allocations"), spaced=False):
    """A candidates answer of `n` allocation requests, shaped as the
    server renders one at the latest microversion: granular mappings
    (one group suffix named like the key counted), summaries with
    traits, parents and roots."""
    rps = [f"00000000-0000-0000-0000-{i:012d}" for i in range(n + 1)]
    body = {
        "allocation_requests": [
            {"allocations": {rps[i]: {"resources": {"VCPU": 1}},
                             rps[n]: {"resources": {"DISK_GB": 10}}},
             "mappings": {g: [rps[i]] for g in groups}}
            for i in range(n)],
        "provider_summaries": {
            rp: {"resources": {"VCPU": {"capacity": 32, "used": 0}},
                 "traits": ["HW_CPU_X86_AVX2"], "parent_provider_uuid": rps[n],
                 "root_provider_uuid": rps[n]} for rp in rps},
    }
    text = (json.dumps(body) if spaced else json.dumps(body, separators=(",", ":")))
    return text.encode()


@pytest.mark.parametrize("n", [0, 1, 5, 500])
@pytest.mark.parametrize("spaced", [False, True])
def test_candidates_are_counted_in_the_bytes(n, spaced):
    raw = _answer(n, spaced=spaced)
    assert complete.candidates_in(raw) == len(json.loads(raw)["allocation_requests"]) == n


def test_the_bound_is_the_limit_or_the_cap():
    assert complete.bounded(500) == 500
    assert complete.bounded(1210) == 1000          # max_allocation_candidates
    assert complete.bounded(1210, cap=-1) == 1210  # uncapped
    assert complete.bounded(1210, cap=None) == 1210
    assert complete.bounded(500, 10) == 10
    assert complete.bounded(3, 10) == 3
    assert complete.bounded(5000, 2000) == 2000    # a limit is not capped here
    assert complete.bounded(0, 5) == 0


def test_a_short_answer_fails_naming_the_workload_expected_and_got():
    complete.check("flat 1k, full", 1000, 1000)
    with pytest.raises(complete.Incomplete) as err:
        complete.check("grown +5x100 trees: CUSTOM_PF, full", 500, 5)
    text = str(err.value)
    assert "grown +5x100 trees: CUSTOM_PF, full" in text
    assert "expected 500" in text and "got 5" in text


class _Reference:
    """Stands in for bench/serving.py's Reference: counts by path."""

    def __init__(self, counts):
        self.counts = counts

    def count(self, path):
        return self.counts[path]


def test_expected_checks_every_answer_against_the_reference():
    ref = _Reference({"/q": 500})
    expect = complete.Expected("w [new side]", ref, "/q", define=500)
    expect.check(_answer(500))
    expect.tally(40, 0, None)
    expect.settle()
    assert expect.checked == 41
    with pytest.raises(complete.Incomplete, match=r"w \[new side\].*expected 500.*got 5"):
        expect.check(_answer(5))
    with pytest.raises(complete.Incomplete, match=r"3 of 40 answers wrong.*expected 500.*got 499"):
        expect.tally(40, 3, 499)


def test_the_reference_must_agree_with_the_world_definition():
    with pytest.raises(complete.Incomplete, match="definition gives 500"):
        complete.Expected("w", _Reference({"/q": 5}), "/q", define=500)


def test_a_world_that_moved_under_the_timed_requests_stops_the_run():
    ref = _Reference({"/q": 10})
    expect = complete.Expected("w", ref, "/q")
    ref.counts["/q"] = 11
    with pytest.raises(RuntimeError, match="moved"):
        expect.settle()


def test_a_grown_world_knows_each_query_s_count():
    plan = grow.parse_plan("600, 5x100,10x120")
    assert plan == [grow.Step(flat=600), grow.Step(roots=5, children=100),
                    grow.Step(roots=10, children=120)]
    assert [s.providers for s in plan] == [600, 505, 1210]
    world = grow.GrownWorld()
    world.add(plan[0])
    assert [(label, n) for label, _p, n in world.queries()] == [("flat, full", 600)]
    world.add(plan[1])
    assert [n for _l, _p, n in world.queries(first=plan[1])] == [500, 10, 600]
    world.add(plan[2])
    assert [n for _l, _p, n in world.queries(first=plan[2])] == [1000, 10, 600]
    for bad in ("", "0", "5x0", "x5", "5x"):
        with pytest.raises(ValueError):
            grow.parse_plan(bad)
