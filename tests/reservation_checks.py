"""The model test's side of the conversation: send a request, hold the
answer against the model's decision, and compare what the service shows
(reservations, usages, calendars) with what the model holds.

Instants the grid cannot name (a start stored as "now", an early end) are
checked to lie between the database clock's readings just before and just
after the request, and are then remembered as the service gave them.
"""
from __future__ import annotations

import collections
import datetime as dt
import re

from placement_lite.db import clock
from tests import reservation_model as m

ADMIN = {"X-Auth-Token": "admin",
         "OpenStack-API-Version": "placement latest"}
FORMAT = "%Y-%m-%dT%H:%M:%SZ"
NO_ROOM_DETAIL = re.compile(
    r"^Unable to reserve.*'(?P<rc>[^']+)' on resource provider '(?P<rp>[^']+)'"
    r" from (?P<start>\S+) to (?P<end>\S+): requested (?P<requested>[-\d.]+),"
    r" free (?P<free>[-\d.]+) \(capacity (?P<capacity>[-\d.]+), allocated"
    r" (?P<allocated>[-\d.]+), reserved (?P<reserved>[-\d.]+)\)", re.S)


def at(base: int, k: int) -> int:
    return base + k * m.SLOT


def iso(t: int) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime(FORMAT)


def parse(text: str) -> int:
    return int(dt.datetime.strptime(text, FORMAT)
               .replace(tzinfo=dt.timezone.utc).timestamp())


