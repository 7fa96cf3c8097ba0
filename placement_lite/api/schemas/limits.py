"""Request schemas for /v3 (unified limits, projects, the small catalog),
POST /quota/check and the /v1 lease-policy endpoints.

Field names, ranges and envelopes follow Keystone's identity v3 API:
limits are integers from -1 (unlimited) to 2147483647; resource names
are 1 to 255 characters.
"""
from __future__ import annotations

from placement_lite.ledger.capacity import MAX_AMOUNT

LIMIT_VALUE = {"type": "integer", "minimum": -1, "maximum": MAX_AMOUNT}
ID = {"type": "string", "minLength": 1, "maxLength": 64}
NULLABLE_ID = {"type": ["string", "null"], "minLength": 1, "maxLength": 255}
RESOURCE_NAME = {"type": "string", "minLength": 1, "maxLength": 255,
                 "pattern": r"^\S(.*\S)?$"}
# Stored as TEXT: 65535 bytes on MariaDB, and a character may take four.
DESCRIPTION = {"type": ["string", "null"], "maxLength": 16000}
BOOL = {"type": "boolean"}

_REGISTERED_PROPS = {
    "service_id": ID,
    "region_id": NULLABLE_ID,
    "resource_name": RESOURCE_NAME,
    "default_limit": LIMIT_VALUE,
    "description": DESCRIPTION,
}

REGISTERED_LIMITS_CREATE = {
    "type": "object",
    "properties": {"registered_limits": {
        "type": "array", "minItems": 1,
        "items": {"type": "object", "properties": _REGISTERED_PROPS,
                  "required": ["service_id", "resource_name", "default_limit"],
                  "additionalProperties": False}}},
    "required": ["registered_limits"],
    "additionalProperties": False,
}

REGISTERED_LIMIT_UPDATE = {
    "type": "object",
    "properties": {"registered_limit": {
        "type": "object", "properties": _REGISTERED_PROPS, "minProperties": 1,
        "additionalProperties": False}},
    "required": ["registered_limit"],
    "additionalProperties": False,
}

_LIMIT_PROPS = {
    "project_id": ID,
    "domain_id": ID,
    "service_id": ID,
    "region_id": NULLABLE_ID,
    "resource_name": RESOURCE_NAME,
    "resource_limit": LIMIT_VALUE,
    "description": DESCRIPTION,
}

LIMITS_CREATE = {
    "type": "object",
    "properties": {"limits": {
        "type": "array", "minItems": 1,
        "items": {"type": "object", "properties": _LIMIT_PROPS,
                  "required": ["service_id", "resource_name", "resource_limit"],
                  # Exactly one owner: a project or a domain.
                  "oneOf": [{"required": ["project_id"]},
                            {"required": ["domain_id"]}],
                  "additionalProperties": False}}},
    "required": ["limits"],
    "additionalProperties": False,
}

LIMIT_UPDATE = {
    "type": "object",
    "properties": {"limit": {
        "type": "object",
        "properties": {"resource_limit": LIMIT_VALUE, "description": DESCRIPTION},
        "minProperties": 1, "additionalProperties": False}},
    "required": ["limit"],
    "additionalProperties": False,
}

REGISTERED_LIMITS_QUERY = {
    "type": "object",
    "properties": {"service_id": {"type": "string"},
                   "region_id": {"type": "string"},
                   "resource_name": {"type": "string"}},
    "additionalProperties": False,
}

LIMITS_QUERY = {
    "type": "object",
    "properties": {"service_id": {"type": "string"},
                   "region_id": {"type": "string"},
                   "resource_name": {"type": "string"},
                   "project_id": {"type": "string"},
                   "domain_id": {"type": "string"}},
    "additionalProperties": False,
}

