"""GET /resource_providers filters that speak the candidates language:
member_of, resources, in_tree and required.

Each entry becomes a ProviderFilter of api/resources/resource_providers.py; the
parsing and the SQL are the ones GET /allocation_candidates uses
(candidates/terms.py and candidates/filters.py), so both answer the same
forms (`in:`, `!`, repeats) with the same 400s at the same microversions.
query_dialect() is where a microversion becomes the forms of that
language a caller may use, for both routes.
"""
from __future__ import annotations

from placement_lite.api import versions as v
from placement_lite.api.versions import Version
from placement_lite.candidates.filters import provider_filter_select
from placement_lite.candidates.terms import Dialect, parse_provider_filters

# Dialect flag -> the feature that allows it.
_DIALECT_FEATURES = {
    "limit": v.CANDIDATE_LIMIT,
    "granular": v.GRANULAR,
    "string_suffixes": v.STRING_SUFFIXES,
    "forbidden_traits": v.FORBIDDEN_TRAITS,
    "any_traits": v.ANY_TRAITS,
    "multi_member_of": v.MULTI_MEMBER_OF,
    "forbidden_aggregates": v.FORBIDDEN_AGGREGATES,
    "root_required": v.ROOT_REQUIRED,
    "same_subtree": v.SAME_SUBTREE,
    "nested": v.NESTED_CANDIDATES,
}
_AVAILABLE_AT = {flag: str(feature.since)
                 for flag, feature in _DIALECT_FEATURES.items()}
_DIALECTS: dict = {}


def query_dialect(version) -> Dialect:
    """The candidates-language forms a request at `version` may use."""
    version = Version(*version)
    found = _DIALECTS.get(version)
    if found is None:
        found = _DIALECTS[version] = Dialect(
            available_at=_AVAILABLE_AT,
            **{flag: version.has(feature)
               for flag, feature in _DIALECT_FEATURES.items()})
    return found

STRINGS = {"type": "array", "items": {"type": "string"}}


def _ids(name: str):
    def ids(conn, value, req):
        values = value if isinstance(value, list) else [value]
        flt = parse_provider_filters({name: values},
                                     query_dialect(req.context.microversion))
        return provider_filter_select(conn, flt)
    ids.__name__ = f"{name}_ids"
    return ids


FILTERS = [
    dict(name="member_of", since=v.PROVIDER_MEMBER_OF, schema=STRINGS,
         ids=_ids("member_of"), repeats=True),
    dict(name="resources", since=v.PROVIDER_RESOURCES, schema=STRINGS,
         ids=_ids("resources"), repeats=True),
    dict(name="in_tree", since=v.NESTED_PROVIDERS, schema=STRINGS,
         ids=_ids("in_tree"), repeats=True),
    dict(name="required", since=v.PROVIDER_REQUIRED, schema=STRINGS,
         ids=_ids("required"), repeats=True),
]
