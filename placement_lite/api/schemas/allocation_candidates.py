"""Query-string schemas for GET /allocation_candidates, by microversion.

Every value arrives as a list (a parameter may be repeated); the schema
says which names a microversion knows and the simple value forms. The
rules between parameters live in candidates/request.py.
"""
from __future__ import annotations

import copy

from placement_lite.api.microversion import VersionedTable
from placement_lite.candidates.request import NUMBERED_SUFFIX, STRING_SUFFIX

STRINGS = {"type": "array", "items": {"type": "string"}, "minItems": 1}


def _many(item: dict) -> dict:
    """A parameter that may repeat: every value is checked (Placement
    checks only the last); which one counts is the parser's business."""
    return {"type": "array", "items": item, "minItems": 1}


_1_10 = {
    "type": "object",
    "properties": {"resources": STRINGS},
    "required": ["resources"],
    "additionalProperties": False,
}
_1_16 = copy.deepcopy(_1_10)
_1_16["properties"]["limit"] = _many({"type": "string", "pattern": r"^[1-9][0-9]*$"})
_1_17 = copy.deepcopy(_1_16)
_1_17["properties"]["required"] = STRINGS
_1_21 = copy.deepcopy(_1_17)
_1_21["properties"]["member_of"] = STRINGS


def _granular(suffix: str, in_tree: bool) -> dict:
    # One pattern per prefix, as Placement's: its error for an unknown key
    # lists them, and callers read them there.
    prefixes = ["resources", "required", "member_of"] + (
        ["in_tree"] if in_tree else [])
    return {rf"^{prefix}({suffix})?$": STRINGS for prefix in prefixes}


_1_25 = copy.deepcopy(_1_21)
del _1_25["required"]
del _1_25["properties"]["resources"]
del _1_25["properties"]["required"]
del _1_25["properties"]["member_of"]
_1_25["properties"]["group_policy"] = _many(
    {"type": "string", "enum": ["none", "isolate"]})
_1_25["patternProperties"] = _granular(NUMBERED_SUFFIX, False)
_1_31 = copy.deepcopy(_1_25)
_1_31["patternProperties"] = _granular(NUMBERED_SUFFIX, True)
_1_33 = copy.deepcopy(_1_31)
_1_33["patternProperties"] = _granular(STRING_SUFFIX, True)
_1_35 = copy.deepcopy(_1_33)
_1_35["properties"]["root_required"] = STRINGS
_1_36 = copy.deepcopy(_1_35)
_1_36["properties"]["same_subtree"] = STRINGS

QUERY = VersionedTable([("1.10", _1_10), ("1.16", _1_16), ("1.17", _1_17),
                        ("1.21", _1_21), ("1.25", _1_25), ("1.31", _1_31),
                        ("1.33", _1_33), ("1.35", _1_35), ("1.36", _1_36)])
