"""GET /reservations/allocation_candidates against two oracles, on random
worlds (nested trees, sharing providers), with both candidate readers.

- With nothing reserved in the window (no reservation at all, or only
  ones that end before it or start after it), its answer is GET
  /allocation_candidates' at 1.39, byte for byte.
- With random reservations and random windows, its answer is what GET
  /allocation_candidates answers when each inventory's `used` is raised
  by the most reserved at any instant of the window, that peak worked
  out by brute force, hour by hour (every bound is a whole hour).
- Plain requests made between window ones still answer as plain ones
  (nothing a window request leaves in the caches leaks into them), also
  from many threads at once.

Two apps share each database: one over the process's copy of the facts,
one asking SQL for everything.

The plain route is the oracle here as Placement answers it, from
allocations alone: its own room for what is reserved ahead (candidates/
ahead.py) is turned off in this module, and tested in
tests/test_plain_candidates_ahead.py.
"""
from __future__ import annotations

import io
import json
import os
import random
import threading
from urllib.parse import urlencode
from wsgiref.util import setup_testing_defaults

import pytest
from sqlalchemy import update

from placement_lite import errors
from placement_lite.api.provider_filters import query_dialect
from placement_lite.api.resources import window_candidates
from placement_lite.api.versions import WINDOW_CANDIDATES
from placement_lite.candidates import engine, snapshot
from placement_lite.candidates.memory import MemoryReader
from placement_lite.candidates.overlay import Overlay
from placement_lite.candidates.plan import Plan
from placement_lite.candidates.query import parse_candidate_request
from placement_lite.db import clock, facts_log
from placement_lite.db import tables as t
from placement_lite.ledger import reserved
from tests import factories
from tests.peaks_oracle import both_apps, inventory_rows, peaks_allocated, raw
from tests.random_world import Builder, candidate_query
from tests.reservation_rows import reservation

SEED = int(os.environ.get("PLACEMENT_LITE_SAMENESS_SEED", "1604"))
HOUR = 3600
HOURS = 48  # reservations and windows fall within this many hours
PLAIN = "/allocation_candidates?"
WINDOW = "/reservations/allocation_candidates?"


def _ok(status_body) -> bytes:
    status, body = status_body
    assert status == 200, body
    return body


@pytest.fixture(autouse=True)
def plain_from_allocations_alone(monkeypatch):
    from placement_lite.api.services import Services
    monkeypatch.setattr(Services, "reserved_ahead", lambda self, conn, snapshot: None)


@pytest.fixture
def apps(db):
    return both_apps(db)


