"""ledger/timeline.py against a brute-force count at every instant."""
import random

import pytest

from placement_lite.ledger import timeline


def _at(windows, t):
    return sum(a for s, e, a in windows if s <= t < e)


def _random_windows(rng, n, horizon=40):
    out = []
    for _ in range(n):
        s = rng.randrange(horizon)
        out.append((s, s + rng.randrange(0, 12), rng.randrange(0, 6)))
    return out


@pytest.mark.parametrize("seed", range(200))
def test_steps_equal_the_amount_at_every_instant(seed):
    rng = random.Random(seed)
    windows = _random_windows(rng, rng.randrange(0, 8))
    start = rng.randrange(-5, 30)
    end = start + rng.randrange(0, 30)
    got = timeline.steps(windows, start, end)
    covered = [t for s in got for t in range(s.start, s.end)]
    assert covered == list(range(start, end))
    for s in got:
        for t in range(s.start, s.end):
            assert s.amount == _at(windows, t)
    for a, b in zip(got, got[1:]):
        assert a.amount != b.amount
    want_peak = max((_at(windows, t) for t in range(start, end)), default=0)
    assert timeline.peak(windows, start, end) == want_peak


@pytest.mark.parametrize("seed", range(200))
def test_first_short_is_the_first_instant_without_room(seed):
    rng = random.Random(seed)
    windows = _random_windows(rng, rng.randrange(0, 8))
    room, amount = rng.randrange(0, 12), rng.randrange(1, 5)
    start = rng.randrange(0, 30)
    end = start + rng.randrange(1, 20)
    short = [t for t in range(start, end) if _at(windows, t) + amount > room]
    got = timeline.first_short(windows, room, amount, start, end)
    if not short:
        assert got is None
        return
    assert got.start == short[0]
    assert got.free == room - _at(windows, short[0])
    assert all(_at(windows, t) + amount > room for t in range(got.start, got.end))


@pytest.mark.parametrize("seed", range(100))
def test_peak_after_is_the_most_reserved_from_now_on(seed):
    rng = random.Random(seed)
    windows = _random_windows(rng, rng.randrange(0, 8))
    now = rng.randrange(0, 40)
    want = max((_at(windows, t) for t in range(now, 60)), default=0)
    assert timeline.peak_after(windows, now) == want
    # The claim rule's SQL filters windows that ended (end <= now) and
    # needs no clipping: what remains peaks where it would from now on.
    live = [w for w in windows if w[1] > now]
    assert timeline.peak(live, min([w[0] for w in live] + [now]), 60) == want


def test_a_shrunken_room_reports_negative_free():
    got = timeline.first_short([(0, 10, 5)], room=3, amount=1, start=0, end=10)
    assert got == (0, 10, -2)
