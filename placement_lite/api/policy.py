"""Policy, judged by oslo.policy's Enforcer, the library Placement uses.

One `Policy` per process holds one Enforcer with every rule of
api/policies.py registered (Placement's names, defaults, scope types and
deprecated rule; ours beside them) and the operator's policy file loaded
over them. The Enforcer reads its options from a ConfigOpts of its own
(never oslo.config's global CONF):

- `[oslo_policy] enforce_new_defaults`: False under the `legacy` profile,
  True under `secure-rbac` and `open`;
- `policy_file`: the file given (`--policy-file`), absolute;
- `policy_dirs`: none (Placement looks for `policy.d` beside
  placement.conf; we have no such directory to look in).

Token scope is enforced as oslo.policy 6 (what Placement 16 requires)
enforces it: always. An older oslo.policy that still has
`enforce_scope` is told to do the same.

The policy file is watched as oslo.policy watches it (its modification
time, checked on each request): a changed file is loaded into a new
Enforcer, checked as at start-up, and swapped in whole, so a request never
sees half-loaded rules, and a file that no longer loads leaves the rules
before it in force (with one log line saying why).

Two choices differ from oslo.policy on purpose: a rule that does not
parse, or rules that refer to each other in a loop, stop the service at
start-up with the rule named (oslo.policy would log the first and deny
it, and recurse on the second at the first request); in a changed file
they are logged and the rules before stay.

Each set of loaded rules (a Generation) keeps the decisions it made, when
all its checks depend on the rules, credentials and target alone: an
oslo.policy decision costs tens of microseconds per check, most of it
inspecting signatures, and a request should not pay that every time.
tests/test_policy_oslo.py compares kept decisions with fresh ones.
"""
from __future__ import annotations

import functools
import logging
import os
import threading
from dataclasses import dataclass
from typing import Mapping, Optional

from oslo_config import cfg
from oslo_policy import _checks
from oslo_policy import opts as policy_opts
from oslo_policy import policy as oslo

from placement_lite.api.policies import (  # noqa: F401 - importable from here
    BASE, CALLER, PROFILES, REQUEST, SPECS, rule_defaults)

LOG = logging.getLogger(__name__)


class PolicyError(ValueError):
    pass


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


ALLOWED = Decision(True)


def _conf(profile: str, policy_file: Optional[str]) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    conf([], project=None, default_config_files=[], default_config_dirs=[])
    policy_opts.set_defaults(conf)
    group = "oslo_policy"
    conf.set_override("enforce_new_defaults", profile != "legacy", group)
    conf.set_override("policy_dirs", [], group)
    if policy_file:
        conf.set_override("policy_file", policy_file, group)
    try:
        conf.set_override("enforce_scope", True, group)
    except cfg.NoSuchOptError:
        pass  # oslo.policy 6: scope is always enforced
    return conf