def _base(db) -> int:
    """A whole hour a day ahead of the database's now."""
    with db.read() as conn:
        now = clock.now(conn)
    return (now // HOUR + 24) * HOUR


def _stamp(seconds: int) -> str:
    from placement_lite.api.times import text
    return text(seconds)


def _window_query(params: list, start: int, end: int, naive: bool = False) -> str:
    start_text, end_text = _stamp(start), _stamp(end)
    if naive:  # naive means UTC
        start_text, end_text = start_text[:-1], end_text[:-1]
    return urlencode(params + [("start", start_text), ("end", end_text)])


SIMPLE = [[("resources", "VCPU:1")], [("resources", "VCPU:2,MEMORY_MB:1024")],
          [("resources", "MEMORY_MB:2048")], [("resources", "DISK_GB:100")],
          [("resources", "VCPU:1,DISK_GB:50,IPV4_ADDRESS:1")],
          [("resources", "MEMORY_MB:512"), ("resources1", "VCPU:2"),
           ("resources2", "SRIOV_NET_VF:2"), ("group_policy", "none")],
          [("resources1", "VCPU:2"), ("resources2", "VCPU:2"), ("group_policy", "isolate")],
          # Two groups on one provider: their amounts are merged there.
          [("resources1", "VCPU:2"), ("resources2", "VCPU:1"), ("group_policy", "none")],
          [("resources", "VCPU:1,MEMORY_MB:512"), ("resources1", "VCPU:1"),
           ("resources2", "MEMORY_MB:1024"), ("group_policy", "none")],
          [("resources", "CUSTOM_GPU:1,VCPU:1")]]


def _queries(rng, world, count: int) -> list:
    """Random queries in the 1.39 language, a third of them simple ones
    (which find candidates often, so reservations have some to take)."""
    out = []
    for _ in range(count):
        params = (list(rng.choice(SIMPLE)) if rng.random() < 0.35
                  else candidate_query(rng, world))
        if rng.random() < 0.25:
            params.append(("limit", str(rng.randint(1, 4))))
        out.append(params)
    return out


def _reserve_randomly(db, rng, base: int, count: int) -> list:
    """`count` random reservations within HOURS of `base`, of one to three
    (provider, class) amounts each, sized to bite; [(start, end, amounts)]."""
    rows = inventory_rows(db)
    made = []
    with db.write() as conn:
        for _ in range(count):
            start = base + rng.randrange(HOURS) * HOUR
            end = start + rng.randint(1, 12) * HOUR
            amounts = {}
            for rp, rc, total, held, ratio in rng.sample(rows, rng.randint(1, 3)):
                room = max(1, int((total - held) * ratio))
                amounts[(rp, rc)] = rng.randint(1, max(1, room // 2))
            reservation(conn, start, end, amounts)
            made.append((start, end, amounts))
    return made


def _brute_peaks(made: list, start: int, end: int) -> dict:
    """(provider, class) -> the most reserved at any whole hour of
    [start, end), summing every reservation that holds that hour."""
    peaks: dict = {}
    for hour in range(start, end, HOUR):
        level: dict = {}
        for s, e, amounts in made:
            if s <= hour < e:
                for key, amount in amounts.items():
                    level[key] = level.get(key, 0) + amount
        for key, amount in level.items():
            peaks[key] = max(peaks.get(key, 0), amount)
    return peaks


def _world(apps, seed: int, sharing: bool = True) -> Builder:
    _db, memory, _sql = apps
    rng = random.Random(seed)
    world = Builder(memory, rng)
    world.build(sharing)
    return world


def test_nothing_reserved_in_the_window_answers_as_the_plain_route(apps):
    db, memory, sql = apps
    rng = random.Random(SEED)
    world = _world(apps, SEED)
    base = _base(db)
    found = 0

    def alike(params, start, end):
        nonlocal found
        for app in (memory, sql):
            plain = raw(app, PLAIN + urlencode(params))
            window = raw(app, WINDOW + _window_query(params, start, end, rng.random() < 0.3))
            assert window == plain, (params, start, end)
            found += plain[0] == 200 and b'"allocation_requests":[]' not in plain[1]
    queries = _queries(rng, world, 60)
    for params in queries[:30]:
        alike(params, base, base + rng.randint(1, HOURS) * HOUR)
    # Reservations outside the window (ending as it starts, or starting
    # as it ends) hold nothing in it.
    _reserve_randomly(db, rng, base, 20)
    lo, hi = base + (HOURS + 12) * HOUR, base + (HOURS + 20) * HOUR
    every = {(rp, rc): 1 for rp, rc, *_rest in inventory_rows(db)}
    with db.write() as conn:
        reservation(conn, base, lo, every)
        reservation(conn, hi, hi + HOUR, every)
    for params in queries[30:]:
        alike(params, lo, hi)
    alike([("resources", "VCPU:1")], base - 10 * HOUR, base)  # before them
    assert found > 20, found


@pytest.mark.parametrize("seed,sharing", [(SEED, True), (SEED + 1, True),
                                          (SEED + 2, False)])
def test_the_window_answers_as_the_plain_route_with_its_peaks_allocated(
        apps, seed, sharing):
    """Without sharing providers, the copy's answers come as trees' kept
    parts (candidates/by_tree.py); with them, from a search."""
    _check_windows(apps, seed, sharing, windows=7, per_window=25)


@pytest.mark.parametrize("sharing", [True, False])
def test_answers_given_as_they_are_found(apps, sharing, monkeypatch):
    """Answers past a few candidates come as a flow (candidates/flow.py),
    which reads the `used` of every provider not read yet at once: the
    slices are made small, so that some are left to read then."""
    monkeypatch.setattr(engine, "WHOLE_CHOICES", 4)
    monkeypatch.setattr(engine, "FIRST_SPAN", 2)
    monkeypatch.setattr(engine, "MIN_SPAN", 2)
    _check_windows(apps, SEED + 5, sharing, windows=3, per_window=20, bitten=1)


def test_the_copy_reader_adds_each_extra_once(db):
    """However `used` is read (some providers, then a range over them and
    more, then all the rest), each (provider, class) gets its extra once."""
    with db.write() as conn:
        rps = [factories.provider_with(conn, VCPU=8, MEMORY_MB=4096)["id"] for _ in range(8)]
        vcpu, mem = factories.class_id(conn, "VCPU"), factories.class_id(conn, "MEMORY_MB")
        inv = t.inventories
        for n, rp in enumerate(rps):
            conn.execute(update(inv).where(inv.c.resource_provider_id == rp,
                                           inv.c.resource_class_id == vcpu).values(used=n % 3))
    extra = {(rps[0], vcpu): 3, (rps[2], vcpu): 4, (rps[3], mem): 512, (rps[4], vcpu): 1,
             (rps[7], vcpu): 2}
    with db.read() as conn:
        snap = snapshot.load(conn, facts_log.heads(conn))
        req = parse_candidate_request({"resources": ["VCPU:1"]},
                                      query_dialect(WINDOW_CANDIDATES))
        plan = Plan(req, engine.resolve(conn, req, snap))
        reader = MemoryReader(conn, plan, snap, None, Overlay(extra))
        reader.read_used([rps[0], rps[6]])  # sparse: a list of ids
        reader.read_used([rps[2]])
        reader.read_used([rps[1], rps[3]])  # dense: a range, over rps[2] again
        reader.read_all_used()
        reader.read_used(rps)
    expected = {(rp, vcpu): n % 3 for n, rp in enumerate(rps) if n % 3}
    for key, n in extra.items():
        expected[key] = expected.get(key, 0) + n
    assert {k: v for k, v in reader.used.items() if v} == expected


@pytest.mark.parametrize("few", [1, 1000])
def test_peaks_are_the_most_reserved_at_any_instant(db, few, monkeypatch):
    """ledger/reserved.py's one statement and its peaks (by steps past
    `few` windows on a key, summed at each window's start up to it),
    against every second of random windows summed by brute force."""
    monkeypatch.setattr(reserved, "FEW", few)
    rng = random.Random(SEED + 3)
    base = 4_102_444_800  # 2100-01-01: past 32 bits
    made = []
    with db.write() as conn:
        rps = [factories.provider_with(conn, VCPU=100, DISK_GB=100)["id"] for _ in range(3)]
        classes = [factories.class_id(conn, name) for name in ("VCPU", "DISK_GB")]
        for _ in range(60):
            start = base + rng.randrange(100)
            end = start + rng.randint(1, 30)
            keys = rng.sample([(rp, rc) for rp in rps for rc in classes], rng.randint(1, 4))
            amounts = {key: rng.randint(1, 9) for key in keys}
            reservation(conn, start, end, amounts)
            made.append((start, end, amounts))
    for _ in range(150):
        lo = base + rng.randrange(-5, 130)
        hi = lo + rng.randint(1, 40)
        with db.read() as conn:
            found = reserved.peaks(conn, lo, hi)
        brute: dict = {}
        for instant in range(lo, hi):
            level: dict = {}
            for start, end, amounts in made:
                if start <= instant < end:
                    for key, amount in amounts.items():
                        level[key] = level.get(key, 0) + amount
            for key, amount in level.items():
                brute[key] = max(brute.get(key, 0), amount)
        assert found == brute, (lo - base, hi - base)


def _check_windows(apps, seed: int, sharing: bool, windows: int, per_window: int,
                   bitten: int = 20) -> None:
    db, memory, sql = apps
    rng = random.Random(seed * 7919)
    world = _world(apps, seed, sharing)
    base = _base(db)
    made = _reserve_randomly(db, rng, base, 40)
    queries = _queries(rng, world, 120)
    spans = [(base + s * HOUR, base + (s + rng.randint(1, 16)) * HOUR)
             for s in (rng.randrange(HOURS) for _ in range(windows))]
    # A start in the past means now, before any reservation starts.
    spans.append((946684800, base + rng.randint(1, HOURS) * HOUR))
    differing = empty_bitten = 0
    for lo, hi in spans:
        got = {}
        for params in rng.sample(queries, per_window):
            query = _window_query(params, lo, hi)
            mine = raw(memory, WINDOW + query)
            assert raw(sql, WINDOW + query) == mine, (params, lo, hi)
            got[urlencode(params)] = mine
            # Plain requests between window ones answer as plain ones.
            plain = urlencode(rng.choice(queries))
            assert raw(memory, PLAIN + plain) == raw(sql, PLAIN + plain), plain
        peaks = _brute_peaks(made, max(lo, base), hi)
        with peaks_allocated(db, peaks):
            for key, mine in got.items():
                assert mine == raw(sql, PLAIN + key), (key, lo, hi)
                assert mine == raw(memory, PLAIN + key), (key, lo, hi)
        for key, mine in got.items():
            plain = raw(sql, PLAIN + key)
            differing += plain != mine
            empty_bitten += (b'"allocation_requests":[]' in mine[1]
                             and b'"allocation_requests":[]' not in plain[1])
    # The reservations changed many answers (else this proved little).
    assert differing >= bitten, differing
    assert empty_bitten > 0


def test_plain_and_window_requests_from_many_threads(apps):
    db, memory, sql = apps
    rng = random.Random(SEED + 11)
    world = _world(apps, SEED + 11)
    base = _base(db)
    _reserve_randomly(db, rng, base, 30)
    paths = []
    for params in _queries(rng, world, 40):
        paths.append(PLAIN + urlencode(params))
        lo = base + rng.randrange(HOURS) * HOUR
        paths.append(WINDOW + _window_query(params, lo, lo + 8 * HOUR))
    expected = {path: raw(sql, path) for path in paths}
    wrong: list = []

    def run(order):
        for path in order:
            if raw(memory, path) != expected[path]:
                wrong.append(path)
    threads = [threading.Thread(target=run, args=(random.Random(i).sample(paths, len(paths)),))
               for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not wrong, wrong[:3]


def test_refusals(apps):
    db, memory, sql = apps
    world = _world(apps, SEED)
    base = _base(db)
    start, end = _stamp(base), _stamp(base + HOUR)
    cases = [
        ("resources=VCPU:1", "placement.query.missing_value", "'start' is required"),
        (f"resources=VCPU:1&start={start}", "placement.query.missing_value",
         "'end' is required"),
        (f"resources=VCPU:1&start={start}&start={start}&end={end}",
         "placement.query.duplicate_key", "'start' may be specified only once"),
        (f"resources=VCPU:1&start=tomorrow&end={end}", "placement.query.bad_value",
         "'start' is not an ISO 8601 date and time: 'tomorrow'"),
        (f"resources=VCPU:1&start={start}&end=", "placement.query.bad_value",
         "'end' is not an ISO 8601 date and time"),
        (f"resources=VCPU:1&start=2030-01-01T10:00:00.5&end={end}",
         "placement.query.bad_value", "'start' has fractional seconds"),
        (f"resources=VCPU:1&start=2030-02-30T10:00:00&end={end}",
         "placement.query.bad_value", "'start' is not a valid date and time"),
        (f"resources=VCPU:1&start={end}&end={start}", "placement.query.bad_value",
         f"end={start} must be after start={end}"),
        (f"resources=VCPU:1&start={start}&end={start}", "placement.query.bad_value",
         "must be after"),
        ("resources=VCPU:1&start=2001-01-01T00:00&end=2001-01-02T00:00",
         "placement.query.bad_value",
         "the window has ended: end=2001-01-02T00:00:00Z is not after now"),
        (f"start={start}&end={end}", "placement.query.missing_value",
         "There must be at least one resources"),
        (f"resources=VCPU:1&start={start}&end={end}&explain_provider=x",
         "placement.undefined_code", "'explain_provider'"),
        (f"resources=CUSTOM_NOPE:1&start={start}&end={end}", "placement.undefined_code",
         "No such resource class CUSTOM_NOPE"),
    ]
    for query, code, words in cases:
        for app in (memory, sql):
            status, body = raw(app, WINDOW + query)
            assert status == 400, (query, body)
            error = json.loads(body)["errors"][0]
            assert error["code"] == code, (query, error)
            assert words in error["detail"], (query, error)
    # The route speaks 1.39 whatever the header says: any-of traits and
    # root_required are read, and the answer has 1.39's shape.
    query = "resources=VCPU:1&required=in:CUSTOM_A,CUSTOM_B&root_required=!CUSTOM_C"
    for app in (memory, sql):
        for version in ("1.0", "1.39"):
            assert raw(app, WINDOW + f"{query}&start={start}&end={end}", version) == raw(
                app, PLAIN + query), version
    assert world.providers


def test_window_helpers():
    asked = {"start": ["2100-01-01T12:00:00Z"], "end": ["2100-01-01T13:00:00+01:00"]}
    midday = 4_102_488_000
    assert window_candidates.instant(asked, "start") == midday
    assert window_candidates.instant(asked, "end") == midday
    with pytest.raises(errors.QueryMissingValue):
        window_candidates.instant({}, "start")
    with pytest.raises(errors.DuplicateQueryKey):
        window_candidates.instant({"end": ["2100-01-01T00:00", "2100-01-02T00:00"]}, "end")
    with pytest.raises(errors.QueryBadValue) as bad:
        window_candidates.instant({"end": ["x" * 5000]}, "end")
    assert len(bad.value.detail) < 700  # the value is quoted cut short
    assert window_candidates.window(midday, midday + 60, midday - 5) == (midday, midday + 60)
    # A start in the past means now.
    assert window_candidates.window(0, midday + 60, midday) == (midday, midday + 60)
    for start, end, now in ((midday, midday, 0), (midday, midday - 1, 0),
                            (0, midday, midday), (0, midday, midday + 1)):
        with pytest.raises(errors.QueryBadValue):
            window_candidates.window(start, end, now)
    assert window_candidates.split_window("a=1&start=x%2B1&end=y&&b=2&start=z") == (
        "a=1&b=2", {"start": ["x+1", "z"], "end": ["y"]})


def test_policy_refuses_a_non_admin(apps):
    db, memory, _sql = apps
    base = _base(db)
    query = f"resources=VCPU:1&start={_stamp(base)}&end={_stamp(base + HOUR)}"
    path, _, qs = (WINDOW + query).partition("?")
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": qs,
               "HTTP_X_AUTH_TOKEN": "someone:proj", "HTTP_ACCEPT": "application/json",
               "wsgi.input": io.BytesIO(b"")}
    setup_testing_defaults(environ)
    seen = []
    b"".join(memory(environ, lambda status, headers, exc=None: seen.append(status)))
    assert seen[0].startswith("403"), seen
