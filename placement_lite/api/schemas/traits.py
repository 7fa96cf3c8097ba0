"""Request schemas for /traits and /resource_providers/{uuid}/traits."""
from __future__ import annotations

import re

TRAIT = {"type": "string", "minLength": 1, "maxLength": 255}
CUSTOM_TRAIT = {"type": "string", "pattern": "^CUSTOM_[A-Z0-9_]+$",
                "maxLength": 255}

_CUSTOM_TRAIT_RE = re.compile(CUSTOM_TRAIT["pattern"])


def valid_custom_trait(name: str) -> bool:
    """The name in PUT /traits/{name} (checked by hand: Placement answers
    one fixed message whatever is wrong with it)."""
    return (len(name) <= CUSTOM_TRAIT["maxLength"]
            and _CUSTOM_TRAIT_RE.match(name) is not None)

LIST_QUERY = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        # true/false in any case; checked by the handler, as in Placement.
        "associated": {"type": "string"},
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
