"""The allocation-candidate query language, parsed into request groups.

Input is the query string as a mapping of name -> list of values (every
value a parameter was given, in order) and a Dialect: which forms of the
language the caller may use (the api decides that from the microversion;
this module knows no versions). Output is a CandidateRequest: the request
groups by suffix ('' for the unnumbered group) plus the request-wide
parameters.
Malformed input raises an errors.QueryError (a 400), with the same
messages whether the parameters came to GET /allocation_candidates or to
GET /resource_providers, which parse their filters here too.
"""
from __future__ import annotations

import re
import uuid as uuidlib
from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping, Optional, Sequence

from placement_lite import errors
from placement_lite.ledger import capacity

@dataclass(frozen=True)
class Dialect:
    """The forms of the query language a caller may use.

    Each flag allows one form; a form that is not allowed is either
    ignored (as Placement ignores it) or refused with a 400. `available_at`
    says, for a refused form, where the caller can get it; the refusal
    quotes it verbatim (Placement's messages name a microversion).
    """
    limit: bool = True
    granular: bool = True             # numbered groups and group_policy
    string_suffixes: bool = True      # resources_NAME, not only resources1
    forbidden_traits: bool = True     # required=!T
    any_traits: bool = True           # required=in:A,B; repeats all hold
    multi_member_of: bool = True      # member_of repeated
    forbidden_aggregates: bool = True  # member_of=!A
    root_required: bool = True
    same_subtree: bool = True         # and resourceless groups with it
    nested: bool = True               # candidates span provider trees
    available_at: Mapping[str, str] = field(default_factory=dict)

    def refusal_hint(self, form: str) -> str:
        return self.available_at.get(form, "")


# The most request groups one request may name (the unnumbered group
# counts). Real requests use a few, a large VM a few dozen; every group
# costs a query and a level of the combination, so the cap bounds one
# request's work. Documented in docs/operations.md (Input limits).
MAX_REQUEST_GROUPS = 128

# The most distinct required traits (or 'in:' lists), aggregates (or
# lists) and resource classes one group may ask for. Each becomes a
# condition of the group's query, and SQLite refuses expressions nested
# 1000 deep; real requests use a handful. Repeats of the same term
# collapse first.
MAX_GROUP_TERMS = 64

NUMBERED_SUFFIX = r"[1-9][0-9]*"
STRING_SUFFIX = r"[a-zA-Z0-9_-]{1,64}"
GROUP_PREFIXES = ("resources", "required", "member_of", "in_tree")


def group_key_pattern(string_suffixes: bool) -> re.Pattern:
    suffix = STRING_SUFFIX if string_suffixes else NUMBERED_SUFFIX
    return re.compile(r"^(%s)(%s)?$" % ("|".join(GROUP_PREFIXES), suffix))


_KEY_NUMBERED = group_key_pattern(False)
_KEY_STRING = group_key_pattern(True)


@dataclass
class RequestGroup:
    """One group: resources, traits and aggregates for a provider (numbered)
    or for a tree plus its sharing providers (unnumbered, suffix '')."""
    suffix: str = ""
    resources: dict = field(default_factory=dict)
    # AND of any-of sets: [{A}, {B, C}] means A and (B or C).
    required: list = field(default_factory=list)
    forbidden: set = field(default_factory=set)
    # AND of any-of sets of aggregate uuids.
    member_of: list = field(default_factory=list)
    forbidden_aggs: set = field(default_factory=set)
    in_tree: Optional[str] = None

    @property
    def use_same_provider(self) -> bool:
        return bool(self.suffix)

    def trait_names(self) -> set:
        names = set(self.forbidden)
        for any_of in self.required:
            names |= any_of
        return names

    def aggregate_uuids(self) -> set:
        uuids = set(self.forbidden_aggs)
        for any_of in self.member_of:
            uuids |= any_of
        return uuids


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


def _bad(detail: str, kind: type = errors.InvalidQuery) -> errors.QueryError:
    """A malformed query (400). Placement gives only some of these a code
    of their own; `kind` names the condition for those."""
    return kind(detail)


def is_uuid(value: str) -> bool:
    try:
        uuidlib.UUID(value)
    except (ValueError, AttributeError, TypeError):
        return False
    return True



def root_trait_dialect(dialect: Dialect) -> Dialect:
    """root_required takes the trait list of before any-of (no 'in:'), with
    '!', whatever else the caller may use, as in Placement."""
    return replace(dialect, forbidden_traits=True, any_traits=False)


