"""GET /resource_providers filters that speak the candidates language:
member_of (1.3), resources (1.4), in_tree (1.14) and required (1.18).

Each entry becomes a ProviderFilter of api/resource_providers.py; the
parsing and the SQL are the ones GET /allocation_candidates uses
(candidates/request.py and candidates/filters.py), so both answer the same
forms (`in:`, `!`, repeats) with the same 400s at the same microversions.
"""
from __future__ import annotations

from placement_lite.candidates.filters import provider_filter_select
from placement_lite.candidates.request import parse_provider_filters

STRINGS = {"type": "array", "items": {"type": "string"}}


def _ids(name: str):
    def ids(conn, value, req):
        values = value if isinstance(value, list) else [value]
        flt = parse_provider_filters({name: values}, tuple(req.context.microversion))
        return provider_filter_select(conn, flt)
    ids.__name__ = f"{name}_ids"
    return ids


FILTERS = [
    dict(name="member_of", since="1.3", schema=STRINGS, ids=_ids("member_of"),
         repeats=True),
    dict(name="resources", since="1.4", schema=STRINGS, ids=_ids("resources"),
         repeats=True),
    dict(name="in_tree", since="1.14", schema=STRINGS, ids=_ids("in_tree"),
         repeats=True),
    dict(name="required", since="1.18", schema=STRINGS, ids=_ids("required"),
         repeats=True),
]
