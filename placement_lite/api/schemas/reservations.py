"""Request bodies and query strings of the reservation routes
(docs/reservations.md). They take no microversion: one document each.

Times are strings here; api/times.py reads them (ISO 8601, whole seconds)
and names the field when one is not a time.
"""
from __future__ import annotations

import copy

from placement_lite.api.schemas.allocations import EXTERNAL_ID, RESOURCES, UUID

TIME = {"type": "string", "minLength": 1, "maxLength": 64}

_ALLOCATIONS = {
    "type": "object",
    "minProperties": 1,
    "patternProperties": {
        UUID["pattern"]: {
            "type": "object",
            "properties": {"resources": RESOURCES},
            "required": ["resources"],
            "additionalProperties": False,
        }},
    "additionalProperties": False,
}

CREATE = {
    "type": "object",
    "properties": {
        "id": UUID,
        "project_id": EXTERNAL_ID,
        "user_id": EXTERNAL_ID,
        "start": TIME,
        "end": TIME,
        "allocations": _ALLOCATIONS,
    },
    "required": ["project_id", "user_id", "start", "end", "allocations"],
    "additionalProperties": False,
}

# The whole reservation again, with the generation last read. What a GET
# answered may be sent back as it is: the fields only an answer carries
# (status, short, links) are ignored, and the id must be this one's.
UPDATE = copy.deepcopy(CREATE)
UPDATE["properties"].update({
    "generation": {"type": "integer", "minimum": 0},
    "status": {"type": "string"},
    "short": {"type": "array"},
    "links": {"type": "array"},
})
UPDATE["required"] = ["generation", "start", "end", "allocations"]

LIST_QUERY = {
    "type": "object",
    "properties": {
        "project_id": EXTERNAL_ID,
        "user_id": EXTERNAL_ID,
        "resource_provider": UUID,
        "status": {"type": "string", "enum": ["pending", "active", "ended"]},
        "from": TIME,
        "to": TIME,
        "limit": {"type": "string", "pattern": "^[1-9][0-9]{0,8}$"},
        "marker": UUID,
    },
    "additionalProperties": False,
}