def _distinct(any_of_sets: list, key: str, what: str) -> list:
    """The any-of sets without repeats, in order; at most MAX_GROUP_TERMS."""
    seen: set = set()
    out = []
    for names in any_of_sets:
        frozen = frozenset(names)
        if frozen not in seen:
            seen.add(frozen)
            out.append(names)
    _check_terms(len(out), key, what)
    return out


def _check_terms(count: int, key: str, what: str) -> None:
    if count > MAX_GROUP_TERMS:
        raise _bad(f"Invalid query string parameters: at most "
                   f"{MAX_GROUP_TERMS} distinct {what} are allowed in "
                   f"{key}; got {count}.", errors.QueryBadValue)


def _where(key: str, base: str) -> str:
    """Placement's messages name the unsuffixed parameter; ours go on to
    name the suffixed one the caller actually sent."""
    return "" if key == base else f" (in parameter {key})"


def parse_resources(value: str, key: str = "resources") -> dict:
    """'VCPU:2,MEMORY_MB:1024' -> {'VCPU': 2, 'MEMORY_MB': 1024}."""
    badly = ("Badly formed resources parameter. Expected resources query "
             "string parameter in form: ?resources=VCPU:2,MEMORY_MB:1024. "
             "Got: %s." + _where(key, "resources"))
    if value.strip() == "":
        raise _bad(badly % "empty string")
    result = {}
    for item in value.split(","):
        name, sep, amount = item.partition(":")
        name = name.strip()
        if not sep or not name or ":" in amount:
            raise _bad(badly % item)
        try:
            number = int(amount)
        except ValueError:
            raise _bad(f"Requested resource {name} expected positive integer "
                       f"amount. Got: {amount}.{_where(key, 'resources')}")
        if number < 1:
            raise _bad(f"Requested resource {name} requires amount >= 1. "
                       f"Got: {number}.{_where(key, 'resources')}")
        if number > capacity.MAX_AMOUNT:
            # No inventory holds more; a larger number would also overflow
            # the database's integer comparison (a 500 on PostgreSQL).
            raise _bad(f"Requested resource {name} amount {number} is more "
                       f"than any inventory can hold ({capacity.MAX_AMOUNT}).")
        result[name] = number
    _check_terms(len(result), key, "resource classes")
    return result


ANY_FORM = "in:HW_CPU_X86_VMX,CUSTOM_MAGIC"


def parse_required(values: Sequence[str], key: str, dialect: Dialect):
    """Values of one `required$S` key -> (list of any-of sets, forbidden set).

    Without any_traits only the last value counts (as Placement did before
    it); with it every value is ANDed and `in:A,B` asks for any of A, B.
    """
    if not dialect.any_traits:
        values = list(values)[-1:]
    required: list = []
    forbidden: set = set()
    where = _where(key, "required")
    form = "HW_CPU_X86_VMX,!CUSTOM_MAGIC" if dialect.forbidden_traits \
        else "HW_CPU_X86_VMX,CUSTOM_MAGIC"
    for value in values:
        if value.startswith("in:"):
            if not dialect.any_traits:
                raise _bad("Invalid query string parameters: The format "
                           f"'{ANY_FORM}' only supported since microversion "
                           f"{dialect.refusal_hint('any_traits')}. Got: "
                           f"{value}{where}")
            names = {n.strip() for n in value[3:].split(",")}
            if not all(names):
                raise _bad("Invalid query string parameters: Expected "
                           "'required' parameter value of the form: "
                           f"{ANY_FORM}. Got an empty trait in: {value}{where}")
            if any(n.startswith("!") for n in names):
                raise _bad(f"Invalid query string parameters: The format "
                           f"'{ANY_FORM}' does not support forbidden traits. "
                           f"Got: {value}{where}. List forbidden traits in a "
                           f"separate {key} parameter.")
            required.append(names)
            continue
        names = [n.strip() for n in value.split(",")]
        # Placement strips every leading '!' ('!!A' forbids A).
        banned = {n.lstrip("!") for n in names if n.startswith("!")}
        if not all(names) or not all(banned):
            raise _bad("Invalid query string parameters: Expected 'required' "
                       f"parameter value of the form: {form}. Got an empty "
                       f"trait in: {value}{where}")
        if banned and not dialect.forbidden_traits:
            raise _bad("Invalid query string parameters: Expected 'required' "
                       f"parameter value of the form: {form}. Got: {value}"
                       f"{where}. Forbidden traits ('!') need microversion "
                       f"{dialect.refusal_hint('forbidden_traits')} or later.")
        forbidden |= banned
        for name in sorted(set(names)):
            if not name.startswith("!"):
                required.append({name})
    return _distinct(required, key, "required traits (or 'in:' lists)"), forbidden


