"""Who is looking at the console, and may they see a page?

The browser gives its token once, on the login form; it is kept in a
cookie that is HttpOnly (no script reads it), SameSite=Strict (no other
site's page can make the browser send it) and scoped to /ui, and never
appears in a URL. Each page then identifies the caller the way the API
does in the same auth mode and checks the same policy rules, with the
same targets, as the API routes whose data the page shows.

- noauth2: the cookie holds the noauth2 token (`user[:project]`), read as
  the API reads an X-Auth-Token header.
- keystone: `CookieToken` (outside keystonemiddleware's auth_token) hands
  the cookie to auth_token as X-Auth-Token, for /ui paths only, so
  Keystone validates it as it validates any API token and the page reads
  the identity headers auth_token sets. The cookie never authenticates an
  API call: a cross-site form posting to the API carries no token.
"""
from __future__ import annotations

from http.cookies import CookieError, SimpleCookie
from typing import Iterable, Mapping, Optional

from placement_lite.api import auth, errors

COOKIE = "placement_lite_console"
PREFIX = "/ui"
# Longer than any Keystone token (Fernet tokens are ~250 characters).
MAX_TOKEN = 4096


def valid_token(token: str) -> bool:
    """Printable ASCII without the characters a cookie value cannot hold."""
    return (0 < len(token) <= MAX_TOKEN
            and all(33 <= ord(ch) < 127 for ch in token)
            and not any(ch in token for ch in '";,\\'))


class CookieToken:
    """WSGI: for requests under /ui that carry the console cookie and no
    X-Auth-Token, pass the cookie's token on as X-Auth-Token."""

    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO") or ""
        if (path == PREFIX or path.startswith(PREFIX + "/")) \
                and not environ.get("HTTP_X_AUTH_TOKEN"):
            token = _cookie(environ.get("HTTP_COOKIE"))
            if token:
                environ["HTTP_X_AUTH_TOKEN"] = token
        return self.app(environ, start_response)


def _cookie(header: Optional[str]) -> Optional[str]:
    if not header:
        return None
    jar = SimpleCookie()
    try:
        jar.load(header)
    except CookieError:
        return None
    morsel = jar.get(COOKIE)
    return morsel.value if morsel is not None and valid_token(morsel.value) else None


class _TokenRequest:
    """The request as noauth2 reads it, with the cookie's token as its
    X-Auth-Token (the other identity headers are the request's own)."""

    def __init__(self, req, token: str):
        self._req = req
        self._token = token

    @property
    def env(self):
        return self._req.env

    def get_header(self, name, *args, **kw):
        if name.lower() == "x-auth-token":
            return self._token
        return self._req.get_header(name, *args, **kw)


def identify(req, mode: str) -> Optional[auth.Identity]:
    """The caller's identity, or None when they must log in (no cookie, or
    a token Keystone did not accept)."""
    token = _cookie(req.get_header("Cookie"))
    if token is None:
        return None
    try:
        if mode == "keystone":
            return auth.keystone_identity(req)
        return auth.noauth2_identity(_TokenRequest(req, token))
    except errors.ApiError:
        return None


class Refused(Exception):
    """A policy rule refuses the caller; `detail` says which and why."""

    def __init__(self, detail: str):
        super().__init__(detail)
        self.detail = detail


def require(policy, identity: auth.Identity, rules: Iterable[str],
            targets: Iterable[Mapping] = ({},)) -> None:
    """Every rule must allow the caller for every target, as each API
    route the page reads would; the first refusal is raised."""
    creds = identity.creds()
    targets = list(targets)
    for rule in rules:
        for target in targets:
            decision = policy.authorize(rule, creds, dict(target))
            if not decision.allowed:
                raise Refused(auth.refusal(rule, decision, creds))


def allowed(policy, identity: auth.Identity, rule: str, target: Mapping) -> bool:
    return policy.authorize(rule, identity.creds(), dict(target)).allowed
