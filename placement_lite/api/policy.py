"""The policy table and a small evaluator for oslo.policy-style rules.

Rules are data: RULES maps a rule name to its default check string under
each profile. `legacy` is Placement's historical default (the admin role
may do everything), `secure-rbac` its newer scoped defaults, `open` lets
any authenticated caller use every rule not marked admin-only. A policy
file (YAML, rule name -> check string) overrides any of them.

Check strings use the familiar grammar: `role:admin`, `rule:NAME`,
`project_id:%(project_id)s`, `system_scope:all`, `@` (always), `!` (never),
combined with `and`, `or`, `not` and parentheses.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Optional

import yaml

# Base rules shared by the profiles, referenced as rule:NAME.
BASE = {
    "admin_api": "role:admin",
    "service_api": "role:service",
    "admin_or_service_api": "role:admin or role:service",
    "project_reader_api": "role:reader and project_id:%(project_id)s",
    "project_member_api": "role:member and project_id:%(project_id)s",
    "admin_or_project_reader_or_service_api":
        "role:admin or rule:project_reader_api or role:service",
    "admin_or_project_member_or_service_api":
        "role:admin or rule:project_member_api or role:service",
}


@dataclass(frozen=True)
class Rule:
    secure_rbac: str
    admin_only: bool = False
    description: str = ""


ADMIN_OR_SERVICE = "rule:admin_or_service_api"
PROJECT_READER = "rule:admin_or_project_reader_or_service_api"
PROJECT_MEMBER = "rule:admin_or_project_member_or_service_api"

RULES: dict[str, Rule] = {}


def register(name: str, secure_rbac: str = ADMIN_OR_SERVICE,
             admin_only: bool = False, description: str = "") -> str:
    RULES[name] = Rule(secure_rbac, admin_only, description)
    return name


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
        register(f"placement:{_family}:{_action}")
register("placement:resource_providers:usages")
register("placement:usages", PROJECT_READER)
register("placement:reshaper:reshape", "rule:service_api", admin_only=True)

# Quota: limit definitions, the model and the catalog are readable by any
# project reader or member; limits by the project they belong to; every
# write is the admin's.
QUOTA_READER = "rule:admin_or_service_api or role:reader or role:member"
for _name in ("registered_limits:list", "registered_limits:show", "model:show",
              "catalog:read"):
    register(f"placement:limits:{_name}", QUOTA_READER)
register("placement:limits:limits:list", PROJECT_READER)
register("placement:limits:limits:show")
register("placement:limits:projects:list")
register("placement:limits:projects:show", PROJECT_READER)
for _name in ("registered_limits:create", "registered_limits:update",
              "registered_limits:delete", "limits:create", "limits:update",
              "limits:delete", "projects:create", "projects:update",
              "projects:delete", "catalog:write"):
    register(f"placement:limits:{_name}", "rule:admin_api", admin_only=True)
register("placement:quota:check")
register("placement:lease:check")
register("placement:lease:ledger", PROJECT_READER)


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


class Policy:
    def __init__(self, profile: str = "legacy",
                 overrides: Optional[Mapping[str, str]] = None):
        if profile not in PROFILES:
            raise PolicyError(f"unknown policy profile {profile!r}; "
                              f"choose one of {', '.join(PROFILES)}")
        self.profile = profile
        texts: dict[str, str] = dict(BASE)
        for name, rule in RULES.items():
            if profile == "legacy":
                texts[name] = "rule:admin_api"
            elif profile == "open" and not rule.admin_only:
                texts[name] = "@"
            else:
                texts[name] = rule.secure_rbac
        for name, text in (overrides or {}).items():
            texts[name] = text
        self.texts = texts
        self._checks = {name: compile_check(text) for name, text in texts.items()}

    @classmethod
    def from_settings(cls, profile: str, policy_file: Optional[str]) -> "Policy":
        overrides = {}
        if policy_file:
            with open(policy_file, encoding="utf-8") as fh:
                overrides = yaml.safe_load(fh) or {}
            if not isinstance(overrides, dict):
                raise PolicyError(f"{policy_file} must map rule names to rules")
        return cls(profile, {str(k): str(v) for k, v in overrides.items()})

    def check(self, name: str, creds: Mapping, target: Mapping,
              _depth: int = 0) -> bool:
        check = self._checks.get(name)
        if check is None:
            # An unknown rule never grants: fail closed.
            return False
        return check(creds, target, self)