def parse_member_of(values: Sequence[str], key: str, dialect: Dialect):
    """Values of one `member_of$S` key -> (list of any-of sets, forbidden set)."""
    if len(values) > 1 and not dialect.multi_member_of:
        raise _bad(f"Multiple {key} parameters are not supported at this "
                   f"microversion; use {dialect.refusal_hint('multi_member_of')}"
                   " or later.")
    required: list = []
    forbidden: set = set()
    for value in values:
        negate = value.startswith("!")
        body = value[1:] if negate else value
        if "," in value and not body.startswith("in:"):
            raise _bad("Multiple values for 'member_of' must be prefixed with "
                       "the 'in:' or '!in:' keyword using the valid "
                       f"microversion. Got: {value}{_where(key, 'member_of')}")
        uuids = set(body[3:].split(",")) if body.startswith("in:") else {body}
        for agg in sorted(uuids):
            if not is_uuid(agg):
                raise _bad("Invalid query string parameters: Expected "
                           "'member_of' parameter to contain valid UUID(s). "
                           f"Got: {agg}{_where(key, 'member_of')}")
        if negate and not dialect.forbidden_aggregates:
            raise _bad(f"Forbidden {key} parameters are not supported in the "
                       "specified microversion: '!' (not in an aggregate) "
                       "needs microversion "
                       f"{dialect.refusal_hint('forbidden_aggregates')} or later.")
        if negate:
            forbidden |= uuids
        else:
            required.append(uuids)
    return _distinct(required, key, "aggregates (or 'in:' lists)"), forbidden


def parse_in_tree(value: str, key: str = "in_tree") -> str:
    if not is_uuid(value.strip()):
        raise _bad("Invalid query string parameters: Expected 'in_tree' "
                   f"parameter to be a format of uuid. Got: {value}"
                   f"{_where(key, 'in_tree')}")
    return value.strip()


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
                conflicts.append(f"required{suffix}: ({', '.join(sorted(any_of))})")
    if conflicts:
        raise _bad("Conflicting required and forbidden traits found in the "
                   f"following traits keys: {', '.join(sorted(conflicts))}")


def parse_groups(params: Mapping[str, Sequence[str]], dialect: Dialect) -> dict:
    """The request groups, keyed by suffix; no cross-group checks."""
    pattern = _KEY_STRING if dialect.string_suffixes else _KEY_NUMBERED
    suffixes = set()
    for key in params:
        match = pattern.match(key)
        if match and (dialect.granular or not match.group(2)):
            suffixes.add(match.group(2) or "")
    if len(suffixes) > MAX_REQUEST_GROUPS:
        raise _bad(f"Invalid query string parameters: at most "
                   f"{MAX_REQUEST_GROUPS} request groups are allowed in one "
                   f"request; got {len(suffixes)}.", errors.QueryBadValue)
    groups: dict[str, RequestGroup] = {}
    for key in params:
        match = pattern.match(key)
        if not match:
            continue
        prefix, suffix = match.group(1), match.group(2) or ""
        if suffix and not dialect.granular:
            continue
        group = groups.setdefault(suffix, RequestGroup(suffix=suffix))
        values = params[key]
        if prefix == "resources":
            # Placement reads every repeated value and keeps the last.
            for value in values:
                group.resources = parse_resources(value, key)
        elif prefix == "required":
            group.required, group.forbidden = parse_required(values, key, dialect)
        elif prefix == "member_of":
            group.member_of, group.forbidden_aggs = parse_member_of(
                values, key, dialect)
        else:
            for value in values:
                group.in_tree = parse_in_tree(value, key)
    if "" in groups:
        groups = {"": groups[""], **{k: g for k, g in groups.items() if k}}
    return groups


