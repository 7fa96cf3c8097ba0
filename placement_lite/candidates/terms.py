"""The terms of the allocation-candidates query language, one parameter at
a time: `resources`, `required`, `member_of` and `in_tree` (with or without
a group suffix), in the forms a Dialect allows.

A term's values parse into the fields of GroupTerms, shared by a request
group (candidates/query.py puts the groups of a request together and
checks the rules between them) and by GET /resource_providers' filters,
which are one group's terms without a suffix. Malformed values raise an
errors.QueryError (a 400) with the same message on both routes.
"""
from __future__ import annotations

import uuid as uuidlib
from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence

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


# The most distinct required traits (or 'in:' lists), aggregates (or
# lists) and resource classes one group may ask for. Each becomes a
# condition of the group's query, and SQLite refuses expressions nested
# 1000 deep; real requests use a handful. Repeats of the same term
# collapse first.
MAX_GROUP_TERMS = 64

GROUP_PREFIXES = ("resources", "required", "member_of", "in_tree")


@dataclass
class GroupTerms:
    """What one group (or the provider list) asks of a provider."""
    resources: dict = field(default_factory=dict)
    # AND of any-of sets: [{A}, {B, C}] means A and (B or C).
    required: list = field(default_factory=list)
    forbidden: set = field(default_factory=set)
    # AND of any-of sets of aggregate uuids.
    member_of: list = field(default_factory=list)
    forbidden_aggs: set = field(default_factory=set)
    in_tree: Optional[str] = None

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

    def read(self, prefix: str, key: str, values: Sequence[str],
             dialect: Dialect) -> None:
        """Parse the values of `key` (the term `prefix` plus any suffix)
        into this group's fields."""
        if prefix == "resources":
            # Placement reads every repeated value and keeps the last.
            for value in values:
                self.resources = parse_resources(value, key)
        elif prefix == "required":
            self.required, self.forbidden = parse_required(
                values, key, dialect)
        elif prefix == "member_of":
            self.member_of, self.forbidden_aggs = parse_member_of(
                values, key, dialect)
        else:
            for value in values:
                self.in_tree = parse_in_tree(value, key)


def is_uuid(value: str) -> bool:
    try:
        uuidlib.UUID(value)
    except (ValueError, AttributeError, TypeError):
        return False
    return True


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
        raise errors.QueryBadValue(
            f"Invalid query string parameters: at most {MAX_GROUP_TERMS} "
            f"distinct {what} are allowed in {key}; got {count}.")


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
        raise errors.InvalidQuery(badly % "empty string")
    result = {}
    for item in value.split(","):
        name, sep, amount = item.partition(":")
        name = name.strip()
        if not sep or not name or ":" in amount:
            raise errors.InvalidQuery(badly % item)
        try:
            number = int(amount)
        except ValueError:
            raise errors.InvalidQuery(
                f"Requested resource {name} expected positive integer "
                f"amount. Got: {amount}.{_where(key, 'resources')}")
        if number < 1:
            raise errors.InvalidQuery(
                f"Requested resource {name} requires amount >= 1. "
                f"Got: {number}.{_where(key, 'resources')}")
        if number > capacity.MAX_AMOUNT:
            # No inventory holds more; a larger number would also overflow
            # the database's integer comparison (a 500 on PostgreSQL).
            raise errors.InvalidQuery(
                f"Requested resource {name} amount {number} is more "
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
                raise errors.InvalidQuery(
                    "Invalid query string parameters: The format "
                    f"'{ANY_FORM}' only supported since microversion "
                    f"{dialect.refusal_hint('any_traits')}. Got: "
                    f"{value}{where}")
            names = {n.strip() for n in value[3:].split(",")}
            if not all(names):
                raise errors.InvalidQuery(
                    "Invalid query string parameters: Expected "
                    "'required' parameter value of the form: "
                    f"{ANY_FORM}. Got an empty trait in: {value}{where}")
            if any(n.startswith("!") for n in names):
                raise errors.InvalidQuery(
                    f"Invalid query string parameters: The format "
                    f"'{ANY_FORM}' does not support forbidden traits. "
                    f"Got: {value}{where}. List forbidden traits in a "
                    f"separate {key} parameter.")
            required.append(names)
            continue
        names = [n.strip() for n in value.split(",")]
        # Placement strips every leading '!' ('!!A' forbids A).
        banned = {n.lstrip("!") for n in names if n.startswith("!")}
        if not all(names) or not all(banned):
            raise errors.InvalidQuery(
                "Invalid query string parameters: Expected 'required' "
                f"parameter value of the form: {form}. Got an empty "
                f"trait in: {value}{where}")
        if banned and not dialect.forbidden_traits:
            raise errors.InvalidQuery(
                "Invalid query string parameters: Expected 'required' "
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
        raise errors.InvalidQuery(
            f"Multiple {key} parameters are not supported at this "
            f"microversion; use {dialect.refusal_hint('multi_member_of')}"
            " or later.")
    required: list = []
    forbidden: set = set()
    for value in values:
        negate = value.startswith("!")
        body = value[1:] if negate else value
        if "," in value and not body.startswith("in:"):
            raise errors.InvalidQuery(
                "Multiple values for 'member_of' must be prefixed with "
                "the 'in:' or '!in:' keyword using the valid "
                f"microversion. Got: {value}{_where(key, 'member_of')}")
        uuids = set(body[3:].split(",")) if body.startswith("in:") else {body}
        for agg in sorted(uuids):
            if not is_uuid(agg):
                raise errors.InvalidQuery(
                    "Invalid query string parameters: Expected "
                    "'member_of' parameter to contain valid UUID(s). "
                    f"Got: {agg}{_where(key, 'member_of')}")
        if negate and not dialect.forbidden_aggregates:
            raise errors.InvalidQuery(
                f"Forbidden {key} parameters are not supported in the "
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
        raise errors.InvalidQuery(
            "Invalid query string parameters: Expected 'in_tree' "
            f"parameter to be a format of uuid. Got: {value}"
            f"{_where(key, 'in_tree')}")
    return value.strip()


class ProviderListFilter(GroupTerms):
    """GET /resource_providers filters that share the candidates language."""


def parse_provider_filters(params: Mapping[str, Sequence[str]],
                           dialect: Dialect) -> ProviderListFilter:
    """resources / required / member_of / in_tree of a provider list.

    Which of them the caller may send is the api schema's business; this
    applies the forms the dialect allows (forbidden `!`, `in:`, repeats).
    """
    flt = ProviderListFilter()
    for prefix in GROUP_PREFIXES:
        if params.get(prefix):
            flt.read(prefix, prefix, params[prefix], dialect)
        if prefix == "required":
            conflicts = [n for s in flt.required for n in s
                         if len(s) == 1 and n in flt.forbidden]
            if conflicts:
                raise errors.InvalidQuery(
                    "Conflicting required and forbidden traits found in the "
                    "following traits keys: required: "
                    f"({', '.join(sorted(conflicts))})")
    return flt
