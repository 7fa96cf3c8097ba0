"""The lease-policy service Blazar's ExternalServiceFilter calls.

POST /v1/check-create  {"context": {...}, "lease": {...}}
POST /v1/check-update  {"context": {...}, "current_lease": {...}, "lease": {...}}
POST /v1/on-end        {"context": {...}, "lease": {...}}
204 allows; 403 {"message": "..."} refuses with words Blazar shows the
user; a malformed body is a 400 (`placement.lease.malformed`) naming the
field, by the schemas in api/schemas/lease.py.

Auth: with settings.lease_token set, these paths take exactly that static
token in X-Auth-Token (what Blazar's external_service_token sends) and no
identity; without it they need a normal identity allowed by the
placement:lease:check rule.

GET /quota/lease-ledger?project_id=P lists P's charges and refunds and
its balance per resource, for audit.
"""
from __future__ import annotations

import datetime as dt
import hmac
import json
import re
from typing import Any, Mapping, Optional

import falcon
import jsonschema

from placement_lite.api import errors, render, request
from placement_lite.api.echo import quote
from placement_lite.api.schemas import lease as schema
from placement_lite.quota import lease

CHECK = "placement:lease:check"
LEDGER = "placement:lease:ledger"

SCHEMAS = {"create": schema.CHECK_CREATE, "update": schema.CHECK_UPDATE,
           "end": schema.ON_END}
# Built once: the documents are constants.
_VALIDATORS = {event: jsonschema.Draft7Validator(document)
               for event, document in SCHEMAS.items()}


# Reading Blazar's bodies -------------------------------------------------------

_COUNT_FIELDS = ("amount", "max", "min")
_DIGITS = re.compile(schema.COUNT_DIGITS["pattern"])
_TYPE_WORDS = {"object": "an object", "array": "a list", "string": "a string",
               "integer": "a whole number", "number": "a number",
               "boolean": "true or false", "null": "null"}


def _counts_as_numbers(body: Any) -> None:
    """Blazar sends host counts as digit strings too ("min": "1"): read
    them as the numbers they are, so one schema rule bounds both."""
    if not isinstance(body, dict):
        return
    for key in ("lease", "current_lease"):
        raw = body.get(key)
        reservations = raw.get("reservations") if isinstance(raw, dict) else None
        for r in reservations if isinstance(reservations, list) else ():
            for name in _COUNT_FIELDS if isinstance(r, dict) else ():
                if isinstance(r.get(name), str) and _DIGITS.search(r[name]):
                    r[name] = int(r[name])


def _name(path) -> str:
    """lease.reservations[0].max; a top-level member quoted; the body."""
    parts = list(path)
    if not parts:
        return "The body"
    if len(parts) == 1:
        return f"'{parts[0]}'"
    text = str(parts[0])
    for part in parts[1:]:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def _must_be(node: Mapping) -> str:
    if node.get("description"):
        return node["description"]
    types = node.get("type", ())
    types = [types] if isinstance(types, str) else list(types)
    return " or ".join(_TYPE_WORDS.get(t, t) for t in types) or "valid"


def _words(err: jsonschema.ValidationError) -> str:
    """One schema failure as a sentence naming the field."""
    path, failed, value = list(err.absolute_path), err.validator, err.validator_value
    if failed == "required":
        missing = next(p for p in value if p not in err.instance)
        node = err.schema.get("properties", {}).get(missing, {})
        name = _name(path + [missing])
        return (f"{name} must be {node['description']}." if node.get("description")
                else f"{name} is missing.")
    name = _name(path)
    if failed == "minimum":
        return (f"{name} must not be negative." if value == 0
                else f"{name} must be at least {value}.")
    if failed == "maximum":
        return f"{name} must be at most {value}."
    if failed == "maxLength":
        return f"{name} is longer than {value} characters."
    if failed in ("type", "minLength"):
        scalar = not isinstance(err.instance, (dict, list))
        shown = f", not {quote(err.instance)}" if failed == "type" and scalar else ""
        return f"{name} must be {_must_be(err.schema)}{shown}."
    return f"{name}: {err.message}."


def _date(value: str, where: str) -> dt.datetime:
    text = value.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise lease.MalformedLease(
            f"{where} is not a date and time: {quote(value)}; use ISO 8601, "
            "like 2030-01-01T12:00:00.")
    if when.tzinfo is not None:
        when = when.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return when


