"""Who is calling (noauth2 or keystone headers), and may they?

`noauth2` follows Placement's development auth, so the headers Placement's
own tests send build the same identity: every route but the public ones
needs `x-auth-token`; the token is `user[:project]` (the project defaults
to the user); the token `admin` gets the admin role; `X-Roles` replaces
the roles; `X-Project-Id` sets the project. `OpenStack-System-Scope: all`
makes the token system-scoped: it then carries no project unless
`X-Project-Id` names one (the token's `:project` part is dropped, as
Placement's noauth drops it). `X-Domain-Id` makes it domain-scoped.

`keystone` trusts the identity headers that keystonemiddleware's
auth_token sets after validating the token (X-Identity-Status, X-User-Id,
X-Project-Id or X-Domain-Id or OpenStack-System-Scope, X-Roles).

Every resource declares `policies = {"GET": "rule name", ...}`; the
middleware enforces the rule before the responder runs (so a caller the
rule refuses gets 403 before its body is looked at), with a target made
of the route's fields and the query string (so `project_id` in
`GET /usages?project_id=` is what project-scoped rules compare against);
Placement's other rules are checked against the caller's own project and
user, as Placement checks them (policy.Rule.caller_target).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import falcon

from placement_lite.api import errors
from placement_lite.api.policy import Policy

# What a resource that anyone may read declares as its `public_methods`.
READS = frozenset({"GET", "HEAD"})


def is_public(resource, method: str) -> bool:
    """A resource opts out of auth per method with `public_methods`;
    HEAD follows GET."""
    public = getattr(resource, "public_methods", ())
    return method in public or (method == "HEAD" and "GET" in public)


@dataclass
class Identity:
    user_id: str | None = None
    project_id: str | None = None
    roles: list[str] = field(default_factory=list)
    system_scope: str | None = None
    domain_id: str | None = None

    def creds(self) -> dict:
        return {"user_id": self.user_id, "project_id": self.project_id,
                "roles": [r.lower() for r in self.roles],
                "system_scope": self.system_scope, "domain_id": self.domain_id}


def _roles(header: str | None) -> list[str]:
    return [r.strip() for r in (header or "").split(",") if r.strip()]


# What keystoneauth's `none` auth type (`openstack --os-auth-type none`)
# sends in place of a token.
NOAUTH_PLACEHOLDER = "notused"


def noauth2_identity(req: falcon.Request, default_token: str | None = None) -> Identity:
    token = req.get_header("X-Auth-Token")
    if default_token and (not token or token == NOAUTH_PLACEHOLDER):
        token = default_token
    if not token:
        raise errors.ApiError(falcon.HTTP_401, "This request needs an "
                              "x-auth-token header (noauth2: 'user[:project]').")
    user_id, _sep, project_id = token.partition(":")
    system_scope = req.get_header("OpenStack-System-Scope") or None
    if system_scope:
        # A system-scoped token belongs to no project.
        project_id = req.get_header("X-Project-Id") or None
    else:
        project_id = req.get_header("X-Project-Id") or project_id or user_id
    roles_header = req.get_header("X-Roles")
    if roles_header is not None:
        roles = _roles(roles_header)
    elif user_id == "admin":
        roles = ["admin"]
    else:
        roles = []
    return Identity(user_id=user_id, project_id=project_id, roles=roles,
                    system_scope=system_scope,
                    domain_id=req.get_header("X-Domain-Id") or None)


def keystone_identity(req: falcon.Request, default_token: str | None = None) -> Identity:
    if (req.get_header("X-Identity-Status") or "").lower() != "confirmed":
        raise errors.ApiError(falcon.HTTP_401, "The request you have made "
                              "requires authentication.")
    return Identity(user_id=req.get_header("X-User-Id"),
                    project_id=req.get_header("X-Project-Id"),
                    roles=_roles(req.get_header("X-Roles")),
                    system_scope=req.get_header("OpenStack-System-Scope") or None,
                    domain_id=req.get_header("X-Domain-Id") or None)


IDENTIFIERS = {"noauth2": noauth2_identity, "keystone": keystone_identity}


class AuthMiddleware:
    """Identify the caller and enforce the route's policy rule.

    Runs after routing, so each resource says for itself which methods
    need no token (`public_methods`); unknown paths are a plain 404.
    """

    def __init__(self, mode: str, policy: Policy,
                 default_token: str | None = None):
        if mode not in IDENTIFIERS:
            raise ValueError(f"unknown auth mode {mode!r}")
        self.identify = IDENTIFIERS[mode]
        # noauth2 only (keystone ignores it): the token of a tokenless request.
        self.default_token = default_token
        self.policy = policy

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.identity = None

    def process_resource(self, req, resp, resource, params) -> None:
        if resource is None or req.method == "OPTIONS" or is_public(resource, req.method):
            return
        if not hasattr(resource, "on_" + req.method.lower()):
            # Falcon answers 405 with an Allow header for a method the
            # resource lacks; there is nothing to authorise.
            return
        req.context.identity = self.identify(req, self.default_token)
        if _absent_at_this_version(req, resource):
            # The responder answers 404; Placement checks the version first.
            return
        rule = getattr(resource, "policies", {}).get(req.method)
        if rule is None and req.method == "HEAD":
            rule = getattr(resource, "policies", {}).get("GET")
        if rule is None:
            # A route without a rule is a bug; refuse rather than allow.
            raise errors.forbidden("No policy rule covers this request.")
        target = {k: v for k, v in req.params.items() if isinstance(v, str)}
        target.update({k: str(v) for k, v in params.items()})
        creds = req.context.identity.creds()
        decision = self.policy.authorize(rule, creds, target)
        if not decision.allowed:
            raise errors.forbidden(refusal(rule, decision, creds))


def _absent_at_this_version(req, resource) -> bool:
    responder = getattr(resource, "on_" + req.method.lower(), None)
    version_range = getattr(responder, "version_range", None)
    version = getattr(req.context, "microversion", None)
    if version_range is None or version is None:
        return False
    low, high = version_range
    return not low <= version <= high


def refusal(rule: str, decision, creds: dict) -> str:
    """Placement's sentence first (callers match on it), then why."""
    text = f"Policy does not allow {rule} to be performed."
    if decision.refused_by == "scope":
        return (f"{text} It accepts {' or '.join(decision.scope_types)}-scoped "
                f"tokens only; this token is {decision.scope}-scoped.")
    # Header values are the caller's: echo a bounded amount of them.
    roles = ", ".join(r[:40] for r in (creds.get("roles") or ())[:10]) or "none"
    project = creds.get("project_id")
    where = f" in project {project[:80]}" if project else ""
    return f"{text} The caller's roles ({roles}){where} do not satisfy it."
