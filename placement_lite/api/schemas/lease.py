"""Request schemas for the /v1 lease-policy endpoints Blazar calls, and
the lease ledger's query.

Blazar sends its own objects with many more fields than we read, so
unknown fields are allowed everywhere. A `description` says, in words a
caller understands, what a value must be: api/lease.py builds its errors
from them ("lease.start_date must be an ISO 8601 date and time, ...").
"""
from __future__ import annotations

from placement_lite.ledger.capacity import MAX_AMOUNT
from placement_lite.quota.lease import MAX_TEXT

# Host, instance and floating IP counts (Blazar also sends them as digit
# strings, which api/lease.py reads as the numbers they are first).
COUNT = {"type": "integer", "minimum": 0, "maximum": MAX_AMOUNT}
TEXT = {"type": ["string", "integer", "null"], "maxLength": MAX_TEXT}
DATE = {"type": "string", "minLength": 1,
        "description": "an ISO 8601 date and time, like 2030-01-01T12:00:00"}
PROJECT_ID = {"type": "string", "minLength": 1, "maxLength": MAX_TEXT}

# Blazar's digit strings: api/lease.py reads a count matching this as the
# number it spells before validating with the documents below.
COUNT_DIGITS = {"type": "string", "pattern": r"^\s*[0-9]+\s*$"}


def _documents(count: dict) -> tuple[dict, dict]:
    """The create (and end) and update bodies, with `count` for the host,
    instance and floating IP counts."""
    reservation = {
        "type": "object",
        "properties": {
            # Stored in the ledger's 255-character column.
            "resource_type": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT},
            # What Blazar holds for the lease; when empty, what it asks for.
            "allocations": {"type": ["array", "null"]},
            "amount": count,
            "max": count,
            "min": count,
        },
        "required": ["resource_type"],
    }
    lease = {
        "type": "object",
        "description": "an object describing the lease",
        "properties": {
            "id": TEXT,
            "name": TEXT,
            "project_id": PROJECT_ID,
            "start_date": DATE,
            "end_date": DATE,
            "reservations": {"type": "array", "items": reservation},
        },
        "required": ["start_date", "end_date"],
    }
    create = {
        "type": "object",
        "description": "a JSON object with 'context' and 'lease'",
        "properties": {"context": CONTEXT, "lease": lease},
        "required": ["context", "lease"],
        # The project is the context's, else (older Blazar) the lease's own.
        "if": {"properties": {"lease": {"required": ["project_id"]}},
               "required": ["lease"]},
        "else": {"properties": {"context": {"required": ["project_id"]}}},
    }
    update = {
        **create,
        "description": "a JSON object with 'context', 'current_lease' and 'lease'",
        "properties": {**create["properties"], "current_lease": lease},
        "required": ["context", "current_lease", "lease"],
    }
    return create, update


CONTEXT = {
    "type": "object",
    "description": "an object with the project_id and user_id of the lease",
    "properties": {"project_id": PROJECT_ID},
}

# What the service validates, once digit strings are read as numbers.
CHECK_CREATE, CHECK_UPDATE = _documents(COUNT)
ON_END = CHECK_CREATE

# What a caller may send, as /openapi.json describes it: a count is a
# number or its digits in a string.
SENT_CHECK_CREATE, SENT_CHECK_UPDATE = _documents({"anyOf": [COUNT, COUNT_DIGITS]})
SENT_ON_END = SENT_CHECK_CREATE

LEDGER_QUERY = {
    "type": "object",
    "properties": {"project_id": {"type": "string", "minLength": 1}},
    "required": ["project_id"],
    "additionalProperties": False,
}
