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
X-Project-Id or X-Domain-Id or OpenStack-System-Scope, X-Roles, and the
domain, service-token and admin-project headers).

Either way the credentials are the ones oslo.context builds from those
headers for Placement (Identity.creds()), and oslo.policy judges them
(api/policy.py). Every resource declares `policies = {"GET": "rule name",
...}`; the middleware enforces the rule before the responder runs (so a
caller the rule refuses gets 403 before its body is looked at). The target
is Placement's: the caller's own project and user for Placement's rules,
`{"project_id": <the query's>}` for placement:usages; our own routes get
the route's fields and the query string.
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


def _environ(header: str) -> str:
    return "HTTP_" + header.upper().replace("-", "_")


# oslo.context's RequestContext.from_environ, the credentials Placement
# judges: policy value -> the headers (as WSGI environ keys) it is read
# from, the first present winning.
HEADERS = {key: tuple(map(_environ, names)) for key, names in {
    "user_id": ("X-User-Id", "X-User"),
    "project_id": ("X-Project-Id", "X-Tenant-Id", "X-Tenant"),
    "domain_id": ("X-Domain-Id",),
    "system_scope": ("OpenStack-System-Scope",),
    "user_domain_id": ("X-User-Domain-Id",),
    "project_domain_id": ("X-Project-Domain-Id",),
    "service_user_id": ("X-Service-User-Id",),
    "service_user_domain_id": ("X-Service-User-Domain-Id",),
    "service_project_id": ("X-Service-Project-Id",),
    "service_project_domain_id": ("X-Service-Project-Domain-Id",),
}.items()}


@dataclass
class Identity:
    user_id: str | None = None
    project_id: str | None = None
    roles: list[str] = field(default_factory=list)
    system_scope: str | None = None
    domain_id: str | None = None
    # The rest of what RequestContext.to_policy_values() holds
    # (user_domain_id, service_roles, is_admin_project...).
    others: dict = field(default_factory=dict)

    def creds(self) -> dict:
        """The credentials oslo.policy judges: exactly the keys of oslo.context's
        RequestContext.to_policy_values(), as Placement passes them (no
        `is_admin`: a Placement policy's `is_admin:True` never matches)."""
        out = {"user_domain_id": None, "project_domain_id": None,
               "is_admin_project": True, "service_user_id": None,
               "service_user_domain_id": None, "service_project_id": None,
               "service_project_domain_id": None, "service_roles": []}
        out.update(self.others)
        out.update(user_id=self.user_id, project_id=self.project_id,
                   roles=list(self.roles), system_scope=self.system_scope,
                   domain_id=self.domain_id)
        return out


def _roles(header: str | None) -> list[str]:
    # As oslo.context splits X-Roles (an empty entry stays, as there).
    return [r.strip() for r in header.split(",")] if header else []


def from_environ(env, **given) -> Identity:
    """The identity oslo.context's from_environ builds from these headers,
    with the values in `given` in place of theirs (what Placement's
    noauth2 sets). Read from the WSGI environ: a request reads a dozen."""
    values = {}
    for key, names in HEADERS.items():
        if key in given:
            values[key] = given[key]
            continue
        values[key] = next((env[name] for name in names if name in env), None)
    roles = given["roles"] if "roles" in given else _roles(
        env.get("HTTP_X_ROLES", env.get("HTTP_X_ROLE")))
    admin_project = env.get("HTTP_X_IS_ADMIN_PROJECT", "true").lower() == "true"
    others = {k: v for k, v in values.items() if k not in _FIELDS}
    others.update(service_roles=_roles(env.get("HTTP_X_SERVICE_ROLES")),
                  is_admin_project=admin_project)
    return Identity(values["user_id"], values["project_id"], roles,
                    values["system_scope"], values["domain_id"], others)


_FIELDS = ("user_id", "project_id", "system_scope", "domain_id")


# What keystoneauth's `none` auth type (`openstack --os-auth-type none`)
# sends in place of a token.
NOAUTH_PLACEHOLDER = "notused"


def noauth2_identity(req: falcon.Request, default_token: str | None = None) -> Identity:
    """Placement's NoAuthMiddleware, then oslo.context: the token is
    `user[:project]`; it sets the user, the project (unless the token is
    system-scoped; X-Project-Id, read first, still wins) and the roles
    (X-Roles, else `admin` for the user `admin`); every other identity
    header is the request's own."""
    token = req.get_header("X-Auth-Token")
    if default_token and (not token or token == NOAUTH_PLACEHOLDER):
        token = default_token
    if not token:
        raise errors.ApiError(falcon.HTTP_401, "This request needs an "
                              "x-auth-token header (noauth2: 'user[:project]').")
    user_id, _sep, project_id = token.partition(":")
    project_id = project_id or user_id
    env = req.env
    roles_header = env.get("HTTP_X_ROLES")
    if roles_header is not None:
        roles = _roles(roles_header)
    else:
        roles = ["admin"] if user_id == "admin" else []
    given = {"user_id": user_id, "roles": roles}
    if not env.get("HTTP_OPENSTACK_SYSTEM_SCOPE"):
        given["project_id"] = env.get("HTTP_X_PROJECT_ID", project_id)
    return from_environ(env, **given)


def keystone_identity(req: falcon.Request, default_token: str | None = None) -> Identity:
    """What keystonemiddleware's auth_token set (it removes any identity
    header the caller sent before setting its own), read as oslo.context
    reads it."""
    if (req.get_header("X-Identity-Status") or "").lower() != "confirmed":
        raise errors.ApiError(falcon.HTTP_401, "The request you have made "
                              "requires authentication.")
    return from_environ(req.env)


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
        target = dict(req.params)
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
