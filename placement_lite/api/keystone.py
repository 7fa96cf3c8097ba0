"""`--auth keystone`: the app behind keystonemiddleware's auth_token.

auth_token validates the X-Auth-Token against Keystone and sets the
identity headers (X-Identity-Status, X-User-Id, X-Project-Id, X-Roles...)
that api/auth.py's keystone_identity reads. Options come from the
[keystone_authtoken] section of Placement's placement.conf (when one is
read), of `keystone_config_file` (an ini file, as every OpenStack service
has), the section's OS_KEYSTONE_AUTHTOKEN__* variables and the
`keystone_authtoken` settings, each winning over the ones before.

auth_token always runs with delay_auth_decision: it marks a missing or
bad token as X-Identity-Status: Invalid instead of answering 401 itself,
so the paths that need no token (/, /healthcheck, /metrics, CORS
preflights) keep working, and a refusal is the API's own 401 in the usual
error format, with the WWW-Authenticate header auth_token would have sent.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping


def require() -> None:
    """ImportError unless keystonemiddleware, and the oslo.config it reads
    its options with, can be imported: checked before anything else starts,
    so the missing extra is what the operator is told (start-up turns it
    into one line)."""
    import keystonemiddleware.auth_token  # noqa: F401
    import oslo_config.cfg  # noqa: F401


def memcache_problem(settings) -> str | None:
    """Why auth_token's token cache would fail, or None: memcached servers
    are configured (kolla and OpenStack-Ansible always set them) but
    python-memcached, which the cache imports, is not installed. auth_token
    itself would find out only at the first request with a token."""
    from keystonemiddleware import opts

    options = _options(settings)
    conf = options["oslo_config_config"]
    for group, listed in opts.list_auth_token_opts():
        conf.register_opts(listed, group=group)
    servers = (options.get("memcached_servers") or options.get("memcache_servers")
               or conf.keystone_authtoken.memcached_servers)
    if not servers:
        return None
    try:
        import memcache  # noqa: F401
    except ImportError:
        shown = servers if isinstance(servers, str) else ",".join(servers)
        return (f"[keystone_authtoken] memcached_servers = {shown}: keystonemiddleware's "
                "token cache needs python-memcached, which is not installed; install "
                "it (pip install 'placement-lite[keystone]' has it), or remove "
                "memcached_servers to cache tokens in each process")
    return None


def _options(settings) -> dict[str, Any]:
    """auth_token's configuration: an oslo.config object over Placement's
    files (its [keystone_authtoken] as Placement hands it over) and then
    keystone_config_file, which wins; over that, as auth_token's own
    overrides, the section's OS_KEYSTONE_AUTHTOKEN__* variables and then
    the keystone_authtoken settings."""
    from oslo_config import cfg
    deployment = settings.deployment
    files = list(deployment.files) if deployment is not None else []
    if settings.keystone_config_file:
        files.append(settings.keystone_config_file)
    conf = cfg.ConfigOpts()
    # No environment and no search of default places: every source is
    # named here, read from the settings' own environment.
    conf([], project="placement-lite", default_config_files=files,
         default_config_dirs=[], use_env=False)
    options: dict[str, Any] = {"oslo_config_config": conf}
    if deployment is not None:
        options.update(deployment.keystone_environment)
    options.update({str(k): str(v) for k, v in
                    dict(settings.keystone_authtoken or {}).items()})
    return options


class _Challenge:
    """Adds WWW-Authenticate to the API's 401s, as auth_token would."""

    def __init__(self, app, header: str | None):
        self.app = app
        self.header = header

    def __call__(self, environ, start_response):
        if not self.header:
            return self.app(environ, start_response)

        def start(status, headers, exc_info=None):
            if status.startswith("401") and not any(
                    k.lower() == "www-authenticate" for k, _ in headers):
                headers = list(headers) + [("WWW-Authenticate", self.header)]
            return start_response(status, headers, exc_info)
        return self.app(environ, start)


def _public_uri(conf: Mapping[str, Any]) -> str | None:
    for name in ("www_authenticate_uri", "auth_uri"):
        if conf.get(name):
            return str(conf[name])
    oslo = conf.get("oslo_config_config")
    group = getattr(oslo, "keystone_authtoken", None) if oslo is not None else None
    for name in ("www_authenticate_uri", "auth_uri"):
        value = getattr(group, name, None) if group is not None else None
        if value:
            return str(value)
    return None


def wrap(app, settings, options: Mapping[str, Any] | None = None,
         before_auth: Callable[[Any], Any] | None = None):
    """The WSGI app wrapped in auth_token, configured from `settings`.

    `before_auth` (a WSGI app -> WSGI app) sees each request before
    auth_token does: how the console, which this layer does not know, hands
    its cookie to auth_token as a token."""
    conf = dict(options) if options is not None else _options(settings)
    conf["delay_auth_decision"] = "true"
    from keystonemiddleware import auth_token

    challenge = _Challenge(app, None)
    protocol = auth_token.AuthProtocol(challenge, dict(conf))
    # auth_token has registered its options on `oslo` by now, so the
    # public identity endpoint can be read for the challenge header.
    uri = _public_uri(conf)
    challenge.header = f'Keystone uri="{uri}"' if uri else None
    return KeystoneApp(before_auth(protocol) if before_auth else protocol)


class KeystoneApp:
    """A plain WSGI callable around auth_token (whose webob-decorated
    __call__ hides its signature from tools that inspect the app)."""

    def __init__(self, protocol):
        self.protocol = protocol

    def __call__(self, environ, start_response):
        return self.protocol(environ, start_response)
