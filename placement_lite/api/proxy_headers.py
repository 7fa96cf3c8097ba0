"""`proxy_headers` (Placement's [oslo_middleware]
enable_proxy_headers_parsing): behind a TLS-terminating proxy, the scheme,
host and path prefix the caller used are the proxy's to tell, so the URLs
built from them (Location headers, the /v3 links) point where the caller
can follow them.

As oslo.middleware's HTTPProxyToWSGI reads them: the first element of an
RFC 7239 `Forwarded` header (proto, host, for), or, without one,
X-Forwarded-Proto, X-Forwarded-Host and X-Forwarded-For; and
X-Forwarded-Prefix before the application's own path. Only turn it on
behind a proxy that sets these headers itself: otherwise any caller
chooses them.
"""
from __future__ import annotations


def _forwarded(header: str) -> dict[str, str]:
    """The first proxy's pairs of an RFC 7239 Forwarded header."""
    first = header.split(",", 1)[0]
    pairs = {}
    for part in first.split(";"):
        key, _, value = part.partition("=")
        if key.strip():
            pairs[key.strip().lower()] = value.strip().strip('"')
    return pairs


class ProxyHeaders:
    """A WSGI wrapper: the environment rewritten, then the app called."""

    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        if environ.get("HTTP_FORWARDED"):
            pairs = _forwarded(environ["HTTP_FORWARDED"])
            proto, host, client = pairs.get("proto"), pairs.get("host"), pairs.get("for")
        else:
            proto = environ.get("HTTP_X_FORWARDED_PROTO")
            host = environ.get("HTTP_X_FORWARDED_HOST")
            client = environ.get("HTTP_X_FORWARDED_FOR")
        if proto:
            environ["wsgi.url_scheme"] = proto.strip().lower()
        if host:
            environ["HTTP_HOST"] = host.strip()
        if client:
            # The caller: the first address of a list each proxy appended to.
            environ["REMOTE_ADDR"] = client.split(",", 1)[0].strip()
        prefix = environ.get("HTTP_X_FORWARDED_PREFIX")
        if prefix:
            environ["SCRIPT_NAME"] = prefix.rstrip("/") + environ.get("SCRIPT_NAME", "")
        return self.app(environ, start_response)
