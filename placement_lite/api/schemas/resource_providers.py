"""Request schemas for /resource_providers, by microversion."""
from __future__ import annotations

import copy

from placement_lite.api.microversion import VersionedTable
from placement_lite.api.versions import BASE, NESTED_PROVIDERS

# A uuid with or without its dashes, in either case, as Placement accepts;
# the uuid of a new provider is stored in the canonical dashed lower case.
UUID = {"type": "string",
        "pattern": "^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?"
                   "[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$"}
NAME = {"type": "string", "maxLength": 200}
PARENT = {"anyOf": [UUID, {"type": "null"}]}

_CREATE_1_0 = {
    "type": "object",
    "properties": {"name": NAME, "uuid": UUID},
    "required": ["name"],
    "additionalProperties": False,
}
_CREATE_1_14 = copy.deepcopy(_CREATE_1_0)
_CREATE_1_14["properties"]["parent_provider_uuid"] = PARENT

CREATE = VersionedTable([(BASE, _CREATE_1_0), (NESTED_PROVIDERS, _CREATE_1_14)])

_UPDATE_1_0 = {
    "type": "object",
    "properties": {"name": NAME},
    "required": ["name"],
    "additionalProperties": False,
}
_UPDATE_1_14 = copy.deepcopy(_UPDATE_1_0)
_UPDATE_1_14["properties"]["parent_provider_uuid"] = PARENT

UPDATE = VersionedTable([(BASE, _UPDATE_1_0), (NESTED_PROVIDERS, _UPDATE_1_14)])

# The list filters every microversion accepts; filters that arrive at later
# microversions (member_of, resources, in_tree, required) register their
# own parameter schema with the list resource (see PROVIDER_FILTERS in
# api/resource_providers.py).
LIST_BASE = {"name": {"type": "string"}, "uuid": UUID}


def list_query(extra: dict) -> dict:
    """The list query schema: the base filters plus `extra` ones."""
    props = dict(LIST_BASE)
    props.update(extra)
    return {"type": "object", "properties": props,
            "additionalProperties": False}
