"""A small keep-alive JSON client over http.client, one per thread."""
from __future__ import annotations

import http.client
import json
import time
from urllib.parse import urlsplit


class Client:
    def __init__(self, url: str, version: str = "latest", token: str = "admin"):
        parts = urlsplit(url)
        self.host = parts.hostname
        self.port = parts.port or 80
        self.prefix = parts.path.rstrip("/")
        self.headers = {"x-auth-token": token, "accept": "application/json",
                        "content-type": "application/json",
                        "openstack-api-version": f"placement {version}"}
        self.conn = None

    def _connect(self):
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=120)

    def request(self, method: str, path: str, body=None):
        status, raw = self.raw(method, path, body)
        return status, (json.loads(raw) if raw else None)

    def raw(self, method: str, path: str, body=None):
        """(status, body bytes): the response as it arrived, unparsed."""
        data = json.dumps(body).encode() if body is not None else None
        for attempt in range(3):
            if self.conn is None:
                self._connect()
            try:
                self.conn.request(method, self.prefix + path, body=data,
                                  headers=self.headers)
                resp = self.conn.getresponse()
                return resp.status, resp.read()
            except (http.client.HTTPException, ConnectionError, OSError):
                self.conn.close()
                self.conn = None
                if attempt == 2:
                    raise
                time.sleep(0.05)

    def exchange(self, method: str, path: str, body=None):
        """(status, body bytes, headers with lower-case names), in one
        attempt: a write is never sent twice."""
        data = json.dumps(body).encode() if body is not None else None
        if self.conn is None:
            self._connect()
        self.conn.request(method, self.prefix + path, body=data, headers=self.headers)
        resp = self.conn.getresponse()
        raw = resp.read()
        return resp.status, raw, {k.lower(): v for k, v in resp.getheaders()}

    def get(self, path):
        return self.request("GET", path)

    def put(self, path, body):
        return self.request("PUT", path, body)

    def post(self, path, body):
        return self.request("POST", path, body)

    def timed_get(self, path):
        """(seconds until the whole response arrived, status, parsed body);
        the client's own JSON parsing is not part of the time."""
        start = time.perf_counter()
        status, raw = self.raw("GET", path)
        elapsed = time.perf_counter() - start
        return elapsed, status, (json.loads(raw) if raw else None)