PROJECT_CREATE = {
    "type": "object",
    "properties": {"project": {
        "type": "object",
        "properties": {
            # Not in Keystone: the registry must use the ids that consumers
            # already carry, so the caller may choose it.
            "id": {"type": "string", "minLength": 1, "maxLength": 255,
                   "pattern": r"^[^/\s]+$"},
            "name": {"type": "string", "minLength": 1, "maxLength": 64},
            "description": DESCRIPTION,
            "parent_id": {"type": ["string", "null"], "minLength": 1},
            "domain_id": {"type": ["string", "null"], "minLength": 1},
            "is_domain": BOOL,
            "enabled": BOOL,
            "tags": {"type": "array", "maxItems": 0},
        },
        "required": ["name"],
        "additionalProperties": False}},
    "required": ["project"],
    "additionalProperties": False,
}

PROJECT_UPDATE = {
    "type": "object",
    "properties": {"project": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 64},
            "description": DESCRIPTION,
            "enabled": BOOL,
        },
        "minProperties": 1,
        "additionalProperties": False}},
    "required": ["project"],
    "additionalProperties": False,
}

PROJECTS_QUERY = {
    "type": "object",
    "properties": {"name": {"type": "string"},
                   "parent_id": {"type": "string"},
                   "domain_id": {"type": "string"},
                   "is_domain": {"type": "string", "enum": ["true", "false"]},
                   "enabled": {"type": "string", "enum": ["true", "false"]}},
    "additionalProperties": False,
}

SERVICE_CREATE = {
    "type": "object",
    "properties": {"service": {
        "type": "object",
        "properties": {"id": ID,
                       "type": {"type": "string", "minLength": 1, "maxLength": 255},
                       "name": {"type": "string", "maxLength": 255},
                       "description": DESCRIPTION, "enabled": BOOL},
        "required": ["type"],
        "additionalProperties": False}},
    "required": ["service"],
    "additionalProperties": False,
}

REGION_CREATE = {
    "type": "object",
    "properties": {"region": {
        "type": "object",
        "properties": {"id": {"type": "string", "minLength": 1, "maxLength": 255,
                              "pattern": r"^[^/\s]+$"},
                       "description": DESCRIPTION,
                       "parent_region_id": {"type": ["string", "null"]}},
        "additionalProperties": False}},
    "required": ["region"],
    "additionalProperties": False,
}

_ENDPOINT_PROPS = {
    "id": ID,
    "service_id": ID,
    "region_id": {"type": ["string", "null"]},
    # Keystone's older spelling of region_id.
    "region": {"type": ["string", "null"]},
    "interface": {"type": "string", "enum": ["public", "internal", "admin"]},
    "url": {"type": "string", "minLength": 1, "maxLength": 1024,
            "pattern": "^[a-zA-Z0-9+.-]+://"},
    "enabled": BOOL,
}

ENDPOINT_CREATE = {
    "type": "object",
    "properties": {"endpoint": {
        "type": "object", "properties": _ENDPOINT_PROPS,
        "required": ["service_id", "interface", "url"],
        "additionalProperties": False}},
    "required": ["endpoint"],
    "additionalProperties": False,
}

ENDPOINT_UPDATE = {
    "type": "object",
    "properties": {"endpoint": {
        "type": "object",
        "properties": {k: v for k, v in _ENDPOINT_PROPS.items() if k != "id"},
        "minProperties": 1, "additionalProperties": False}},
    "required": ["endpoint"],
    "additionalProperties": False,
}

ENDPOINTS_QUERY = {
    "type": "object",
    "properties": {"service_id": {"type": "string"},
                   "interface": {"type": "string"},
                   "region_id": {"type": "string"}},
    "additionalProperties": False,
}

SERVICES_QUERY = {
    "type": "object",
    "properties": {"type": {"type": "string"}, "name": {"type": "string"}},
    "additionalProperties": False,
}

QUOTA_CHECK = {
    "type": "object",
    "properties": {
        "project_id": {"type": "string", "minLength": 1, "maxLength": 255},
        "deltas": {
            "type": "object", "minProperties": 1,
            "propertyNames": {"minLength": 1, "maxLength": 255},
            "additionalProperties": {"type": "integer", "minimum": 0,
                                     "maximum": MAX_AMOUNT}},
    },
    "required": ["project_id", "deltas"],
    "additionalProperties": False,
}
