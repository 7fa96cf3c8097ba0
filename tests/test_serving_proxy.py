"""Behind a TLS proxy (issue 26): `serve --trusted-proxy` believes a
proxy's X-Forwarded-Proto or Forwarded, and only that proxy's, so the
console's cookie is `Secure` when the browser used HTTPS and not because a
caller said so. Through a real served process; a peer other than 127.0.0.1
is a client socket bound to another loopback address (127.0.0.2...)."""
from __future__ import annotations

import http.client

import pytest

from tests import servers

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def _login(served, peer: str, headers: dict) -> str:
    """The Set-Cookie of a console login sent from `peer`."""
    host, port = served.base.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10,
                                      source_address=(peer, 0))
    try:
        conn.request("POST", "/ui/login", body="token=admin",
                     headers={**FORM, **headers})
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 303, (resp.status, served.output[-2000:])
        return resp.getheader("Set-Cookie")
    finally:
        conn.close()


def _secure(cookie: str) -> bool:
    return "secure" in [part.strip().lower() for part in cookie.split(";")]


@pytest.fixture
def db_url(tmp_path):
    return f"sqlite:///{tmp_path / 'served.sqlite'}"


def test_a_trusted_proxys_forwarded_proto_makes_the_cookie_secure(db_url):
    https = {"X-Forwarded-Proto": "https"}
    with servers.serve(db_url, "--ui", "--trusted-proxy",
                       "127.0.0.1,127.0.0.3/32") as served:
        assert _secure(_login(served, "127.0.0.1", https))
        assert _secure(_login(served, "127.0.0.3", https))
        # The proxy said plain HTTP, or said nothing: not Secure.
        assert not _secure(_login(served, "127.0.0.1", {"X-Forwarded-Proto": "http"}))
        assert not _secure(_login(served, "127.0.0.1", {}))
        # Any other peer is a client speaking for itself: ignored.
        assert not _secure(_login(served, "127.0.0.2", https))
        # Only the headers trusted (x-forwarded-proto by default).
        assert not _secure(_login(served, "127.0.0.1", {"Forwarded": "proto=https"}))


@pytest.mark.parametrize("clear", ["--clear-untrusted-proxy-headers",
                                   "--no-clear-untrusted-proxy-headers"])
def test_without_a_trusted_proxy_forwarding_headers_are_ignored(db_url, clear):
    # Left in place (--no-clear-...), they reach the application, which
    # still goes by the scheme the server settled on.
    with servers.serve(db_url, "--ui", clear) as served:
        for header in ({"X-Forwarded-Proto": "https"}, {"Forwarded": "proto=https"}):
            assert not _secure(_login(served, "127.0.0.1", header)), header


def test_a_proxy_speaking_forwarded_is_believed_when_that_header_is_trusted(db_url):
    with servers.serve(db_url, "--ui", "--trusted-proxy", "127.0.0.0/31",
                       "--trusted-proxy-headers", "forwarded") as served:
        # A chain of two proxies: the last hop (ours) is the one believed.
        forwarded = {"Forwarded": "for=192.0.2.7;proto=http, for=198.51.100.1;proto=https"}
        assert _secure(_login(served, "127.0.0.1", forwarded))
        assert not _secure(_login(served, "127.0.0.1", {"X-Forwarded-Proto": "https"}))
        assert not _secure(_login(served, "127.0.0.2", forwarded))
