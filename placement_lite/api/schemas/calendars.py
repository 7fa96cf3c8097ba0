"""The query string of the reservation calendars: an optional period."""
from __future__ import annotations

# An instant in ISO 8601 (api/times.py reads it); the length bounds what
# an error quotes back.
INSTANT = {"type": "string", "minLength": 1, "maxLength": 64,
           "description": "an instant in ISO 8601 (UTC when no offset is given)"}

QUERY = {
    "type": "object",
    "properties": {"from": INSTANT, "to": INSTANT},
    "additionalProperties": False,
}
