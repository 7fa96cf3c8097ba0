"""Query-string schemas for GET /allocation_candidates, by microversion.

Every value arrives as a list (a parameter may be repeated); the schema
says which names a microversion knows and the simple value forms. The
rules between parameters live in candidates/query.py.
"""
from __future__ import annotations

import copy

from placement_lite.api import versions as v
from placement_lite.api.microversion import VersionedTable
from placement_lite.candidates.query import NUMBERED_SUFFIX, STRING_SUFFIX

STRINGS = {"type": "array", "items": {"type": "string"}, "minItems": 1}


def _many(item: dict) -> dict:
    """A parameter that may repeat: every value is checked (Placement
    checks only the last); which one counts is the parser's business."""
    return {"type": "array", "items": item, "minItems": 1}


_BASE = {
    "type": "object",
    "properties": {"resources": STRINGS},
    "required": ["resources"],
    "additionalProperties": False,
}
_LIMIT = copy.deepcopy(_BASE)
_LIMIT["properties"]["limit"] = _many({"type": "string", "pattern": r"^[1-9][0-9]*$"})
_REQUIRED = copy.deepcopy(_LIMIT)
_REQUIRED["properties"]["required"] = STRINGS
_MEMBER_OF = copy.deepcopy(_REQUIRED)
_MEMBER_OF["properties"]["member_of"] = STRINGS


def _granular(suffix: str, in_tree: bool) -> dict:
    # One pattern per prefix, as Placement's: its error for an unknown key
    # lists them, and callers read them there.
    prefixes = ["resources", "required", "member_of"] + (
        ["in_tree"] if in_tree else [])
    return {rf"^{prefix}({suffix})?$": STRINGS for prefix in prefixes}


_GRANULAR = copy.deepcopy(_MEMBER_OF)
del _GRANULAR["required"]
del _GRANULAR["properties"]["resources"]
del _GRANULAR["properties"]["required"]
del _GRANULAR["properties"]["member_of"]
_GRANULAR["properties"]["group_policy"] = _many(
    {"type": "string", "enum": ["none", "isolate"]})
_GRANULAR["patternProperties"] = _granular(NUMBERED_SUFFIX, False)
_IN_TREE = copy.deepcopy(_GRANULAR)
_IN_TREE["patternProperties"] = _granular(NUMBERED_SUFFIX, True)
_STRING_SUFFIXES = copy.deepcopy(_IN_TREE)
_STRING_SUFFIXES["patternProperties"] = _granular(STRING_SUFFIX, True)
_ROOT_REQUIRED = copy.deepcopy(_STRING_SUFFIXES)
_ROOT_REQUIRED["properties"]["root_required"] = STRINGS
_SAME_SUBTREE = copy.deepcopy(_ROOT_REQUIRED)
_SAME_SUBTREE["properties"]["same_subtree"] = STRINGS

QUERY = VersionedTable([
    (v.ALLOCATION_CANDIDATES, _BASE), (v.CANDIDATE_LIMIT, _LIMIT),
    (v.CANDIDATE_REQUIRED, _REQUIRED), (v.CANDIDATE_MEMBER_OF, _MEMBER_OF),
    (v.GRANULAR, _GRANULAR), (v.CANDIDATE_IN_TREE, _IN_TREE),
    (v.STRING_SUFFIXES, _STRING_SUFFIXES), (v.ROOT_REQUIRED, _ROOT_REQUIRED),
    (v.SAME_SUBTREE, _SAME_SUBTREE)])

# GET /reservations/allocation_candidates: the language of its version,
# and the window, each instant given once (api/times.py reads them).
_INSTANT = {"type": "array", "minItems": 1, "maxItems": 1,
            "items": {"type": "string", "maxLength": 64}}
WINDOW_QUERY = copy.deepcopy(QUERY.at(v.WINDOW_CANDIDATES))
WINDOW_QUERY["properties"].update(start=_INSTANT, end=_INSTANT)
WINDOW_QUERY["required"] = sorted(set(WINDOW_QUERY.get("required", ())) | {"start", "end"})