def _check_orphans(groups: Mapping[str, RequestGroup]) -> None:
    orphans = [f"required{s}" for s, g in groups.items()
               if g.required and not g.resources]
    if orphans:
        raise _bad("All traits parameters must be associated with resources. "
                   "Found the following orphaned traits keys: "
                   + ", ".join(orphans))
    orphans = [f"member_of{s}" for s, g in groups.items()
               if not g.resources and (g.member_of or g.forbidden_aggs)]
    if orphans:
        raise _bad("All member_of parameters must be associated with "
                   "resources. Found the following orphaned member_of keys: "
                   + ", ".join(orphans))
    if not all(g.resources for g in groups.values()):
        raise _bad("All request groups must specify resources.")
    if not groups:
        raise _bad("At least one request group (`resources` or "
                   "`resources{$S}`) is required.")


def _check_resourceless(groups: Mapping[str, RequestGroup],
                        same_subtrees: Iterable[set]) -> None:
    resourceless = [s for s, g in groups.items() if not g.resources]
    if len(resourceless) == len(groups):
        raise _bad("There must be at least one resources or resources[$S] "
                   "parameter.", errors.QueryMissingValue)
    in_subtrees = set().union(*same_subtrees) if same_subtrees else set()
    bad = [s for s in resourceless if s not in in_subtrees]
    if bad:
        raise _bad("Resourceless suffixed group request should be specified "
                   f"in `same_subtree` query param: bad group(s) - {bad}.",
                   errors.QueryBadValue)
    unknown = sorted(s for s in in_subtrees if s not in groups)
    if unknown:
        raise _bad("Real suffixes should be specified in `same_subtree`: "
                   f"{unknown} not found in {list(groups)}.", errors.QueryBadValue)


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
            raise _bad("Conflicting required and forbidden traits found in "
                       f"root_required: {', '.join(sorted(conflicts))}",
                       errors.QueryBadValue)

    same_subtrees: list = []
    if dialect.same_subtree:
        for value in params.get("same_subtree", []):
            suffixes = {s.strip() for s in value.split(",")}
            if "" in suffixes:
                raise _bad("Empty string (unsuffixed group) can not be "
                           "specified in `same_subtree`.", errors.QueryBadValue)
            same_subtrees.append(suffixes)
        _check_resourceless(groups, same_subtrees)
    else:
        _check_orphans(groups)
    if dialect.forbidden_traits:
        _check_conflicts(groups)

    group_policy = _first(params, "group_policy") if dialect.granular else None
    numbered = [s for s in groups if s]
    if not group_policy and len(numbered) > 1:
        raise _bad('The "group_policy" parameter is required when specifying '
                   'more than one "resources{N}" parameter. Add '
                   'group_policy=none to let groups share a provider, or '
                   'group_policy=isolate to keep them on separate providers.')

    return CandidateRequest(
        groups=groups, limit=limit, group_policy=group_policy,
        root_required=root_required, root_forbidden=root_forbidden,
        same_subtrees=same_subtrees, nested_aware=dialect.nested)


@dataclass
class ProviderListFilter:
    """GET /resource_providers filters that share the candidates language."""
    resources: dict = field(default_factory=dict)
    required: list = field(default_factory=list)
    forbidden: set = field(default_factory=set)
    member_of: list = field(default_factory=list)
    forbidden_aggs: set = field(default_factory=set)
    in_tree: Optional[str] = None


def parse_provider_filters(params: Mapping[str, Sequence[str]],
                           dialect: Dialect) -> ProviderListFilter:
    """resources / required / member_of / in_tree of a provider list.

    Which of them the caller may send is the api schema's business; this
    applies the forms the dialect allows (forbidden `!`, `in:`, repeats).
    """
    flt = ProviderListFilter()
    # A repeated resources or in_tree: Placement keeps the last value.
    for value in params.get("resources") or ():
        flt.resources = parse_resources(value)
    if params.get("required"):
        flt.required, flt.forbidden = parse_required(
            params["required"], "required", dialect)
        conflicts = [n for s in flt.required for n in s
                     if len(s) == 1 and n in flt.forbidden]
        if conflicts:
            raise _bad("Conflicting required and forbidden traits found in "
                       f"the following traits keys: required: "
                       f"({', '.join(sorted(conflicts))})")
    if params.get("member_of"):
        flt.member_of, flt.forbidden_aggs = parse_member_of(
            params["member_of"], "member_of", dialect)
    for value in params.get("in_tree") or ():
        flt.in_tree = parse_in_tree(value)
    return flt
