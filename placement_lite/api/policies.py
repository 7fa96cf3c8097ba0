"""The policy rules every route is judged by, registered with oslo.policy.

OpenStack Placement's rules keep Placement's names, default check strings,
scope types and deprecated rule, so a policy file written for Placement
means here what it meant there. Our own routes (/v3, /quota, /v1,
/explain, and the console's pages, which reuse the API's rules) register
theirs the same way, under the generator namespace `placement_lite`:

    oslopolicy-sample-generator --namespace placement_lite

lists every rule with its default (list_rules below).

Each rule is described once, as a `Spec`; `rule_defaults(profile)` turns
the specs into the oslo.policy RuleDefaults an Enforcer registers. The
profile (our setting) picks the defaults, as Placement's own test
configurations pick theirs:

- `secure-rbac`: each rule's default alone (`enforce_new_defaults = True`).
- `legacy`: `enforce_new_defaults = False`, so oslo.policy ORs the
  deprecated `role:admin` into Placement's base rules that replaced it;
  our own routes keep their documented legacy default, admin only.
- `open`: Placement's open-policy test fixture: every rule is `@` but the
  admin-only ones.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

from oslo_policy import policy

PROJECT_SCOPE = ("project",)
PROFILES = ("legacy", "secure-rbac", "open")

# Which target a rule is checked against: the caller's own project and
# user (what Placement passes for every rule but placement:usages), every
# field of the request (our routes), or the named request fields, absent
# ones as None (placement:usages: `{'project_id': <the query's>}`).
CALLER = "caller"
REQUEST = "request"
Target = Union[str, tuple]


@dataclass(frozen=True)
class Spec:
    name: str
    check: str
    description: str
    scope_types: Optional[tuple] = None
    # True: the default replaced Placement's old `role:admin`
    # (deprecated_admin), which `enforce_new_defaults = False` ORs back in.
    deprecated: bool = False
    # Our routes' default under the legacy profile (replaces `check`).
    legacy: Optional[str] = None
    # Kept (not opened to `@`) under the open profile.
    admin_only: bool = False
    target: Target = CALLER

    def check_for(self, profile: str) -> str:
        if profile == "open" and not self.admin_only:
            return "@"
        if profile == "legacy" and self.legacy is not None:
            return self.legacy
        return self.check


# Placement registers its older default under the name "rule:admin_api"
# (sic): a policy file that overrides that name overrides the deprecated
# default too, so the name is kept exactly. (Made when first needed: a
# rule is parsed when made, and oslo.policy's first parse scans the
# installed packages for check plugins, which commands that judge nothing
# need not do.)
def deprecated_admin() -> policy.DeprecatedRule:
    return policy.DeprecatedRule(
        name="rule:admin_api", check_str="role:admin",
        deprecated_reason=("Placement's defaults gained reader and service "
                           "roles with project scope; the admin-only default "
                           "is kept for deployments that set "
                           "enforce_new_defaults = False."),
        deprecated_since="W")


SPECS: dict[str, Spec] = {}


def _add(spec: Spec) -> str:
    SPECS[spec.name] = spec
    return spec.name


# Placement's base rules, referenced as rule:NAME by the others.
_add(Spec("admin_api", "role:admin", "The admin role: the base of admin-only "
          "rules.", PROJECT_SCOPE, admin_only=True))
_add(Spec("service_api", "role:service", "The service role: the base of "
          "service-to-service rules.", PROJECT_SCOPE, deprecated=True))
_add(Spec("admin_or_service_api", "role:admin or role:service", "The admin or "
          "the service role: the base of most Placement rules.", PROJECT_SCOPE,
          deprecated=True))
_add(Spec("project_reader_api", "role:reader and project_id:%(project_id)s",
          "A reader of the project the request is about.", deprecated=True))
_add(Spec("admin_or_project_reader_or_service_api",
          "role:admin or rule:project_reader_api or role:service",
          "The admin or service role, or a reader of the project the request "
          "is about.", PROJECT_SCOPE, deprecated=True))
# Ours, for policy files that want a member-level rule.
_add(Spec("project_member_api", "role:member and project_id:%(project_id)s",
          "A member of the project the request is about (placement-lite).",
          deprecated=True))
_add(Spec("admin_or_project_member_or_service_api",
          "role:admin or rule:project_member_api or role:service",
          "The admin or service role, or a member of the project the request "
          "is about (placement-lite).", PROJECT_SCOPE, deprecated=True))

ADMIN_OR_SERVICE = "rule:admin_or_service_api"
PROJECT_READER = "rule:admin_or_project_reader_or_service_api"
PROJECT_MEMBER = "rule:admin_or_project_member_or_service_api"
# Kept for callers that import them: the base rules' names and defaults.
BASE = {name: spec.check for name, spec in SPECS.items()}

_VERBS = {"list": "List", "create": "Create", "show": "Show", "update": "Update",
          "delete": "Delete", "manage": "Write, in one request, the"}
_NOUNS = {
    "resource_providers": "resource providers",
    "resource_classes": "resource classes",
    "resource_providers:inventories": "a resource provider's inventories",
    "resource_providers:aggregates": "a resource provider's aggregates",
    "resource_providers:traits": "a resource provider's traits",
    "traits": "traits",
    "allocations": "allocations of consumers",
    "resource_providers:allocations": "a resource provider's allocations",
    "allocation_candidates": "allocation candidates",
}
_ACTIONS = {
    "resource_providers": ("list", "create", "show", "update", "delete"),
    "resource_classes": ("list", "create", "show", "update", "delete"),
    "resource_providers:inventories": ("list", "create", "show", "update", "delete"),
    "resource_providers:aggregates": ("list", "update"),
    "resource_providers:traits": ("list", "update", "delete"),
    "traits": ("list", "show", "update", "delete"),
    "allocations": ("manage", "list", "update", "delete"),
    "resource_providers:allocations": ("list",),
    "allocation_candidates": ("list",),
}


def placement_rule(name: str, description: str, check: str = ADMIN_OR_SERVICE,
                   target: Target = CALLER) -> str:
    return _add(Spec(name, check, description, PROJECT_SCOPE, target=target))


for _family, _actions in _ACTIONS.items():
    for _action in _actions:
        placement_rule(f"placement:{_family}:{_action}",
                       f"{_VERBS[_action]} {_NOUNS[_family]}.")
placement_rule("placement:resource_providers:usages",
               "Show a resource provider's usages.")
# Admin in any project, a service, or a reader of the project asked about.
placement_rule("placement:usages", "Show the usages of a project (and user).",
               PROJECT_READER, target=("project_id",))
placement_rule("placement:reshaper:reshape", "Move inventories and "
               "allocations between providers in one request.", "rule:service_api")


def own_rule(name: str, description: str, check: str = ADMIN_OR_SERVICE,
             admin_only: bool = False) -> str:
    # Our routes accept any token scope (Keystone's limit rules accept
    # system- and project-scoped tokens); the legacy profile keeps them
    # admin-only.
    return _add(Spec(name, check, description, legacy="rule:admin_api",
                     admin_only=admin_only, target=REQUEST))


# Quota: limit definitions, the model and the regions are readable by any
# project reader or member; limits by the project they belong to; every
# write is the admin's. A system-scoped reader (what Keystone's defaults
# and oslo.limit's service user rely on) may read limits and projects.
QUOTA_READER = "rule:admin_or_service_api or role:reader or role:member"
SYSTEM_READER = "role:reader and system_scope:all"
for _name, _what in (("registered_limits:list", "List registered limits."),
                     ("registered_limits:show", "Show a registered limit."),
                     ("model:show", "Show the quota enforcement model."),
                     ("catalog:read", "List or show regions.")):
    own_rule(f"placement:limits:{_name}", _what, QUOTA_READER)
# Services and endpoints map every service of the cloud to where it
# listens: Keystone keeps them from project tokens (identity:list_services
# and friends), and so do we, with the same default.
ADMIN_OR_SYSTEM_READER = f"role:admin or ({SYSTEM_READER})"
for _name, _what in (("services:list", "List catalog services."),
                     ("services:show", "Show a catalog service."),
                     ("endpoints:list", "List catalog endpoints."),
                     ("endpoints:show", "Show a catalog endpoint.")):
    own_rule(f"placement:limits:{_name}", _what, ADMIN_OR_SYSTEM_READER)
own_rule("placement:limits:limits:list", "List project limits.",
         f"{PROJECT_READER} or ({SYSTEM_READER})")
own_rule("placement:limits:limits:show", "Show a project limit.",
         f"{ADMIN_OR_SERVICE} or ({SYSTEM_READER})")
own_rule("placement:limits:projects:list", "List the quota project tree.",
         f"{ADMIN_OR_SERVICE} or ({SYSTEM_READER})")
own_rule("placement:limits:projects:show", "Show a project of the quota tree.",
         f"{PROJECT_READER} or ({SYSTEM_READER})")
for _name in ("registered_limits:create", "registered_limits:update",
              "registered_limits:delete", "limits:create", "limits:update",
              "limits:delete", "projects:create", "projects:update",
              "projects:delete"):
    _family, _action = _name.split(":")
    own_rule(f"placement:limits:{_name}",
             f"{_VERBS[_action]} {_family.replace('_', ' ')}.",
             "rule:admin_api", admin_only=True)
own_rule("placement:limits:catalog:write", "Create, change or delete catalog "
         "services, endpoints and regions.", "rule:admin_api", admin_only=True)
own_rule("placement:quota:check", "Ask whether a claim would fit the quota.")
own_rule("placement:lease:check", "Judge a Blazar lease (the /v1 lease-policy "
         "calls).")
own_rule("placement:lease:ledger", "Read a project's lease ledger.", PROJECT_READER)
# Reservations hold room every claim must then leave free: the admin's, in
# every profile but open, as Placement's own rules were before the
# service and reader roles.
for _action, _what in (("create", "Reserve room on providers for a window of time."),
                       ("show", "Show a reservation."),
                       ("list", "List reservations."),
                       ("update", "Change a reservation's window or amounts."),
                       ("delete", "Cancel a pending reservation, or delete an "
                                  "ended one from the records."),
                       ("end", "End an active reservation now.")):
    own_rule(f"placement:reservations:{_action}", _what, "rule:admin_api")
# Reservations' calendars: the admin's, in every profile but open
# (docs/reservations.md); a policy file may open a project's calendar to
# its readers, the project being in the target (`%(project_id)s`).
own_rule("placement:reservations:calendar", "Read the reservation calendar "
         "of a resource provider or a project.", "rule:admin_api")
# Explain answers with what the candidates query reads (every provider's
# capacity, usage, traits and aggregates): whoever the candidates rule
# admits, in every profile, and a policy file that changes that rule
# changes this one.
_add(Spec("placement:explain:allocation_candidates",
          "rule:placement:allocation_candidates:list",
          "Explain an allocation candidates query.", PROJECT_SCOPE))
# Candidates for a window read what every reservation holds: the admin's,
# as the reservations' own rules are.
own_rule("placement:reservations:candidates", "Find where a request for "
         "resources fits throughout a window, beside reservations.",
         "rule:admin_api")


def rule_defaults(profile: str) -> list[policy.RuleDefault]:
    """The RuleDefaults an Enforcer registers under `profile`."""
    out = []
    old_admin = deprecated_admin()
    for spec in SPECS.values():
        deprecated = old_admin if spec.deprecated and profile != "open" else None
        out.append(policy.RuleDefault(
            spec.name, spec.check_for(profile), description=spec.description,
            scope_types=list(spec.scope_types) if spec.scope_types else None,
            deprecated_rule=deprecated))
    return out


def _operations() -> dict[str, list[dict]]:
    """Rule name -> the (method, path) pairs of the routes it judges, read
    from the route table itself (so the sample cannot drift from it)."""
    from placement_lite.app import METRICS_ROUTES, ROUTES

    ops: dict[str, list[dict]] = {}
    for route in ROUTES + METRICS_ROUTES:
        for method, name in sorted(getattr(route.resource, "policies", {}).items()):
            ops.setdefault(name, []).append({"method": method, "path": route.template})
    return ops


def list_rules() -> list[policy.RuleDefault]:
    """Every rule with its default, for oslopolicy-sample-generator (the
    `oslo.policy.policies` entry point): the secure-rbac defaults, with
    Placement's deprecated rule, and for our own routes their legacy
    default in the description."""
    ops = _operations()
    out = []
    for rule in rule_defaults("secure-rbac"):
        spec = SPECS[rule.name]
        description = spec.description
        if spec.legacy is not None:
            description += (f" With enforce_new_defaults = False (the legacy "
                            f"profile) the default is {spec.legacy}.")
        kwargs = dict(description=description, scope_types=rule.scope_types,
                      deprecated_rule=rule.deprecated_rule)
        if rule.name in ops:
            out.append(policy.DocumentedRuleDefault(
                rule.name, rule.check_str, operations=ops[rule.name], **kwargs))
        else:
            out.append(policy.RuleDefault(rule.name, rule.check_str, **kwargs))
    return out