def _amount(raw: Mapping) -> int:
    # What Blazar actually holds for the lease, else what it asks for.
    if raw.get("allocations"):
        return len(raw["allocations"])
    asked = [raw[k] for k in _COUNT_FIELDS if raw.get(k) is not None]
    return asked[0] if asked else 1


def _text(value) -> Optional[str]:
    return None if value is None else str(value)


def _ranges_hold(raw: Mapping, where: str) -> None:
    """A reservation's min may not exceed its max: no host count meets
    both, and Blazar's own host reservation refuses it."""
    for i, r in enumerate(raw.get("reservations", [])):
        low, high = r.get("min"), r.get("max")
        if isinstance(low, int) and isinstance(high, int) and low > high:
            raise lease.MalformedLease(
                f"{where}.reservations[{i}].min ({low}) is greater than its "
                f"max ({high}).")


def _lease(raw: Mapping, where: str) -> lease.Lease:
    _ranges_hold(raw, where)
    return lease.check_lease(lease.Lease(
        id=_text(raw.get("id")), name=_text(raw.get("name")),
        start=_date(raw["start_date"], f"{where}.start_date"),
        end=_date(raw["end_date"], f"{where}.end_date"),
        reservations=[lease.Reservation(r["resource_type"], _amount(r))
                      for r in raw.get("reservations", [])]), where)


def lease_request(event: str, body: Any) -> lease.LeaseRequest:
    """Blazar's body for one question (create, update, end), validated by
    its schema, as the domain's LeaseRequest."""
    _counts_as_numbers(body)
    found = jsonschema.exceptions.best_match(_VALIDATORS[event].iter_errors(body))
    if found is not None:
        raise lease.MalformedLease(_words(found))
    context = body["context"]
    project_id = context.get("project_id") or body["lease"]["project_id"]
    current = (_lease(body["current_lease"], "current_lease")
               if event == "update" else None)
    new = _lease(body["lease"], "lease")
    if current is not None and new.id is None:
        new.id = current.id
    return lease.LeaseRequest(event, project_id, _text(context.get("user_id")),
                              new, current)


# Resources ---------------------------------------------------------------------

class LeaseEndpoint:
    event = ""
    policies = {"POST": CHECK}

    def __init__(self, services):
        self.db = services.db
        self.token = services.settings.lease_token
        if self.token:
            # The static token replaces an identity: checked in on_post.
            self.public_methods = frozenset({"POST"})
        self.policy = lease.LeasePolicy(services.settings, services.enforcer)

    def _authenticate(self, req):
        if not self.token:
            return  # the auth middleware and policy already ran
        sent = req.get_header("X-Auth-Token") or ""
        if not hmac.compare_digest(sent.encode(), self.token.encode()):
            raise errors.ApiError(
                falcon.HTTP_401, "This endpoint needs the lease-policy token "
                "(Blazar's [enforcement] external_service_token) in "
                "X-Auth-Token.")

    def on_post(self, req, resp):
        self._authenticate(req)
        parsed = lease_request(self.event, request.json_body(req))
        try:
            self.db.run_write(lambda conn: self.policy.run(conn, parsed))
        except lease.LeaseDenied as denied:
            resp.status = falcon.HTTP_403
            resp.content_type = falcon.MEDIA_JSON
            resp.text = json.dumps({"message": denied.detail})
            return
        render.no_content(resp)


class CheckCreate(LeaseEndpoint):
    event = "create"


class CheckUpdate(LeaseEndpoint):
    event = "update"


class OnEnd(LeaseEndpoint):
    event = "end"


def ledger_body(project_id: str, entries: list[lease.LedgerEntry]) -> dict:
    return {
        "project_id": project_id,
        "entries": [{"id": e.id, "resource_name": e.resource_name,
                     "lease_id": e.lease_id, "lease_name": e.lease_name,
                     "event": e.event, "hours": round(e.hours, 6),
                     "reason": e.reason,
                     "created_at": e.created_at.isoformat() if e.created_at
                     else None}
                    for e in entries],
        "balance": {name: round(hours, 6)
                    for name, hours in sorted(lease.balance(entries).items())},
    }


class LeaseLedger:
    policies = {"GET": LEDGER}

    def __init__(self, services):
        self.db = services.db

    def on_get(self, req, resp):
        query = request.query(req, schema.LEDGER_QUERY)
        with self.db.read() as conn:
            entries = lease.ledger(conn, query["project_id"])
        render.send(resp, ledger_body(query["project_id"], entries))
