"""GET /reservations/calendar/resource_providers/{uuid}?from=&to=
GET /reservations/calendar/projects/{project_id}?from=&to=

What is reserved over a period, as steps (ledger/calendar.py): per class
of a provider beside its capacity and what is allocated, with the
intervals that are short; per class of a project, with the reservations
counted. `from` defaults to the database's now, `to` to 30 days after
`from`; a period is at most MAX_DAYS long.
"""
from __future__ import annotations

import calendar
from typing import Optional

from placement_lite.api import errors, render, request, times
from placement_lite.api.request import PHRASE_QUERY
from placement_lite.api.schemas import calendars as schema
from placement_lite.db import clock
from placement_lite.ledger import calendar as ledger_calendar

RULE = "placement:reservations:calendar"
DAY = 86400
DEFAULT_DAYS = 30
# A year and a day: a leap year's whole calendar in one request, and a
# bound on the work one request can ask for.
MAX_DAYS = 366
# The last instant an answer can write (9999-12-31T23:59:59Z): a default
# `to` stops there.
LAST = calendar.timegm((9999, 12, 31, 23, 59, 59))


def _instant(value: str, name: str) -> int:
    try:
        return times.parse(value, name)
    except errors.ApiError as exc:
        raise _bad(exc.description) from None


def _bad(detail: str) -> errors.ApiError:
    return errors.bad_request(f"{PHRASE_QUERY}: {detail}")


def period(from_text: Optional[str], to_text: Optional[str], now: int,
           default_days: int = DEFAULT_DAYS) -> tuple[int, int]:
    """[from, to) as seconds, from the query's texts (None when absent);
    a 400 that says what is wrong otherwise."""
    start = now if from_text is None else _instant(from_text, "from")
    if to_text is None:
        end = min(start + default_days * DAY, LAST)
    else:
        end = _instant(to_text, "to")
    if end <= start:
        raise _bad(f"'to' ({times.text(end)}) must be after 'from' "
                   f"({times.text(start)}).")
    if end - start > MAX_DAYS * DAY:
        raise _bad(f"the period from {times.text(start)} to {times.text(end)} "
                   f"is longer than {MAX_DAYS} days; ask for a shorter one.")
    return start, end


def _steps(found) -> list[dict]:
    return [{"start": times.text(s.start), "end": times.text(s.end),
             "reserved": s.amount} for s in found]


def provider_body(cal: ledger_calendar.ProviderCalendar) -> dict:
    return {
        "resource_provider": cal.provider.uuid,
        "from": times.text(cal.start), "to": times.text(cal.end),
        "now": times.text(cal.now),
        "classes": {c.resource_class: {
            "capacity": c.capacity, "allocated": c.allocated,
            "steps": _steps(c.steps),
            "short": [{"start": times.text(s.start), "end": times.text(s.end),
                       "reserved": s.reserved, "free": s.free} for s in c.short]}
            for c in cal.classes},
    }


def project_body(cal: ledger_calendar.ProjectCalendar) -> dict:
    return {
        "project_id": cal.project_id,
        "from": times.text(cal.start), "to": times.text(cal.end),
        "now": times.text(cal.now),
        "classes": {name: {"steps": _steps(found)}
                    for name, found in cal.classes.items()},
        "reservations": list(cal.reservations),
    }


class _Calendar:
    policies = {"GET": RULE}

    def __init__(self, services):
        self.db = services.db

    def read(self, req, reader):
        query = request.query(req, schema.QUERY)
        with self.db.read() as conn:
            now = clock.now(conn)
            start, end = period(query.get("from"), query.get("to"), now)
            return reader(conn, start, end, now)


class ProviderCalendar(_Calendar):
    """A resource provider's reservation calendar."""

    def on_get(self, req, resp, uuid):
        found = self.read(req, lambda conn, start, end, now:
                          ledger_calendar.provider_calendar(conn, uuid, start, end, now))
        render.send(resp, provider_body(found))


class ProjectCalendar(_Calendar):
    """A project's reservation calendar."""

    def on_get(self, req, resp, project_id):
        found = self.read(req, lambda conn, start, end, now:
                          ledger_calendar.project_calendar(conn, project_id, start, end, now))
        render.send(resp, project_body(found))
