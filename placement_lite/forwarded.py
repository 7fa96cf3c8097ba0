"""Forwarding headers (X-Forwarded-*, Forwarded) believed only when the
peer is one of the proxies the operator named (`trusted_proxy`).

waitress translates these headers itself (the scheme, host, port and
client address of the request become the ones the proxy reports) but for
a single peer address; a deployment's proxies are often several (a pair of
load balancers, a subnet of ingress pods). So the peer is checked here, and
waitress' own translation is handed the request either as trusted or as
not: a trusted peer's headers named in `trusted_proxy_headers` rewrite the
request, and every forwarding header that is not believed is removed
before the application sees it (unless `clear_untrusted_proxy_headers` is
off). The application then reads only the WSGI environ's scheme, which is
why the console's `Secure` cookie can be trusted to mean "the browser used
HTTPS"."""
from __future__ import annotations

import ipaddress
from typing import Optional

from placement_lite.config import Settings


def _peer(environ) -> Optional[ipaddress._BaseAddress]:
    try:
        address = ipaddress.ip_address(environ.get("REMOTE_ADDR") or "")
    except ValueError:
        return None  # not an IP peer (a Unix socket): never a trusted proxy
    # A dual-stack listener reports IPv4 peers as ::ffff:a.b.c.d.
    mapped = getattr(address, "ipv4_mapped", None)
    return mapped or address


def trusting(app, settings: Settings):
    """`app` behind the trusted-proxy check (waitress must then be told
    neither trusted_proxy nor clear_untrusted_proxy_headers, or it would
    apply its own on top)."""
    from waitress.proxy_headers import proxy_headers_middleware

    clear = settings.clear_untrusted_proxy_headers
    doubted = proxy_headers_middleware(app, trusted_proxy=None, clear_untrusted=clear)
    if not settings.trusted_proxy:
        return doubted if clear else app
    believed = proxy_headers_middleware(
        app, trusted_proxy="*", trusted_proxy_count=settings.trusted_proxy_count,
        trusted_proxy_headers={h.lower() for h in settings.trusted_proxy_headers},
        clear_untrusted=clear)
    networks = [ipaddress.ip_network(a, strict=False) for a in settings.trusted_proxy]

    def forwarded(environ, start_response):
        peer = _peer(environ)
        trusted = peer is not None and any(peer in net for net in networks)
        return (believed if trusted else doubted)(environ, start_response)
    return forwarded
