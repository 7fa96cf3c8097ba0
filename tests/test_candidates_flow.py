"""Answers too big to hold are written as they are found
(candidates/flow.py, api/render/candidates.pieces), and are the same
answer: byte for byte, order included, with the same summaries, at every
microversion, over the process's copy of the facts and over SQL. A
worker's memory across a large answer stays near its idle size; a
failure after the first byte cuts the response short rather than ending
it as if complete; a random sample holds only its `limit`."""
from __future__ import annotations

import http.client
import io
import json
import os
import random
import threading
import time
from contextlib import contextmanager
from urllib.parse import urlencode
from wsgiref.util import setup_testing_defaults

import pytest

from placement_lite.app import create_app
from placement_lite.candidates import by_tree, combiner, engine, flow
from placement_lite.config import Settings
from tests import live, servers
from tests.random_world import Builder, candidate_query

SEED = int(os.environ.get("PLACEMENT_LITE_SAMENESS_SEED", "1604"))
SHAPES = ["1.10", "1.12", "1.17", "1.25", "1.29", "1.34", "1.39"]
SIMPLE = ["resources=VCPU:1", "resources=VCPU:1,MEMORY_MB:256", "resources=DISK_GB:10",
          "resources=MEMORY_MB:128,IPV4_ADDRESS:1", "resources=SRIOV_NET_VF:1,VCPU:2",
          "resources1=VCPU:1&resources2=VCPU:1&group_policy=none",
          "resources=MEMORY_MB:128&resources1=VCPU:1&resources2=DISK_GB:10"
          "&group_policy=none"]


@contextmanager
def whole_up_to(choices: int):
    """Answers held whole up to `choices` candidates x slots (else written
    as found), for the block's requests."""
    before = engine.WHOLE_CHOICES
    engine.WHOLE_CHOICES = choices
    try:
        yield
    finally:
        engine.WHOLE_CHOICES = before


def raw(app, path: str, version: str = "1.39"):
    """(status, headers, body bytes, whether it was written as found)."""
    path, _, query = path.partition("?")
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": query,
               "HTTP_X_AUTH_TOKEN": "admin", "HTTP_ACCEPT": "application/json",
               "HTTP_OPENSTACK_API_VERSION": f"placement {version}",
               "wsgi.input": io.BytesIO(b"")}
    setup_testing_defaults(environ)
    seen = []
    out = app(environ, lambda status, headers, exc=None: seen.append((status, headers)))
    streamed = type(out).__name__ == "_Stream"
    try:
        body = b"".join(out)
    finally:
        if hasattr(out, "close"):
            out.close()
    status, headers = seen[0]
    return int(status.split()[0]), dict(headers), body, streamed


@pytest.fixture
def apps(db):
    return (create_app(Settings(db=db.url), db),
            create_app(Settings(db=db.url, facts_in_memory=False), db))


def _same(app, path, version="1.39") -> bool:
    """The answer held whole and written as found are the same bytes;
    whether the second was written as found."""
    status, _h, whole, streamed = raw(app, path, version)
    assert not streamed
    with whole_up_to(1):
        status2, headers, found, streamed = raw(app, path, version)
    assert (status2, found) == (status, whole), (version, path)
    if streamed:
        assert "content-length" not in {k.lower() for k in headers}
        json.loads(found)
    return streamed


def test_an_answer_written_as_found_is_the_whole_answer(apps):
    memory, sql = apps
    rng = random.Random(SEED)
    world = Builder(memory, rng)
    world.build()
    streamed = 0
    queries = ["/allocation_candidates?" + urlencode(candidate_query(rng, world))
               for _ in range(120)]
    for app in (memory, sql):
        for path in queries:
            streamed += _same(app, path)
        for version in SHAPES:
            for query in SIMPLE:
                if "resources1" in query and version < "1.25":
                    continue
                streamed += _same(app, f"/allocation_candidates?{query}", version)
                if version >= "1.16":
                    streamed += _same(app, f"/allocation_candidates?{query}&limit=2",
                                      version)
    # Written as found often enough to have proven something, both ways.
    assert streamed > 100, streamed


def _wide_world(app, trees: int, children: int):
    """`trees` roots, each with `children` children of 8 VCPU: with G
    groups of VCPU:1 (group_policy none), children**G candidates a tree."""
    rng = random.Random(7)
    world = Builder(app, rng)
    for i in range(trees):
        root = world.provider(f"root{i}")
        for c in range(children):
            world.provider(f"root{i}-{c}", parent=root, inventory={"VCPU": world.inv(8)})
    return world


def _groups(count: int) -> str:
    return "&".join(f"resources{i}=VCPU:1" for i in range(1, count + 1)) + \
        "&group_policy=none"