class Checker:
    def __init__(self, client, db, base: int, model: m.Model,
                 counts: collections.Counter, notes: collections.Counter):
        self.client, self.db, self.base, self.model = client, db, base, model
        # Requests by kind and answer; and what else was seen, by kind.
        self.counts, self.notes = counts, notes
        self.names: dict[str, str] = {}  # provider name -> uuid
        router = client.app._router
        self.calendars = router.find(
            "/reservations/calendar/resource_providers/x") is not None

    # Requests ---------------------------------------------------------------

    def now(self) -> int:
        with self.db.engine.connect() as conn:
            return clock.now(conn)

    def call(self, method: str, path: str, body=None, want=None, query=None):
        r = self.client.simulate_request(method, path, json=body,
                                         params=query, headers=ADMIN)
        answer = r.json if r.text else None
        assert want is None or r.status_code == want, (
            method, path, body, r.status_code, r.text)
        self.last_headers = r.headers
        return r.status_code, answer

    def start_text(self, k: int) -> str:
        """A start slot as a request gives it; NOW is a start in the past."""
        return iso(self.base - 2 * 86400 if k == m.NOW else at(self.base, k))

    @staticmethod
    def allocations_body(amounts: dict) -> dict:
        out: dict = {}
        for (rp, rc), a in sorted(amounts.items()):
            out.setdefault(rp, {"resources": {}})["resources"][rc] = a
        return out

    def decide(self, kind: str, decision: m.Decision, method: str, path: str,
               body=None, rid=None, before=None) -> None:
        """Send the request; the answer must be one the model allows."""
        t0 = self.now()
        status, answer = self.call(method, path, body)
        t1 = self.now()
        code = None
        if status >= 400:
            error = answer["errors"][0]
            assert {"status", "title", "detail", "code", "request_id"} <= set(error)
            code = error["code"]
        allowed = any(status == s and (c is None or c == code)
                      for s, c in decision.outcomes)
        self.counts[(kind, "accepted" if status < 400
                     else f"refused {status} {code}")] += 1
        if len(decision.outcomes) > 1:
            self.notes[(kind, f"one of {len(decision.outcomes)} answers allowed, "
                        f"gave {status} {code}")] += 1
        if decision.note and status >= 400:
            self.notes[(kind, decision.note)] += 1
        assert allowed, (f"{method} {path}: the model allows "
                         f"{sorted(decision.outcomes, key=str)}, the service "
                         f"answered {status} {answer}; body {body}")
        if (status, code) == m.NO_ROOM:
            self.no_room(answer["errors"][0]["detail"], decision.shortfalls, t0, t1)
        if not decision.accepts:
            return
        decision.apply(answer or {})
        kind = kind.split()[0]
        if rid is not None and kind in ("create", "replace", "end"):
            self.answered(kind, rid, answer, t0, t1, before)

    def answered(self, kind, rid, answer, t0, t1, before) -> None:
        r = self.model.reservations[rid]
        if kind == "create":
            assert self.last_headers.get("location", "").endswith(
                f"/reservations/{rid}"), self.last_headers
        if kind == "replace":
            assert answer["generation"] != before, (before, answer)
        if kind == "end":
            r.end_at = parse(answer["end"])
            assert t0 <= r.end_at <= t1, (t0, t1, answer)
        elif r.start == m.NOW and r.start_at is None:
            r.start_at = parse(answer["start"])
            assert t0 <= r.start_at <= t1, (t0, t1, answer)
        self.reservation(answer, r, t1)

    def no_room(self, detail: str, shortfalls, t0: int, t1: int) -> None:
        """The detail names one key the model finds short, and that key's
        first short interval with the model's figures."""
        found = NO_ROOM_DETAIL.match(detail)
        assert found, detail
        rp = self.names.get(found["rp"], found["rp"])
        named = [s for s in shortfalls if (s.rp, s.rc) == (rp, found["rc"])]
        assert named, (detail, shortfalls)
        s = named[0]
        start = parse(found["start"])
        self.notes[("no_room", "detail checked, interval from now"
                    if s.start == m.NOW else "detail checked, interval ahead")] += 1
        if s.start == m.NOW:
            assert t0 <= start <= t1, (detail, s, t0, t1)
        else:
            assert start == at(self.base, s.start), (detail, s)
        assert parse(found["end"]) == at(self.base, s.end), (detail, s)
        for name in ("requested", "free", "capacity", "allocated", "reserved"):
            assert float(found[name]) == float(getattr(s, name)), (name, detail, s)

    # What the service shows --------------------------------------------------

    def reservation(self, answer: dict, r: m.Reservation, t1: int) -> None:
        start, end = self.window(r)
        got = {k: answer.get(k) for k in ("id", "start", "end", "status",
                                          "generation", "allocations")}
        want = {"id": r.rid, "start": iso(start), "end": iso(end),
                "status": r.status, "generation": r.generation,
                "allocations": self.allocations_body(r.amounts)}
        assert got == want, (got, want)
        # Links start at the mount point, as the doc and Placement's own
        # links show them.
        assert answer["links"] == [
            {"rel": "self", "href": f"/reservations/{r.rid}"}], answer["links"]
        short = sorted(answer["short"], key=lambda s: (
            s["resource_provider"], s["resource_class"], s["start"]))
        expected = self.model.short(r.rid)
        assert len(short) == len(expected), (r.rid, short, expected)
        if short:
            self.notes[("shown", "a short reservation, checked")] += 1
        for s, e in zip(short, expected):
            assert (s["resource_provider"], s["resource_class"]) == (e.rp, e.rc)
            begins = parse(s["start"])
            if e.start == m.NOW:
                assert r.start_at <= begins <= t1, (s, e, r)
            else:
                assert begins == at(self.base, e.start), (s, e)
            assert parse(s["end"]) == at(self.base, e.end), (s, e)
            assert float(s["free"]) == float(e.free), (s, e)

    def window(self, r: m.Reservation) -> tuple[int, int]:
        """The reservation's [start, end) in seconds."""
        return (r.start_at if r.start == m.NOW else at(self.base, r.start),
                r.end_at if r.ended else at(self.base, r.end))

    def listing(self, project: str, query=None, keep=lambda r: True,
                limit=None) -> None:
        """GET /reservations of the project (and `query`) is the model's
        reservations that `keep` keeps, by start and then id; with
        `limit`, page by page, following the marker."""
        query = {"project_id": project, **(query or {})}
        got: list = []
        while True:
            page = dict(query, **({"limit": limit} if limit else {}))
            if got and limit:
                page["marker"] = got[-1]["id"]
            _s, answer = self.call("GET", "/reservations", want=200, query=page)
            got += answer["reservations"]
            if not limit or len(answer["reservations"]) < limit:
                break
        t1 = self.now()
        want = sorted((r for r in self.model.reservations.values() if keep(r)),
                      key=lambda r: (self.window(r)[0], r.rid))
        assert [g["id"] for g in got] == [r.rid for r in want], (query, got, want)
        for g, r in zip(got, want):
            assert (g["project_id"], g["user_id"]) == (project, "u1"), g
            self.reservation(g, r, t1)

    def usages(self, rp: str) -> None:
        _s, answer = self.call("GET", f"/resource_providers/{rp}/usages", want=200)
        got = {rc: answer["usages"].get(rc, 0) for rc in self.model.inventories[rp]}
        assert got == self.model.usage(rp), (rp, got, self.model.usage(rp))

    def consumer(self, consumer: str) -> None:
        """GET /allocations/{consumer}: what the model holds for it, the
        marker rows of its draws included (gone once its reservation
        ended early or was deleted)."""
        _s, answer = self.call("GET", f"/allocations/{consumer}", want=200)
        got = {(rp, rc): n for rp, a in answer["allocations"].items()
               for rc, n in a["resources"].items()}
        want = self.model.allocations.get(consumer, {})
        assert got == want, (consumer, got, want)
        if any(m.marker_rid(rc) for _rp, rc in got):
            self.notes[("consumer", "drawing allocations, checked")] += 1

    def _period(self, period) -> tuple[dict, int, int]:
        """The query of a calendar over slots `period` (first, last), or
        from now (the default) to the grid's end when None."""
        if period is None:
            return {"to": iso(at(self.base, self.model.slots))}, m.NOW, self.model.slots
        first, last = period
        return ({"from": iso(at(self.base, first)), "to": iso(at(self.base, last))},
                first, last)

    def _instants(self, answer: dict, steps) -> list:
        """Steps in slots as the answer's instants: slot NOW starts at
        the period's start, which is the answer's now."""
        def instant(k):
            return parse(answer["from"]) if k == m.NOW else at(self.base, k)
        return [(instant(a), at(self.base, b), n) for a, b, n in steps]

    def calendar(self, rp: str, period=None) -> None:
        """The provider's calendar (docs/reservations.md, Calendars): per
        class the capacity, what is allocated, what is reserved as steps
        covering the period, and the steps from now on where what is
        reserved lacks room."""
        if not self.calendars:
            return
        query, first, last = self._period(period)
        t0 = self.now()
        _s, answer = self.call(
            "GET", f"/reservations/calendar/resource_providers/{rp}", want=200,
            query=query)
        self._period_answered(answer, query, t0)
        want_classes = self.model.calendar(rp, first, last)
        assert sorted(answer["classes"]) == sorted(want_classes), answer
        for rc, steps in want_classes.items():
            key, got = (rp, rc), answer["classes"][rc]
            cap, alloc = self.model.capacity(key), self.model.allocated(key)
            assert (float(got["capacity"]), got["allocated"]) == (cap, alloc), got
            shown = [(parse(s["start"]), parse(s["end"]), s["reserved"])
                     for s in got["steps"]]
            assert shown == self._instants(answer, steps), (rp, rc, shown, steps)
            short = [(parse(s["start"]), parse(s["end"]), s["reserved"], float(s["free"]))
                     for s in got["short"]]
            want = [(a, b, n, float(cap - alloc - n))
                    for a, b, n in self._instants(answer, steps)
                    if n and alloc + n > cap]
            assert short == want, (rp, rc, short, want)
            if short:
                self.notes[("calendar", "provider with short steps, checked")] += 1
        self.notes[("calendar", "provider, checked")] += 1

    def project_calendar(self, project: str, period=None) -> None:
        """The project's calendar: per class it reserves in the period,
        the steps summed over providers; and the reservations whose
        windows overlap the period, by start and then id."""
        if not self.calendars:
            return
        query, first, last = self._period(period)
        t0 = self.now()
        _s, answer = self.call(
            "GET", f"/reservations/calendar/projects/{project}", want=200, query=query)
        self._period_answered(answer, query, t0)
        want_classes = self.model.project_calendar(first, last)
        assert sorted(answer["classes"]) == sorted(want_classes), answer
        for rc, steps in want_classes.items():
            shown = [(parse(s["start"]), parse(s["end"]), s["reserved"])
                     for s in answer["classes"][rc]["steps"]]
            assert shown == self._instants(answer, steps), (rc, shown, steps)
        low, high = parse(answer["from"]), parse(answer["to"])
        counted = sorted((r for r in self.model.reservations.values()
                          if self.window(r)[0] < high and self.window(r)[1] > low),
                         key=lambda r: (self.window(r)[0], r.rid))
        assert answer["reservations"] == [r.rid for r in counted], answer
        self.notes[("calendar", "project, checked")] += 1

    def _period_answered(self, answer: dict, query: dict, t0: int) -> None:
        """The period answered is the one asked for; by default it starts
        at the database's now, which the answer gives."""
        assert answer["to"] == query["to"], (answer, query)
        if "from" in query:
            assert answer["from"] == query["from"], (answer, query)
        else:
            assert answer["from"] == answer["now"], answer
            assert t0 <= parse(answer["now"]) <= self.now(), (t0, answer)
