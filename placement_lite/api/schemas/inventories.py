"""Request schemas for /resource_providers/{uuid}/inventories."""
from __future__ import annotations

import copy

from placement_lite.ledger.capacity import MAX_AMOUNT

# The largest single-precision float: allocation_ratio is a FLOAT column.
FLOAT_MAX = 3.40282e+38
RC_NAME = "^[A-Z0-9_]+$"

_BASE = {
    "type": "object",
    "properties": {
        "resource_provider_generation": {"type": "integer"},
        "total": {"type": "integer", "minimum": 1, "maximum": MAX_AMOUNT},
        "reserved": {"type": "integer", "minimum": 0, "maximum": MAX_AMOUNT},
        "min_unit": {"type": "integer", "minimum": 1, "maximum": MAX_AMOUNT},
        "max_unit": {"type": "integer", "minimum": 1, "maximum": MAX_AMOUNT},
        "step_size": {"type": "integer", "minimum": 1, "maximum": MAX_AMOUNT},
        "allocation_ratio": {"type": "number", "maximum": FLOAT_MAX},
    },
    "required": ["total", "resource_provider_generation"],
    "additionalProperties": False,
}

# PUT /resource_providers/{uuid}/inventories/{resource_class}
UPDATE_ONE = _BASE

# POST /resource_providers/{uuid}/inventories
CREATE_ONE = copy.deepcopy(_BASE)
CREATE_ONE["properties"]["resource_class"] = {
    "type": "string", "pattern": RC_NAME, "maxLength": 255}
CREATE_ONE["required"] = ["total", "resource_class"]

_RECORD = copy.deepcopy(_BASE)
_RECORD["required"] = ["total"]

# PUT /resource_providers/{uuid}/inventories
REPLACE = {
    "type": "object",
    "properties": {
        "resource_provider_generation": {"type": "integer"},
        "inventories": {
            "type": "object",
            "patternProperties": {RC_NAME: _RECORD},
            "additionalProperties": False,
        },
    },
    "required": ["resource_provider_generation", "inventories"],
    "additionalProperties": False,
}
