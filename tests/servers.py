"""Run `placement-lite serve` as a real process for tests, and talk to it."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager

LISTEN_RE = re.compile(r"listening on http://([^/]+)/")


class Served:
    def __init__(self, proc: subprocess.Popen, base: str):
        self.proc = proc
        self.base = base
        self.lines: list[str] = []

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def request(self, method: str, path: str, body=None, headers=None,
                token: str | None = "admin", version: str | None = None,
                timeout: float = 10.0):
        """(status, headers, parsed body or text)."""
        data = None
        hdrs = dict(headers or {})
        if token is not None:
            hdrs.setdefault("X-Auth-Token", token)
        if version is not None:
            hdrs["OpenStack-API-Version"] = f"placement {version}"
        if body is not None:
            data = json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers=hdrs)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                status, rhdrs, raw = resp.status, resp.headers, resp.read()
        except urllib.error.HTTPError as err:
            status, rhdrs, raw = err.code, err.headers, err.read()
        text = raw.decode("utf-8", "replace")
        try:
            parsed = json.loads(text) if text else None
        except ValueError:
            parsed = text
        return status, rhdrs, parsed

    def wait_for_line(self, pattern: str, timeout: float = 15.0, after: int = 0) -> str:
        deadline = time.monotonic() + timeout
        rx = re.compile(pattern)
        while time.monotonic() < deadline:
            for line in self.lines[after:]:
                if rx.search(line):
                    return line
            time.sleep(0.05)
        raise AssertionError(f"no line matching {pattern!r} in:\n{self.output}")


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "placement_lite.cli", *args]


def start(db_url: str | None, *args: str, env: dict | None = None) -> Served:
    """Start the service on a free port, without waiting for it (db_url
    None: on the default database)."""
    full_env = {k: v for k, v in os.environ.items()
                if not k.startswith("PLACEMENT_LITE_") or k == "PLACEMENT_LITE_TEST_DB_URLS"}
    full_env.update(env or {})
    db = ["--db", db_url] if db_url is not None else []
    proc = subprocess.Popen(
        command("serve", *db, "--host", "127.0.0.1", "--port", "0", *args),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=full_env,
        # Its own process group, so a test can signal it like a terminal would.
        start_new_session=True)
    served = Served(proc, "")

    def pump():
        for line in proc.stdout:
            served.lines.append(line.rstrip("\n"))
    served.reader = threading.Thread(target=pump, daemon=True)
    served.reader.start()
    return served


def ready(served: Served, timeout: float = 60.0) -> Served:
    line = served.wait_for_line(r"listening on http://", timeout=timeout)
    served.base = "http://" + LISTEN_RE.search(line).group(1)
    return served


def stop(served: Served) -> None:
    proc = served.proc
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(timeout=30)
    served.reader.join(timeout=5)


@contextmanager
def serve(db_url: str | None, *args: str, env: dict | None = None, startup: float = 60.0):
    """Start the service on a free port; yield a Served; stop it after."""
    served = start(db_url, *args, env=env)
    try:
        yield ready(served, startup)
    finally:
        stop(served)


def children(pid: int) -> list[int]:
    """Direct children of `pid`, from /proc."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(entry))
    return sorted(out)


def wait_until(predicate, timeout: float = 15.0, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("condition not met in time")