def _get(base: str, path: str, version="1.39"):
    host, port = base.split("//")[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    conn.request("GET", path, headers={"x-auth-token": "admin",
                                       "openstack-api-version": f"placement {version}"})
    resp = conn.getresponse()
    try:
        return resp.status, resp.getheader("transfer-encoding"), resp.read()
    finally:
        conn.close()


def test_a_big_answer_over_http_is_chunked_and_the_same(db):
    app = create_app(Settings(db=db.url, max_allocation_candidates=-1), db)
    _wide_world(app, trees=14, children=6)
    path = "/allocation_candidates?" + _groups(4)  # 14 x 1296 candidates
    resource = app._router.find("/allocation_candidates")[0]
    with live.served(app) as base:
        status, chunked, found = _get(base, path)
        assert (status, chunked) == (200, "chunked")
        # Held by the process after it: no tree's part of an answer past
        # what one may hold whole, the walks remembered within their bound.
        kept = 0
        for key, shape in resource.services.facts.kept.shapes():
            kept += sum(len(part.candidates) for part in shape.values()
                        if isinstance(part, by_tree.TreePart))
            if key[0] == "walk":
                assert sum(len(choices) for choices, _steps in shape.values()) \
                    <= combiner.REMEMBERED_CHOICES
        assert kept <= engine.WHOLE_CHOICES // 4
        with whole_up_to(10 ** 9):
            status, chunked, whole = _get(base, path)
        assert (status, chunked) == (200, None)
    assert len(found) > 3_000_000
    assert found == whole
    answer = json.loads(found)
    # Past what an answer of 4 slots holds whole.
    assert len(answer["allocation_requests"]) == 14 * 6 ** 4 > engine.WHOLE_CHOICES // 4


def test_a_failure_after_the_first_byte_cuts_the_answer_short(db, monkeypatch, caplog):
    app = create_app(Settings(db=db.url, max_allocation_candidates=-1), db)
    _wide_world(app, trees=2, children=4)

    def lost(self):
        raise RuntimeError("the database went away")
    monkeypatch.setattr(flow.Flow, "finish", lost)
    with live.served(app) as base, whole_up_to(1):
        with pytest.raises(http.client.IncompleteRead):
            _get(base, "/allocation_candidates?" + _groups(3))
        # The worker serves on.
        status, _chunked, body = _get(base, "/allocation_candidates?resources=VCPU:1&limit=1")
    assert status == 200 and json.loads(body)["allocation_requests"]
    assert "the response is cut short" in caplog.text


def test_a_random_sample_holds_its_limit_only():
    drawn = []

    def candidates():
        for i in range(10_000):
            drawn.append(i)
            yield i
    got = engine.sample(candidates(), 5)
    assert len(got) == 5 and len(set(got)) == 5 and len(drawn) == 10_000
    # Fewer than asked: all, in their order.
    assert engine.sample(iter(range(4)), 5) == [0, 1, 2, 3]
    assert engine.sample(iter(range(5)), 5) == [0, 1, 2, 3, 4]
    # Uniform: every candidate about as often as any other, in any place.
    counts = [0] * 20
    firsts = [0] * 20
    rng_state = random.getstate()
    random.seed(1)
    try:
        for _ in range(4000):
            picked = engine.sample(iter(range(20)), 5)
            firsts[picked[0]] += 1
            for i in picked:
                counts[i] += 1
    finally:
        random.setstate(rng_state)
    assert min(counts) > 850 and max(counts) < 1150, counts  # 1000 expected
    assert min(firsts) > 130 and max(firsts) < 270, firsts  # 200 expected


def test_a_random_sample_past_the_whole_size_is_written_as_found(db):
    app = create_app(Settings(db=db.url, max_allocation_candidates=-1,
                              randomize_allocation_candidates=True), db)
    _wide_world(app, trees=3, children=4)
    path = "/allocation_candidates?" + _groups(2)  # 3 x 16 candidates
    _s, _h, everything, _streamed = raw(app, path)
    every = json.loads(everything)
    assert len(every["allocation_requests"]) == 48
    with whole_up_to(2):
        status, _h, body, streamed = raw(app, path + "&limit=20")
    assert status == 200 and streamed
    got = json.loads(body)
    picked = got["allocation_requests"]
    assert len(picked) == 20
    assert len({json.dumps(c, sort_keys=True) for c in picked}) == 20
    assert all(c in every["allocation_requests"] for c in picked)
    # Summaries: the sampled candidates' trees, no other.
    roots = {every["provider_summaries"][rp]["root_provider_uuid"]
             for c in picked for rp in c["allocations"]}
    assert {s["root_provider_uuid"] for s in got["provider_summaries"].values()} == roots


# -- a worker's memory ----------------------------------------------------------

def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def test_a_workers_memory_across_a_large_answer_stays_near_idle(tmp_path):
    """About 70 MB of JSON from a served worker (no cap on candidates, as
    Placement): its resident memory may grow by a small part of that, not
    by the answer (held whole, it grew by several times the answer)."""
    from bench import answer_memory, worlds
    url = f"sqlite:///{tmp_path / 'wide.sqlite'}"
    db = worlds.open_db(url)
    answer_memory.load(db, trees=40, children=8, units=6)
    db.dispose()
    with servers.serve(url, "--workers", "1", "--max-allocation-candidates", "-1") as srv:
        pid = srv.proc.pid
        status, _c, _b = _get(srv.base, answer_memory.path(4, limit=1))
        assert status == 200
        time.sleep(1)
        idle = _rss_kb(pid)
        peak = [idle]
        done = threading.Event()

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], _rss_kb(pid))
                done.wait(0.01)
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            status, chunked, body = _get(srv.base, answer_memory.path(4))
        finally:
            done.set()
            sampler.join()
        size = len(body)
        count = body.count(b'"allocations"')
        del body
    assert status == 200 and chunked == "chunked"
    assert count == 40 * 8 ** 4 and size > 60 * 2 ** 20, (count, size)
    growth_mb = (peak[0] - idle) / 1024
    assert growth_mb < 50, f"RSS grew {growth_mb:.0f} MB across a {size >> 20} MB answer"
