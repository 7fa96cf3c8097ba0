"""The allocation-candidates query language, parsed into request groups.

Input is the query string as a mapping of name -> list of values (every
value a parameter was given, in order) and a Dialect: which forms of the
language the caller may use (the api decides that from the microversion;
this module knows no versions). Output is a CandidateRequest: the request
groups by suffix ('' for the unnumbered group) plus the request-wide
parameters.
Each group's terms are parsed by candidates/terms.py; this module finds the
groups, reads the request-wide parameters and enforces the rules between
groups. Malformed input raises an errors.QueryError (a 400).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping, Optional, Sequence

from placement_lite import errors
from placement_lite.candidates.terms import (
    GROUP_PREFIXES, Dialect, GroupTerms, parse_required)

# The most request groups one request may name (the unnumbered group
# counts). Real requests use a few, a large VM a few dozen; every group
# costs a query and a level of the combination, so the cap bounds one
# request's work. Documented in docs/operations.md (Input limits).
MAX_REQUEST_GROUPS = 128

NUMBERED_SUFFIX = r"[1-9][0-9]*"
STRING_SUFFIX = r"[a-zA-Z0-9_-]{1,64}"


def group_key_pattern(string_suffixes: bool) -> re.Pattern:
    suffix = STRING_SUFFIX if string_suffixes else NUMBERED_SUFFIX
    return re.compile(r"^(%s)(%s)?$" % ("|".join(GROUP_PREFIXES), suffix))


_KEY_NUMBERED = group_key_pattern(False)
_KEY_STRING = group_key_pattern(True)


@dataclass
class RequestGroup(GroupTerms):
    """One group: resources, traits and aggregates for a provider (numbered)
    or for a tree plus its sharing providers (unnumbered, suffix '')."""
    suffix: str = ""

    @property
    def use_same_provider(self) -> bool:
        return bool(self.suffix)


@dataclass
class CandidateRequest:
    groups: dict  # suffix -> RequestGroup, unnumbered first when present
    limit: Optional[int] = None
    group_policy: Optional[str] = None
    root_required: set = field(default_factory=set)
    root_forbidden: set = field(default_factory=set)
    same_subtrees: list = field(default_factory=list)
    nested_aware: bool = True

    def trait_names(self) -> set:
        names = set(self.root_required) | set(self.root_forbidden)
        for group in self.groups.values():
            names |= group.trait_names()
        return names

    def resource_class_names(self) -> set:
        names = set()
        for group in self.groups.values():
            names |= set(group.resources)
        return names

    def aggregate_uuids(self) -> set:
        uuids = set()
        for group in self.groups.values():
            uuids |= group.aggregate_uuids()
        return uuids


def root_trait_dialect(dialect: Dialect) -> Dialect:
    """root_required takes the trait list of before any-of (no 'in:'), with
    '!', whatever else the caller may use, as in Placement."""
    return replace(dialect, forbidden_traits=True, any_traits=False)


def _single(params: Mapping[str, Sequence[str]], key: str) -> Optional[str]:
    values = params.get(key)
    if not values:
        return None
    if len(values) > 1:
        raise errors.DuplicateQueryKey(key)
    return values[0]


def _first(params: Mapping[str, Sequence[str]], key: str) -> Optional[str]:
    """limit and group_policy: Placement takes the first of repeated values
    (the schema has checked them all)."""
    values = params.get(key)
    return values[0] if values else None


def _check_conflicts(groups: Mapping[str, RequestGroup]) -> None:
    conflicts = []
    for suffix, group in groups.items():
        for any_of in group.required:
            if all(name in group.forbidden for name in any_of):
                conflicts.append(
                    f"required{suffix}: ({', '.join(sorted(any_of))})")
    if conflicts:
        raise errors.InvalidQuery(
            "Conflicting required and forbidden traits found in the "
            f"following traits keys: {', '.join(sorted(conflicts))}")


def parse_groups(params: Mapping[str, Sequence[str]],
                 dialect: Dialect) -> dict:
    """The request groups, keyed by suffix; no cross-group checks."""
    pattern = _KEY_STRING if dialect.string_suffixes else _KEY_NUMBERED
    suffixes = set()
    for key in params:
        match = pattern.match(key)
        if match and (dialect.granular or not match.group(2)):
            suffixes.add(match.group(2) or "")
    if len(suffixes) > MAX_REQUEST_GROUPS:
        raise errors.QueryBadValue(
            f"Invalid query string parameters: at most {MAX_REQUEST_GROUPS} "
            f"request groups are allowed in one request; got {len(suffixes)}.")
    groups: dict[str, RequestGroup] = {}
    for key in params:
        match = pattern.match(key)
        if not match:
            continue
        prefix, suffix = match.group(1), match.group(2) or ""
        if suffix and not dialect.granular:
            continue
        group = groups.setdefault(suffix, RequestGroup(suffix=suffix))
        group.read(prefix, key, params[key], dialect)
    if "" in groups:
        groups = {"": groups[""], **{k: g for k, g in groups.items() if k}}
    return groups


def _check_orphans(groups: Mapping[str, RequestGroup]) -> None:
    orphans = [f"required{s}" for s, g in groups.items()
               if g.required and not g.resources]
    if orphans:
        raise errors.InvalidQuery(
            "All traits parameters must be associated with resources. "
            "Found the following orphaned traits keys: "
            + ", ".join(orphans))
    orphans = [f"member_of{s}" for s, g in groups.items()
               if not g.resources and (g.member_of or g.forbidden_aggs)]
    if orphans:
        raise errors.InvalidQuery(
            "All member_of parameters must be associated with "
            "resources. Found the following orphaned member_of keys: "
            + ", ".join(orphans))
    if not all(g.resources for g in groups.values()):
        raise errors.InvalidQuery("All request groups must specify resources.")
    if not groups:
        raise errors.InvalidQuery(
            "At least one request group (`resources` or "
            "`resources{$S}`) is required.")


def _check_resourceless(groups: Mapping[str, RequestGroup],
                        same_subtrees: Iterable[set]) -> None:
    resourceless = [s for s, g in groups.items() if not g.resources]
    if len(resourceless) == len(groups):
        raise errors.QueryMissingValue(
            "There must be at least one resources or resources[$S] "
            "parameter.")
    in_subtrees = set().union(*same_subtrees) if same_subtrees else set()
    bad = [s for s in resourceless if s not in in_subtrees]
    if bad:
        raise errors.QueryBadValue(
            "Resourceless suffixed group request should be specified "
            f"in `same_subtree` query param: bad group(s) - {bad}.")
    unknown = sorted(s for s in in_subtrees if s not in groups)
    if unknown:
        raise errors.QueryBadValue(
            "Real suffixes should be specified in `same_subtree`: "
            f"{unknown} not found in {list(groups)}.")


def parse_candidate_request(params: Mapping[str, Sequence[str]],
                            dialect: Dialect) -> CandidateRequest:
    """GET /allocation_candidates' query string -> CandidateRequest.

    The api layer has already refused parameters the caller may not use
    (by jsonschema); this enforces the rules a schema cannot say.
    """
    groups = parse_groups(params, dialect)

    limit = None
    if dialect.limit and params.get("limit"):
        limit = int(_first(params, "limit"))

    root_required: set = set()
    root_forbidden: set = set()
    if dialect.root_required and params.get("root_required"):
        value = _single(params, "root_required")
        listed, root_forbidden = parse_required(
            [value], "root_required", root_trait_dialect(dialect))
        root_required = {name for any_of in listed for name in any_of}
        conflicts = root_required & root_forbidden
        if conflicts:
            raise errors.QueryBadValue(
                "Conflicting required and forbidden traits found in "
                f"root_required: {', '.join(sorted(conflicts))}")

    same_subtrees: list = []
    if dialect.same_subtree:
        for value in params.get("same_subtree", []):
            suffixes = {s.strip() for s in value.split(",")}
            if "" in suffixes:
                raise errors.QueryBadValue(
                    "Empty string (unsuffixed group) can not be "
                    "specified in `same_subtree`.")
            same_subtrees.append(suffixes)
        _check_resourceless(groups, same_subtrees)
    else:
        _check_orphans(groups)
    if dialect.forbidden_traits:
        _check_conflicts(groups)

    group_policy = _first(params, "group_policy") if dialect.granular else None
    numbered = [s for s in groups if s]
    if not group_policy and len(numbered) > 1:
        raise errors.InvalidQuery(
            'The "group_policy" parameter is required when specifying '
            'more than one "resources{N}" parameter. Add '
            'group_policy=none to let groups share a provider, or '
            'group_policy=isolate to keep them on separate providers.')

    return CandidateRequest(
        groups=groups, limit=limit, group_policy=group_policy,
        root_required=root_required, root_forbidden=root_forbidden,
        same_subtrees=same_subtrees, nested_aware=dialect.nested)
