"""The console's reservation pages: the list of reservations, and the
timelines of a provider and of a project.

They read what GET /reservations/calendar/... reads (ledger/calendar.py,
the period parsed by api/resources/calendars.period) under that route's
policy rule, with the targets the routes would give it.
"""
from __future__ import annotations

from urllib.parse import quote
import re

from placement_lite import errors as domain_errors
from placement_lite.api.errors import ApiError
from placement_lite.api.paths import canonical_uuid
from placement_lite.api.resources import calendars as calendar_api
from placement_lite.api.times import text as format_time
from placement_lite.db import clock
from placement_lite.ledger import calendar
from placement_lite.ui import pages, session, timelines

RULE = calendar_api.RULE
DAY = 86400
# The spans a timeline page offers as links, in days.
SPANS = (7, 30, 90, 365)


_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _field(req, name: str):
    """A period field as typed: a date alone means its midnight (UTC)."""
    value = (req.get_param(name) or "").strip()
    return f"{value}T00:00:00Z" if _DATE.match(value) else (value or None)


def _period(req, now: int):
    """(start, end, error) from the page's ?from=&to= (or ?days=): the
    API's defaults and bounds; a bad period falls back to the default
    and says why."""
    days = (req.get_param("days") or "").strip()
    days = int(days) if days.isdigit() and 0 < int(days) <= calendar_api.MAX_DAYS \
        else None
    try:
        start, end = calendar_api.period(
            _field(req, "from"), _field(req, "to"), now,
            default_days=days or calendar_api.DEFAULT_DAYS)
        return start, end, None
    except ApiError as exc:
        start, end = calendar_api.period(None, None, now)
        why = exc.description.split(": ", 1)[-1]
        return start, end, f"{why} Showing the next {calendar_api.DEFAULT_DAYS} days."


def _spans(path: str, start: int) -> list:
    """(label, href) of the spans offered, each from the page's start."""
    return [(f"{d} days", f"{path}?from={format_time(start)}&days={d}") for d in SPANS]


class _Timeline(pages.Page):
    nav = "Reservations"

    def period_values(self, req, path: str, start: int, end: int, now: int,
                      error) -> dict:
        back = max(end - start, DAY)
        return {"start": start, "end": end, "now": now, "period_error": error,
                "from_text": format_time(start), "to_text": format_time(end),
                "span_text": timelines.span_text(start, end), "spans": _spans(path, start),
                "earlier": f"{path}?from={format_time(start - back)}&to={format_time(start)}",
                "later": f"{path}?from={format_time(end)}&to={format_time(end + back)}",
                "from_now": path}


class ProviderTimeline(_Timeline):
    rules = ()  # checked in show, with the route's target

    def show(self, req, resp, identity, uuid):
        uuid = canonical_uuid(uuid) or uuid
        session.require(self.services.policy, identity, (RULE,), [{"uuid": uuid}])
        path = f"/ui/reservations/providers/{uuid}"
        with self.db.read() as conn:
            now = clock.now(conn)
            start, end, error = _period(req, now)
            try:
                cal = calendar.provider_calendar(conn, uuid, start, end, now)
            except domain_errors.ResourceProviderNotFound:
                return self.missing(resp, identity,
                                    f"No resource provider with uuid {uuid[:80]}.")
            search = calendar.ReservationSearch(provider=uuid, start=start, end=end)
            total = calendar.count_reservations(conn, search, now)
            rows = calendar.reservation_page(conn, search, 0, pages.PER_PAGE, now)
        pages.render(resp, "reservation_provider.html", identity=identity,
                     active=self.nav, cal=cal, provider=cal.provider, rows=rows,
                     total=total, timeline=timelines.timeline, when=timelines.when_text,
                     **self.period_values(req, path, start, end, now, error))


class ProjectTimeline(_Timeline):
    rules = ()

    def show(self, req, resp, identity, project_id):
        session.require(self.services.policy, identity, (RULE,),
                        [{"project_id": project_id}])
        path = f"/ui/reservations/projects/{quote(project_id, safe='')}"
        with self.db.read() as conn:
            now = clock.now(conn)
            start, end, error = _period(req, now)
            cal = calendar.project_calendar(conn, project_id, start, end, now)
            search = calendar.ReservationSearch(project=project_id, start=start, end=end)
            total = calendar.count_reservations(conn, search, now)
            rows = calendar.reservation_page(conn, search, 0, pages.PER_PAGE, now)
        pages.render(resp, "reservation_project.html", identity=identity,
                     active=self.nav, cal=cal, rows=rows, total=total,
                     timeline=timelines.timeline, when=timelines.when_text,
                     **self.period_values(req, path, start, end, now, error))


class ReservationList(pages.Page):
    """Reservations by start, 50 a page, filtered by project, provider
    and status."""
    rules = ()
    nav = "Reservations"

    def show(self, req, resp, identity):
        def field(name, most):
            return (req.get_param(name) or "").strip()[:most]
        project = field("project", 255)
        provider_text = field("provider", 80)
        provider = canonical_uuid(provider_text) or provider_text
        status = field("status", 16)
        status = status if status in calendar.STATUSES else ""
        session.require(self.services.policy, identity, (RULE,),
                        [{"project_id": project} if project else {}])
        search = calendar.ReservationSearch(project, provider, status)
        page = pages._page(req)
        with self.db.read() as conn:
            now = clock.now(conn)
            total = calendar.count_reservations(conn, search, now)
            rows = calendar.reservation_page(conn, search, (page - 1) * pages.PER_PAGE,
                                             pages.PER_PAGE, now)
        pages.render(resp, "reservations.html", identity=identity, active=self.nav,
                     search=search, statuses=calendar.STATUSES, rows=rows, now=now,
                     searched=any((project, provider, status)),
                     when=timelines.when_text,
                     pager=pages._pager(req, page, pages.PER_PAGE, total))
