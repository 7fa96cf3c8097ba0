"""Every microversion this service speaks, and the feature each one adds.

This is the only module that spells version numbers. Handlers, schemas
and renderers ask the requested version by feature name
(`req.context.microversion.has(GRANULAR)`); the domain layer below api/
never sees a version, only the parsed options the api derives from one.

Placement adds exactly one feature per microversion, so the history is a
list of features: VERSIONS[i] is the feature version 1.i added.
docs/microversions.md is generated from this list
(`python -m placement_lite.api.versions > docs/microversions.md`) and a
test keeps the two equal.
"""
from __future__ import annotations

from typing import NamedTuple


class Version(NamedTuple):
    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    @classmethod
    def parse(cls, text: str) -> "Version":
        """'X.Y' with whole numbers, read as Placement reads it: each part
        as an integer, so '1.05' is 1.5 and '1.2.3' is no version."""
        major, dot, minor = text.partition(".")
        try:
            if not dot:
                raise ValueError
            return cls(int(major), int(minor))
        except ValueError:
            shown = text if len(text) <= 40 else text[:40] + "…"
            raise ValueError(f"invalid version string: {shown}") from None

    def has(self, feature: "Feature") -> bool:
        """Whether a request at this version may use `feature`."""
        return self >= feature.since


class Feature(NamedTuple):
    name: str
    since: Version
    note: str

    def __str__(self) -> str:
        return self.name


VERSIONS: list[Feature] = []


def _added(version: str, name: str, note: str) -> Feature:
    feature = Feature(name, Version.parse(version), note)
    VERSIONS.append(feature)
    return feature


BASE = _added(
    "1.0", "BASE",
    "Resource providers, their inventories, usages and allocations; "
    "standard resource classes.")
AGGREGATES = _added(
    "1.1", "AGGREGATES",
    "GET/PUT /resource_providers/{uuid}/aggregates and the provider's "
    "aggregates link.")
RESOURCE_CLASSES = _added(
    "1.2", "RESOURCE_CLASSES",
    "/resource_classes: list, create, show, rename and delete CUSTOM_ classes.")
PROVIDER_MEMBER_OF = _added(
    "1.3", "PROVIDER_MEMBER_OF",
    "GET /resource_providers?member_of= (one aggregate, or in:A,B for any of).")
PROVIDER_RESOURCES = _added(
    "1.4", "PROVIDER_RESOURCES",
    "GET /resource_providers?resources= lists providers with that much "
    "free capacity.")
DELETE_ALL_INVENTORIES = _added(
    "1.5", "DELETE_ALL_INVENTORIES",
    "DELETE /resource_providers/{uuid}/inventories removes every inventory.")
TRAITS = _added(
    "1.6", "TRAITS",
    "/traits and /resource_providers/{uuid}/traits, and the provider's "
    "traits link.")
IDEMPOTENT_CLASS_PUT = _added(
    "1.7", "IDEMPOTENT_CLASS_PUT",
    "PUT /resource_classes/{name} creates the class if absent (no body), "
    "instead of renaming.")
ALLOCATION_OWNER = _added(
    "1.8", "ALLOCATION_OWNER",
    "PUT /allocations/{consumer} requires project_id and user_id.")
USAGES = _added(
    "1.9", "USAGES",
    "GET /usages?project_id=[&user_id=]: a project's (or user's) totals "
    "by class.")
ALLOCATION_CANDIDATES = _added(
    "1.10", "ALLOCATION_CANDIDATES",
    "GET /allocation_candidates?resources=: allocation requests and "
    "provider summaries.")
ALLOCATIONS_LINK = _added(
    "1.11", "ALLOCATIONS_LINK",
    "A provider's links include its allocations.")
DICT_ALLOCATIONS = _added(
    "1.12", "DICT_ALLOCATIONS",
    "Allocations written and read keyed by provider uuid; candidates' "
    "allocation_requests in that form; GET shows project_id and user_id.")
BULK_ALLOCATIONS = _added(
    "1.13", "BULK_ALLOCATIONS",
    "POST /allocations writes several consumers' allocations at once.")
NESTED_PROVIDERS = _added(
    "1.14", "NESTED_PROVIDERS",
    "Provider trees: parent_provider_uuid, root_provider_uuid and the "
    "in_tree list filter.")
CACHE_HEADERS = _added(
    "1.15", "CACHE_HEADERS",
    "GET answers carry Last-Modified and Cache-Control: no-cache.")
CANDIDATE_LIMIT = _added(
    "1.16", "CANDIDATE_LIMIT",
    "GET /allocation_candidates?limit= caps the number of candidates.")
CANDIDATE_REQUIRED = _added(
    "1.17", "CANDIDATE_REQUIRED",
    "GET /allocation_candidates?required= traits; summaries list traits.")
