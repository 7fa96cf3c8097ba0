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

RESERVATION = {
    "type": "object",
    "properties": {
        # Stored in the ledger's 255-character column.
        "resource_type": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT},
        # What Blazar holds for the lease; when empty, what it asks for.
        "allocations": {"type": ["array", "null"]},
        "amount": COUNT,
        "max": COUNT,
        "min": COUNT,
    },
    "required": ["resource_type"],
}

LEASE = {
    "type": "object",
    "description": "an object describing the lease",
    "properties": {
        "id": TEXT,
        "name": TEXT,
        "project_id": PROJECT_ID,
        "start_date": DATE,
        "end_date": DATE,
        "reservations": {"type": "array", "items": RESERVATION},
    },
    "required": ["start_date", "end_date"],
}

CONTEXT = {
    "type": "object",
    "description": "an object with the project_id and user_id of the lease",
    "properties": {"project_id": PROJECT_ID},
}

CHECK_CREATE = {
    "type": "object",
    "description": "a JSON object with 'context' and 'lease'",
    "properties": {"context": CONTEXT, "lease": LEASE},
    "required": ["context", "lease"],
    # The project is the context's, else (older Blazar) the lease's own.
    "if": {"properties": {"lease": {"required": ["project_id"]}},
           "required": ["lease"]},
    "else": {"properties": {"context": {"required": ["project_id"]}}},
}

CHECK_UPDATE = {
    **CHECK_CREATE,
    "description": "a JSON object with 'context', 'current_lease' and 'lease'",
    "properties": {**CHECK_CREATE["properties"], "current_lease": LEASE},
    "required": ["context", "current_lease", "lease"],
}

ON_END = CHECK_CREATE

LEDGER_QUERY = {
    "type": "object",
    "properties": {"project_id": {"type": "string", "minLength": 1}},
    "required": ["project_id"],
    "additionalProperties": False,
}
