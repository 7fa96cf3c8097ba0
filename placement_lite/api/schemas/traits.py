"""Request schemas for /traits and /resource_providers/{uuid}/traits."""
from __future__ import annotations

TRAIT = {"type": "string", "minLength": 1, "maxLength": 255}
CUSTOM_TRAIT = {"type": "string", "pattern": "^CUSTOM_[A-Z0-9_]+$",
                "maxLength": 255}

# The name in PUT /traits/{name}.
PATH = {
    "type": "object",
    "properties": {"name": CUSTOM_TRAIT},
    "required": ["name"],
}

LIST_QUERY = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        # Case does not matter, as in Placement.
        "associated": {"type": "string",
                       "pattern": "^([Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee])$"},
    },
    "additionalProperties": False,
}

SET_FOR_PROVIDER = {
    "type": "object",
    "properties": {
        "traits": {"type": "array", "items": TRAIT},
        "resource_provider_generation": {"type": "integer"},
    },
    "required": ["traits", "resource_provider_generation"],
    "additionalProperties": False,
}
