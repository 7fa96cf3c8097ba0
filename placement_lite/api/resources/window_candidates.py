"""GET /reservations/allocation_candidates: room throughout a window.

The query string is GET /allocation_candidates' own at the microversion
the route speaks (api/versions.py: WINDOW_CANDIDATES), parsed by the same
code, plus `start` and `end`, each given once (read by api/times.py). The
answer is that route's, but a provider's free room for a class is its
capacity less what is allocated less the most reserved there at any
instant of [start, end): the engine reads it as extra `used`
(candidates/overlay.py), which the summaries show in `used`. With nothing
reserved in the window, the answer is the plain route's, byte for byte.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import falcon

from placement_lite import errors
from placement_lite.api import times
from placement_lite.api.errors import ApiError
from placement_lite.api.resources.allocation_candidates import AllocationCandidates, _wanted
from placement_lite.api.versions import WINDOW_CANDIDATES
from placement_lite.candidates import overlay
from placement_lite.db import clock

WINDOW_PARAMS = ("start", "end")
_PHRASE = "Invalid query string parameters"


def split_window(query_string: str) -> tuple[str, dict]:
    """(the query string without start and end, {name: [values]} of those)."""
    rest, found = [], {}
    for part in query_string.split("&"):
        name, _eq, value = part.partition("=")
        name = falcon.uri.decode(name)
        if name in WINDOW_PARAMS:
            found.setdefault(name, []).append(falcon.uri.decode(value))
        elif part:
            rest.append(part)
    return "&".join(rest), found


def instant(params: Mapping[str, Sequence[str]], name: str) -> int:
    """The instant the query gives as `name`, which must appear once:
    400 placement.query.missing_value when absent, .duplicate_key when
    repeated, .bad_value when it is no instant."""
    values = params.get(name)
    if not values:
        raise errors.QueryMissingValue(
            f"{_PHRASE}: {name!r} is required: an ISO 8601 date and time "
            f"such as {times.EXAMPLE} (UTC when no offset is given).")
    if len(values) > 1:
        raise errors.DuplicateQueryKey(name)
    try:
        return times.parse(values[0], name)
    except ApiError as exc:
        raise errors.QueryBadValue(f"{_PHRASE}: {exc.description}") from None


def window(start: int, end: int, now: int) -> tuple[int, int]:
    """[start, end) as asked, from `now` on (a start in the past means
    now); 400 placement.query.bad_value when that is empty."""
    if end <= start:
        raise errors.QueryBadValue(
            f"{_PHRASE}: end={times.text(end)} must be after "
            f"start={times.text(start)}.")
    if end <= now:
        raise errors.QueryBadValue(
            f"{_PHRASE}: the window has ended: end={times.text(end)} is not "
            f"after now ({times.text(now)}).")
    return max(start, now), end


class WindowCandidates(AllocationCandidates):
    """Where a request for resources fits throughout a window."""

    policies = {"GET": "placement:reservations:candidates"}

    def on_get(self, req, resp):
        rest, asked = split_window(req.query_string)
        start, end = instant(asked, "start"), instant(asked, "end")
        wanted = _wanted(rest, WINDOW_CANDIDATES)

        def overlay_of(conn):
            # The database's now decides what has started and ended.
            lo, hi = window(start, end, clock.now(conn))
            return overlay.window(conn, lo, hi)
        self.respond(req, resp, wanted, WINDOW_CANDIDATES, overlay_of)

    def _searched(self, started: float) -> None:
        """The candidates search metric is the plain route's alone."""