def _file_rules(path: str) -> dict:
    """The file's rules as oslo.policy reads them, refused with a reason
    when they are not a mapping of rule names to check strings."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = oslo.parse_file_contents(fh.read())
    except (OSError, ValueError) as exc:
        raise PolicyError(f"{path}: {exc}") from None
    if not isinstance(data, dict):
        raise PolicyError(f"{path} must map rule names to check strings")
    bad = [str(k) for k, v in data.items() if not isinstance(v, str)]
    if bad:
        raise PolicyError(f"{path}: the rules of {', '.join(bad[:5])} are not "
                          "check strings")
    return data


def _unparsable(texts: Mapping[str, str], rules: Mapping) -> list[str]:
    # oslo.policy turns a rule it cannot parse into `!` (and logs it); a
    # text that does not say `!` itself but became it did not parse.
    return [name for name, text in texts.items()
            if str(rules.get(name)) == "!"
            and text.replace("(", "").replace(")", "").strip() != "!"]


def _loop(rules: Mapping) -> Optional[list[str]]:
    """A chain of rule: references that comes back to where it started."""
    done: set = set()

    def refs(check):
        if getattr(check, "kind", None) == "rule":
            yield check.match
        for child in getattr(check, "rules", None) or ():
            yield from refs(child)
        inner = getattr(check, "rule", None)
        if inner is not None and not isinstance(inner, str):
            yield from refs(inner)

    def visit(name, path):
        if name in path:
            return list(path) + [name]
        if name in done or name not in rules:
            return None
        for ref in refs(rules[name]):
            found = visit(ref, path + (name,))
            if found:
                return found
        done.add(name)
        return None

    for name in rules:
        found = visit(name, ())
        if found:
            return found
    return None


# Decisions a generation of rules keeps (LRU): distinct callers x rules x
# targets. Enough for the services and admins that make most requests.
DECISIONS = 4096
# Checks whose answer depends on the rules, credentials and target alone
# (exact types: http:/https: checks, which ask a server, and plugins are
# not among them).
PURE = frozenset({_checks.TrueCheck, _checks.FalseCheck, _checks.NotCheck,
                  _checks.AndCheck, _checks.OrCheck, _checks.RuleCheck,
                  _checks.RoleCheck, _checks.GenericCheck})


def _pure(check) -> bool:
    if type(check) not in PURE:
        return False
    inner = [getattr(check, "rule", None)] if isinstance(check, _checks.NotCheck) else []
    return all(_pure(c) for c in list(getattr(check, "rules", None) or ()) + inner)


class Generation:
    """One set of loaded rules: its Enforcer and the decisions it made.

    oslo.policy spends most of a decision inspecting each check's
    signature (tens of microseconds per node); a decision is a function
    of (rule, credentials, target) while the rules stay loaded, so a
    generation whose checks are all pure keeps its decisions, keyed by
    those values exactly. A changed file is a new generation, with none."""

    def __init__(self, enforcer: oslo.Enforcer):
        self.enforcer = enforcer
        self.cached = None
        if all(_pure(check) for check in enforcer.rules.values()):
            self.cached = functools.lru_cache(maxsize=DECISIONS)(self._from_items)

    def decide(self, registered: bool, name: str, creds: Mapping,
               target: Mapping) -> Decision:
        if self.cached is not None:
            key = (_items(creds), _items(target))
            try:
                return self.cached(registered, name, *key)
            except TypeError:
                pass  # a value that cannot be a key: judged afresh
        return self.judge(registered, name, creds, target)

    def _from_items(self, registered, name, creds, target) -> Decision:
        return self.judge(registered, name, _mapping(creds), _mapping(target))

    def judge(self, registered: bool, name: str, creds: Mapping,
              target: Mapping) -> Decision:
        """oslo.policy's decision, never cached."""
        enforcer = self.enforcer
        judge = enforcer.authorize if registered else enforcer.enforce
        try:
            # Copies: oslo.policy writes into the credentials it is given.
            judge(name, dict(target), dict(creds), do_raise=True)
        except oslo.InvalidScope:
            return Decision(False, "scope", token_scope(creds),
                            tuple(enforcer.registered_rules[name].scope_types))
        except (oslo.PolicyNotAuthorized, oslo.PolicyNotRegistered):
            # An unregistered rule never grants: fail closed.
            return Decision(False, "check", token_scope(creds))
        return ALLOWED


def _items(values: Mapping) -> tuple:
    # Lists (roles) become tuples to be hashable; _mapping turns them back,
    # since oslo.policy tells a list from other values. (Not sorted: the
    # same values in another order are only a miss, not a wrong answer.)
    return tuple((k, tuple(v) if isinstance(v, list) else v)
                 for k, v in values.items())


def _mapping(items: tuple) -> dict:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in items}


