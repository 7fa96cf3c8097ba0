"""Request schemas for /resource_classes."""
from __future__ import annotations

CUSTOM_NAME = {"type": "string", "pattern": "^CUSTOM_[A-Z0-9_]+$",
               "maxLength": 255}

# POST /resource_classes, and PUT /resource_classes/{name} before 1.7
# (where the body carries the new name).
NAMED = {
    "type": "object",
    "properties": {"name": CUSTOM_NAME},
    "required": ["name"],
    "additionalProperties": False,
}

# From 1.7 the name in the path is validated with the same rule.
PATH = NAMED