PROVIDER_REQUIRED = _added(
    "1.18", "PROVIDER_REQUIRED",
    "GET /resource_providers?required= traits.")
AGGREGATE_GENERATIONS = _added(
    "1.19", "AGGREGATE_GENERATIONS",
    "Provider aggregates are read and written with the provider "
    "generation, checked on write.")
CREATE_RETURNS_PROVIDER = _added(
    "1.20", "CREATE_RETURNS_PROVIDER",
    "POST /resource_providers answers 200 with the new provider in the body.")
CANDIDATE_MEMBER_OF = _added(
    "1.21", "CANDIDATE_MEMBER_OF",
    "GET /allocation_candidates?member_of= aggregates.")
FORBIDDEN_TRAITS = _added(
    "1.22", "FORBIDDEN_TRAITS",
    "'!TRAIT' in required forbids a trait, for candidates and the "
    "provider list.")
ERROR_CODES = _added(
    "1.23", "ERROR_CODES",
    "JSON error bodies carry a machine-readable code.")
MULTI_MEMBER_OF = _added(
    "1.24", "MULTI_MEMBER_OF",
    "member_of may repeat; every repeat must hold (AND of the lists).")
GRANULAR = _added(
    "1.25", "GRANULAR",
    "Numbered request groups (resourcesN, requiredN, member_ofN) and "
    "group_policy.")
RESERVED_EQUALS_TOTAL = _added(
    "1.26", "RESERVED_EQUALS_TOTAL",
    "An inventory's reserved may equal its total.")
ALL_RESOURCES_IN_SUMMARIES = _added(
    "1.27", "ALL_RESOURCES_IN_SUMMARIES",
    "Candidate provider summaries show every class a provider has, not "
    "just the requested ones.")
CONSUMER_GENERATIONS = _added(
    "1.28", "CONSUMER_GENERATIONS",
    "Allocation writes carry consumer_generation, checked against the "
    "consumer's; reads show it.")
NESTED_CANDIDATES = _added(
    "1.29", "NESTED_CANDIDATES",
    "Candidates span provider trees; summaries show parent and root uuids.")
RESHAPER = _added(
    "1.30", "RESHAPER",
    "POST /reshaper moves inventories and allocations in one transaction.")
CANDIDATE_IN_TREE = _added(
    "1.31", "CANDIDATE_IN_TREE",
    "GET /allocation_candidates?in_tree= (and in_treeN) limits to one tree.")
FORBIDDEN_AGGREGATES = _added(
    "1.32", "FORBIDDEN_AGGREGATES",
    "member_of=!A or !in:A,B excludes providers in those aggregates.")
STRING_SUFFIXES = _added(
    "1.33", "STRING_SUFFIXES",
    "Request group suffixes may be strings (resources_COMPUTE), not only "
    "numbers.")
MAPPINGS = _added(
    "1.34", "MAPPINGS",
    "Each allocation request says which providers satisfied which group "
    "(mappings).")
ROOT_REQUIRED = _added(
    "1.35", "ROOT_REQUIRED",
    "GET /allocation_candidates?root_required= traits of the tree's root.")
SAME_SUBTREE = _added(
    "1.36", "SAME_SUBTREE",
    "same_subtree=_A,_B keeps groups under one provider; resourceless "
    "groups allowed there.")
REPARENTING = _added(
    "1.37", "REPARENTING",
    "PUT /resource_providers/{uuid} may change or remove a provider's parent.")
CONSUMER_TYPES = _added(
    "1.38", "CONSUMER_TYPES",
    "Consumers have a consumer_type; usages are reported by type.")
ANY_TRAITS = _added(
    "1.39", "ANY_TRAITS",
    "required=in:A,B asks for any of the traits; repeated required "
    "parameters all hold.")

MIN_VERSION = VERSIONS[0].since
MAX_VERSION = VERSIONS[-1].since
# Our GET /reservations/allocation_candidates takes no microversion: it
# reads the candidates language, and answers in the shape, of this one.
WINDOW_CANDIDATES = ANY_TRAITS.since


def markdown() -> str:
    """The docs page, from VERSIONS."""
    lines = [
        "# Microversions",
        "",
        "placement_lite serves Placement's API microversions "
        f"{MIN_VERSION} to {MAX_VERSION}. Send "
        "`OpenStack-API-Version: placement X.Y` (or `placement latest`); "
        f"without it a request is served at {MIN_VERSION}.",
        "",
        "Generated from `placement_lite/api/versions.py` "
        "(`python -m placement_lite.api.versions > docs/microversions.md`); "
        "a test fails when the two differ. The feature name is what the code "
        "asks for (`req.context.microversion.has(GRANULAR)`).",
        "",
        "| Version | Feature | What it added |",
        "|---|---|---|",
    ]
    for feature in VERSIONS:
        note = feature.note.replace("|", "\\|")
        lines.append(f"| {feature.since} | `{feature.name}` | {note} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
