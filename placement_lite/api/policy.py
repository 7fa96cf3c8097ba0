"""The policy table and a small evaluator for oslo.policy-style rules.

Rules are data: RULES maps a rule name to its default check string, the
older default it replaced (if any) and the token scopes it accepts. The
three profiles reproduce how OpenStack Placement 16 (oslo.policy 6) judges
a request under each of its test configurations:

- `secure-rbac`: `enforce_new_defaults = True`; each rule's check string
  alone.
- `legacy`: `enforce_new_defaults = False`; a rule that replaced an older
  default accepts either (oslo.policy ORs them). For Placement that widens
  only the base rules, so the `admin` role may also reshape. Our own
  routes (quota, lease, /v3) keep their documented legacy default: admin
  only.
- `open`: Placement's open policy test fixture; every rule is `@`
  except `admin_api` (and our own rules built on it: limit, project and
  catalog writes).

Scope is checked first and in every profile (oslo.policy 6 always
enforces it): a rule with scope types refuses a token of another scope
whatever its roles. Placement's rules are all `project`-scoped, so a
system-scoped token (`OpenStack-System-Scope: all`) is refused on every
Placement route. Our own rules accept any scope, as Keystone's limit
rules accept system- and project-scoped tokens.

A policy file (YAML, rule name -> check string) replaces a rule's check
string in every profile (an overridden rule gets no legacy OR, as in
oslo.policy); it does not change scope types.

Check strings use the familiar grammar: `role:admin`, `rule:NAME`,
`project_id:%(project_id)s`, `system_scope:all`, `@` (always), `!` (never),
combined with `and`, `or`, `not` and parentheses.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Optional

import yaml

PROJECT_SCOPE = ("project",)

# The older default Placement's base rules replaced (its "rule:admin_api"
# deprecated rule); the legacy profile ORs it back in.
OLD_ADMIN = "role:admin"


@dataclass(frozen=True)
class Rule:
    check: str
    # ORed with `check` under `legacy`, as oslo.policy does for a rule
    # whose default changed, unless a policy file overrides the rule.
    deprecated: Optional[str] = None
    # Replaces `check` under `legacy`: our own routes' documented default.
    legacy: Optional[str] = None
    # Token scopes the rule accepts; None accepts any.
    scope_types: Optional[tuple] = None
    # Kept under `open`.
    admin_only: bool = False
    # True: the target is the caller's own project and user, as Placement
    # checks every rule but placement:usages; False: the request's fields.
    caller_target: bool = False
    description: str = ""

    def text_for(self, profile: str) -> str:
        if profile == "open" and not self.admin_only:
            return "@"
        if profile == "legacy":
            if self.legacy is not None:
                return self.legacy
            if self.deprecated and self.deprecated != self.check:
                return f"({self.check}) or ({self.deprecated})"
        return self.check


RULES: dict[str, Rule] = {}


def register(name: str, check: str, **kw) -> str:
    RULES[name] = Rule(check, **kw)
    return name


# Placement's base rules, referenced as rule:NAME.
register("admin_api", "role:admin", scope_types=PROJECT_SCOPE, admin_only=True)
register("service_api", "role:service", deprecated=OLD_ADMIN,
         scope_types=PROJECT_SCOPE)
register("admin_or_service_api", "role:admin or role:service",
         deprecated=OLD_ADMIN, scope_types=PROJECT_SCOPE)
register("project_reader_api", "role:reader and project_id:%(project_id)s",
         deprecated=OLD_ADMIN)
register("admin_or_project_reader_or_service_api",
         "role:admin or rule:project_reader_api or role:service",
         deprecated=OLD_ADMIN, scope_types=PROJECT_SCOPE)
# Ours, for policy files that want a member-level rule.
register("project_member_api", "role:member and project_id:%(project_id)s",
         deprecated=OLD_ADMIN)
register("admin_or_project_member_or_service_api",
         "role:admin or rule:project_member_api or role:service",
         deprecated=OLD_ADMIN, scope_types=PROJECT_SCOPE)

# Kept for callers that import it: the base rules' names and defaults.
BASE = {name: rule.check for name, rule in RULES.items()}

ADMIN_OR_SERVICE = "rule:admin_or_service_api"
PROJECT_READER = "rule:admin_or_project_reader_or_service_api"
PROJECT_MEMBER = "rule:admin_or_project_member_or_service_api"


def placement_rule(name: str, check: str = ADMIN_OR_SERVICE,
                   caller_target: bool = True) -> str:
    return register(name, check, scope_types=PROJECT_SCOPE,
                    caller_target=caller_target)


for _family, _actions in {
    "resource_providers": ("list", "create", "show", "update", "delete"),
    "resource_classes": ("list", "create", "show", "update", "delete"),
    "resource_providers:inventories": ("list", "create", "show", "update", "delete"),
    "resource_providers:aggregates": ("list", "update"),
    "resource_providers:traits": ("list", "update", "delete"),
    "traits": ("list", "show", "update", "delete"),
    "allocations": ("manage", "list", "update", "delete"),
    "resource_providers:allocations": ("list",),
    "allocation_candidates": ("list",),
}.items():
    for _action in _actions:
        placement_rule(f"placement:{_family}:{_action}")
placement_rule("placement:resource_providers:usages")
# Admin in any project, a service, or a reader of the project asked about.
placement_rule("placement:usages", PROJECT_READER, caller_target=False)
placement_rule("placement:reshaper:reshape", "rule:service_api")


def own_rule(name: str, check: str = ADMIN_OR_SERVICE,
             admin_only: bool = False) -> str:
    # Our routes: any token scope; the legacy profile keeps them admin-only.
    return register(name, check, legacy="rule:admin_api", admin_only=admin_only)


# Quota: limit definitions, the model and the regions are readable by any
# project reader or member; limits by the project they belong to; every
# write is the admin's. A system-scoped reader (what Keystone's defaults
# and oslo.limit's service user rely on) may read limits and projects.
QUOTA_READER = "rule:admin_or_service_api or role:reader or role:member"
SYSTEM_READER = "role:reader and system_scope:all"
for _name in ("registered_limits:list", "registered_limits:show", "model:show",
              "catalog:read"):
    own_rule(f"placement:limits:{_name}", QUOTA_READER)
# Services and endpoints map every service of the cloud to where it
# listens: Keystone keeps them from project tokens
# (identity:list_services, get_service, list_endpoints, get_endpoint), and
# so do we, with the same default. oslo.limit reads its endpoint with a
# system reader, or with no token when quota_limits_public_read is on.
ADMIN_OR_SYSTEM_READER = f"role:admin or ({SYSTEM_READER})"
for _name in ("services:list", "services:show", "endpoints:list", "endpoints:show"):
    own_rule(f"placement:limits:{_name}", ADMIN_OR_SYSTEM_READER)
own_rule("placement:limits:limits:list", f"{PROJECT_READER} or ({SYSTEM_READER})")
own_rule("placement:limits:limits:show", f"{ADMIN_OR_SERVICE} or ({SYSTEM_READER})")
own_rule("placement:limits:projects:list", f"{ADMIN_OR_SERVICE} or ({SYSTEM_READER})")
own_rule("placement:limits:projects:show", f"{PROJECT_READER} or ({SYSTEM_READER})")
for _name in ("registered_limits:create", "registered_limits:update",
              "registered_limits:delete", "limits:create", "limits:update",
              "limits:delete", "projects:create", "projects:update",
              "projects:delete", "catalog:write"):
    own_rule(f"placement:limits:{_name}", "rule:admin_api", admin_only=True)
own_rule("placement:quota:check")
own_rule("placement:lease:check")
own_rule("placement:lease:ledger", PROJECT_READER)
# Explain answers with what the candidates query reads (every provider's
# capacity, usage, traits and aggregates), which Placement gives to the
# admin and services only: whoever the candidates rule admits, in every
# profile, and a policy file that changes that rule changes this one.
register("placement:explain:allocation_candidates",
         "rule:placement:allocation_candidates:list", scope_types=PROJECT_SCOPE,
         caller_target=True, description="Explain an allocation candidates query.")


class PolicyError(ValueError):
    pass


def _tokens(text: str) -> list[str]:
    # Parentheses group only at word edges, so `%(project_id)s` survives.
    out: list[str] = []
    for word in text.split():
        while word.startswith("("):
            out.append("(")
            word = word[1:]
        closing = 0
        while word.endswith(")"):
            closing += 1
            word = word[:-1]
        if word:
            out.append(word)
        out.extend(")" * closing)
    return out


Check = Callable[[Mapping, Mapping, "Policy"], bool]


def _atom(token: str) -> Check:
    if token == "@":
        return lambda creds, target, pol: True
    if token == "!":
        return lambda creds, target, pol: False
    kind, sep, match = token.partition(":")
    if not sep or not kind or not match:
        raise PolicyError(f"bad policy check {token!r}")
    if kind == "rule":
        return lambda creds, target, pol: pol.check(match, creds, target)
    if kind == "role":
        wanted = match.lower()
        return lambda creds, target, pol: wanted in creds.get("roles", ())

    def generic(creds, target, pol):
        try:
            expected = match % target if "%(" in match else match
        except (KeyError, TypeError):
            return False
        actual = creds.get(kind)
        return actual is not None and str(actual) == expected
    return generic


def compile_check(text: str) -> Check:
    tokens = _tokens(text or "@") or ["@"]
    pos = 0

    def peek():
        return tokens[pos] if pos < len(tokens) else None

    def take():
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def expr_or():
        left = expr_and()
        while peek() == "or":
            take()
            right = expr_and()
            left = (lambda a, b: lambda c, t, p: a(c, t, p) or b(c, t, p))(left, right)
        return left

    def expr_and():
        left = expr_not()
        while peek() == "and":
            take()
            right = expr_not()
            left = (lambda a, b: lambda c, t, p: a(c, t, p) and b(c, t, p))(left, right)
        return left

    def expr_not():
        if peek() == "not":
            take()
            inner = expr_not()
            return lambda c, t, p: not inner(c, t, p)
        if peek() == "(":
            take()
            inner = expr_or()
            if peek() != ")" or take() != ")":
                raise PolicyError(f"unbalanced parentheses in {text!r}")
            return inner
        token = take() if peek() is not None else None
        if token is None or token in ("and", "or", ")"):
            raise PolicyError(f"bad policy rule {text!r}")
        return _atom(token)

    check = expr_or()
    if pos != len(tokens):
        raise PolicyError(f"unexpected {tokens[pos]!r} in policy rule {text!r}")
    return check


PROFILES = ("legacy", "secure-rbac", "open")


def token_scope(creds: Mapping) -> str:
    """The scope of the caller's token, decided as oslo.policy decides it."""
    if creds.get("system_scope"):
        return "system"
    if creds.get("domain_id"):
        return "domain"
    return "project"


