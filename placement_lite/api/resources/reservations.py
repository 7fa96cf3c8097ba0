"""/reservations, /reservations/{reservation_id} and
/reservations/{reservation_id}/end: room held on providers for a window
of time (docs/reservations.md). Our own routes: no microversion.

Each write runs in one transaction through `run_write`, with the checks
the services give reservation writes (Services.reservation_checks: the
quota's, when it enforces anything over reservations).
"""
from __future__ import annotations

import uuid as uuidlib
from typing import Any, Mapping, Optional

import falcon

from placement_lite.api import errors, render, request, times
from placement_lite.api.schemas import reservations as schema
from placement_lite.ledger import reservation_reads, reservations
from placement_lite.ledger.reservation_reads import Filters, Reservation

RULES = {action: f"placement:reservations:{action}"
         for action in ("create", "show", "list", "update", "delete", "end")}


def href(req, uuid: str) -> str:
    return f"{req.prefix.rstrip('/')}/reservations/{uuid}"


def body(req, r: Reservation) -> dict:
    """A reservation as every route answers it."""
    return {
        "id": r.uuid, "project_id": r.project_id, "user_id": r.user_id,
        "start": times.text(r.start), "end": times.text(r.end),
        "generation": r.generation, "status": r.status,
        "allocations": {rp: {"resources": dict(resources)}
                        for rp, resources in sorted(r.allocations.items())},
        "short": [{"resource_provider": s.resource_provider,
                   "resource_class": s.resource_class,
                   "start": times.text(s.start), "end": times.text(s.end),
                   "free": s.free} for s in r.short],
        # Links start at the mount point (SCRIPT_NAME), as Placement's
        # do; only the Location header is absolute.
        "links": [render.link("self", f"{req.root_path}/reservations/{r.uuid}")],
    }


def _canonical(value: str) -> str:
    return str(uuidlib.UUID(value))


def allocations_of(data: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """provider uuid (as stored) -> class -> amount, from a body the
    schema passed."""
    out: dict[str, dict[str, int]] = {}
    for rp, entry in data["allocations"].items():
        canonical = _canonical(rp)
        if canonical in out:
            raise errors.bad_request(
                f"JSON does not validate: resource provider {canonical} appears "
                "more than once in 'allocations' (spelled two ways).")
        out[canonical] = dict(entry["resources"])
    return out


def window(data: Mapping[str, Any]) -> tuple[int, int]:
    return times.parse(data["start"], "start"), times.parse(data["end"], "end")


class Reservations:
    """GET /reservations lists, POST reserves."""

    policies = {"GET": RULES["list"], "POST": RULES["create"]}

    def __init__(self, services):
        self.services = services

    def on_get(self, req, resp):
        params = request.query(req, schema.LIST_QUERY)
        filters = Filters(
            project_id=params.get("project_id"), user_id=params.get("user_id"),
            resource_provider=_maybe(params.get("resource_provider")),
            status=params.get("status"),
            start=_time(params.get("from"), "from"),
            end=_time(params.get("to"), "to"))
        limit = int(params["limit"]) if "limit" in params else None
        with self.services.db.read() as conn:
            found = reservation_reads.list_reservations(
                conn, filters, limit, _maybe(params.get("marker")))
        render.send(resp, {"reservations": [body(req, r) for r in found]})

    def on_post(self, req, resp):
        data = request.json_body(req, schema.CREATE)
        start, end = window(data)
        wanted = allocations_of(data)
        rid = _maybe(data.get("id"))
        checks = self.services.reservation_checks
        made = self.services.db.run_write(lambda conn: reservations.create(
            conn, rid, data["project_id"], data["user_id"], start, end, wanted,
            checks))
        resp.location = href(req, made.uuid)
        render.send(resp, body(req, made), falcon.HTTP_201)


def _maybe(value: Optional[str]) -> Optional[str]:
    return None if value is None else _canonical(value)


def _time(value: Optional[str], name: str) -> Optional[int]:
    return None if value is None else times.parse(value, name)


class OneReservation:
    """GET shows, PUT changes, DELETE cancels (or forgets an ended one)."""

    policies = {"GET": RULES["show"], "PUT": RULES["update"],
                "DELETE": RULES["delete"]}

    def __init__(self, services):
        self.services = services

    def on_get(self, req, resp, reservation_id):
        with self.services.db.read() as conn:
            found = reservation_reads.get(conn, reservation_id)
        render.send(resp, body(req, found))

    def on_put(self, req, resp, reservation_id):
        data = request.json_body(req, schema.UPDATE)
        if "id" in data and _canonical(data["id"]) != reservation_id:
            raise errors.bad_request(
                f"The body's id ({data['id']}) is not the reservation's in the "
                f"URL ({reservation_id}): a reservation's id cannot change.")
        start, end = window(data)
        wanted = allocations_of(data)
        checks = self.services.reservation_checks
        changed = self.services.db.run_write(lambda conn: reservations.replace(
            conn, reservation_id, data["generation"], start, end, wanted,
            data.get("project_id"), data.get("user_id"), checks))
        render.send(resp, body(req, changed))

    def on_delete(self, req, resp, reservation_id):
        checks = self.services.reservation_checks
        self.services.db.run_write(lambda conn: reservations.cancel(
            conn, reservation_id, checks))
        render.no_content(resp)


class ReservationEnd:
    """POST ends an active reservation now."""

    policies = {"POST": RULES["end"]}

    def __init__(self, services):
        self.services = services

    def on_post(self, req, resp, reservation_id):
        checks = self.services.reservation_checks
        ended = self.services.db.run_write(lambda conn: reservations.end(
            conn, reservation_id, checks))
        render.send(resp, body(req, ended))