class Policy:
    def __init__(self, profile: str = "legacy",
                 overrides: Optional[Mapping[str, str]] = None,
                 policy_file: Optional[str] = None):
        if profile not in PROFILES:
            raise PolicyError(f"unknown policy profile {profile!r}; "
                              f"choose one of {', '.join(PROFILES)}")
        if overrides and policy_file:
            raise PolicyError("give rules either as overrides or in a file")
        self.profile = profile
        self.policy_file = os.path.abspath(policy_file) if policy_file else None
        self._overrides = {str(k): str(v) for k, v in (overrides or {}).items()}
        self._lock = threading.Lock()
        self._seen = self._stamp()
        self._current = Generation(self._build())

    @classmethod
    def from_settings(cls, profile: str, policy_file: Optional[str]) -> "Policy":
        return cls(profile, policy_file=policy_file)

    def _stamp(self):
        if not self.policy_file:
            return None
        try:
            return os.stat(self.policy_file).st_mtime_ns
        except OSError:
            return "missing"

    def _build(self) -> oslo.Enforcer:
        texts = dict(self._overrides)
        if self.policy_file and os.path.exists(self.policy_file):
            texts.update(_file_rules(self.policy_file))
        conf = _conf(self.profile, self.policy_file)
        enforcer = oslo.Enforcer(
            conf, rules=oslo.Rules.from_dict(self._overrides) if self._overrides else None)
        # As Placement: the log says nothing per rule whose default
        # changed (every one did, in the secure-RBAC work).
        enforcer.suppress_default_change_warnings = True
        enforcer.register_defaults(rule_defaults(self.profile))
        enforcer.load_rules()
        bad = _unparsable(texts, enforcer.rules)
        if bad:
            raise PolicyError("rules that do not parse: " + "; ".join(
                f"{name}: {texts[name]!r}" for name in bad[:5]))
        loop = _loop(enforcer.rules)
        if loop:
            raise PolicyError("policy rules refer to each other in a loop: "
                              + " -> ".join(loop))
        # Loaded once: this Policy watches the file (current()), so the
        # Enforcer never reloads under a request.
        enforcer.use_conf = False
        return enforcer

    def current(self) -> Generation:
        """The rules in force, reloaded first if the file changed."""
        stamp = self._stamp()
        if stamp != self._seen:
            with self._lock:
                if stamp != self._seen:
                    self._reload(stamp)
        return self._current

    def _reload(self, stamp) -> None:
        self._seen = stamp
        if stamp == "missing":
            # As oslo.policy: without its file the defaults apply.
            LOG.warning("policy file %s is gone; the defaults apply until it "
                        "is back", self.policy_file)
        try:
            self._current = Generation(self._build())
        except PolicyError as exc:
            LOG.error("policy file %s changed but cannot be used (%s); the "
                      "rules loaded before stay in force", self.policy_file, exc)
            return
        LOG.info("policy file %s reloaded", self.policy_file)

    @property
    def enforcer(self) -> oslo.Enforcer:
        return self.current().enforcer

    @property
    def texts(self) -> dict[str, str]:
        """Every rule's check as the Enforcer holds it (oslo's spelling)."""
        return {name: str(check) for name, check in self.enforcer.rules.items()}

    def check(self, name: str, creds: Mapping, target: Mapping) -> bool:
        """Whether oslo.policy's enforce() allows `name` with `target` as
        given: a rule only a policy file defines is judged too (as a
        rule: reference to it would be); a registered one's scope counts."""
        return self.current().decide(False, name, creds, target).allowed

    def authorize(self, name: str, creds: Mapping, target: Mapping) -> Decision:
        """Judge the registered rule `name` for `creds` (Identity.creds())
        as Placement does: the target is the caller's own project and user
        for Placement's rules, the named request fields for
        placement:usages, and `target` (the request's fields) for ours."""
        spec = SPECS.get(name)
        if spec is not None:
            target = _target(spec.target, creds, target)
        return self.current().decide(True, name, creds, target)


def _target(kind, creds: Mapping, fields: Mapping) -> Mapping:
    if kind == CALLER:
        return {"project_id": creds.get("project_id"), "user_id": creds.get("user_id")}
    if kind == REQUEST:
        # A repeated parameter names no one value to compare with.
        return {k: v for k, v in fields.items() if isinstance(v, str)}
    out = {}
    for key in kind:
        value = fields.get(key)
        # A repeated query parameter: webob's req.GET.get gives the last.
        out[key] = value[-1] if isinstance(value, list) and value else value
    return out


def get_enforcer() -> oslo.Enforcer:
    """The Enforcer the settings give (the `oslo.policy.enforcer` entry
    point, for oslopolicy-policy-generator and oslopolicy-checker).

    Settings come from the environment and our config file as the service
    reads them; the tool's own `--config-file` (a placement.conf) adds its
    `[oslo_policy] policy_file` and `enforce_new_defaults` where our
    settings name none."""
    from placement_lite.config import load_settings

    settings = load_settings()
    profile, policy_file = settings.policy_profile, settings.policy_file
    files = list(getattr(cfg.CONF, "config_file", None) or ())
    if files:
        conf = cfg.ConfigOpts()
        policy_opts.set_defaults(conf)
        conf(["--config-file=" + f for f in files], project=None,
             default_config_files=[], default_config_dirs=[])
        group = conf.oslo_policy
        if not settings.explicit("policy_profile") and _set_in_file(
                conf, "enforce_new_defaults"):
            profile = "secure-rbac" if group.enforce_new_defaults else "legacy"
        if not policy_file and _set_in_file(conf, "policy_file"):
            policy_file = conf.find_file(group.policy_file) or group.policy_file
    enforcer = Policy(profile, policy_file=policy_file).enforcer
    # oslopolicy-validator opens the file named in the tool's own (global)
    # configuration: name the one judged here. (The service itself never
    # touches the global configuration.)
    policy_opts.set_defaults(cfg.CONF)
    if policy_file:
        cfg.CONF.set_override("policy_file", os.path.abspath(policy_file), "oslo_policy")
    return enforcer


def _set_in_file(conf: cfg.ConfigOpts, name: str) -> bool:
    location = conf.get_location(name, "oslo_policy")
    return location is not None and location.location == cfg.Locations.user