@dataclass(frozen=True)
class Decision:
    allowed: bool
    # Why not, for the error detail: "scope" or "check".
    refused_by: Optional[str] = None
    scope: Optional[str] = None
    scope_types: Optional[tuple] = None


def _references(text: str) -> list[str]:
    return [word[5:] for word in text.replace("(", " ").replace(")", " ").split()
            if word.startswith("rule:")]


class Policy:
    def __init__(self, profile: str = "legacy",
                 overrides: Optional[Mapping[str, str]] = None):
        if profile not in PROFILES:
            raise PolicyError(f"unknown policy profile {profile!r}; "
                              f"choose one of {', '.join(PROFILES)}")
        self.profile = profile
        texts = {name: rule.text_for(profile) for name, rule in RULES.items()}
        for name, text in (overrides or {}).items():
            texts[name] = text
        self.texts = texts
        self._checks = {name: compile_check(text) for name, text in texts.items()}
        self._refuse_cycles()

    def _refuse_cycles(self) -> None:
        # A rule that reaches itself through rule: references would recurse
        # on every request; refuse it at start-up instead.
        done: set[str] = set()

        def visit(name: str, path: tuple) -> None:
            if name in path:
                raise PolicyError("policy rules refer to each other in a loop: "
                                  + " -> ".join(path + (name,)))
            if name in done or name not in self.texts:
                return
            for ref in _references(self.texts[name]):
                visit(ref, path + (name,))
            done.add(name)

        for name in self.texts:
            visit(name, ())

    @classmethod
    def from_settings(cls, profile: str, policy_file: Optional[str]) -> "Policy":
        overrides = {}
        if policy_file:
            with open(policy_file, encoding="utf-8") as fh:
                overrides = yaml.safe_load(fh) or {}
            if not isinstance(overrides, dict):
                raise PolicyError(f"{policy_file} must map rule names to rules")
        return cls(profile, {str(k): str(v) for k, v in overrides.items()})

    def check(self, name: str, creds: Mapping, target: Mapping) -> bool:
        """The rule's check string alone (what rule:NAME references use)."""
        check = self._checks.get(name)
        if check is None:
            # An unknown rule never grants: fail closed.
            return False
        return check(creds, target, self)

    def authorize(self, name: str, creds: Mapping, target: Mapping) -> Decision:
        """Scope first, then the check string, as oslo.policy enforces a
        registered rule. `target` is the request's fields; a rule that
        Placement checks against the caller's own project gets that."""
        rule = RULES.get(name)
        if rule is not None and rule.caller_target:
            target = {"project_id": creds.get("project_id"),
                      "user_id": creds.get("user_id")}
        scope_types = rule.scope_types if rule is not None else None
        scope = token_scope(creds)
        if scope_types and scope not in scope_types:
            return Decision(False, "scope", scope, scope_types)
        if not self.check(name, creds, target):
            return Decision(False, "check", scope, scope_types)
        return Decision(True, None, scope, scope_types)
