"""`placement-lite serve` in a child process, for the suite and the
matrix; and a reference server beside one (bench/complete.py)."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

from bench import complete, runner
from bench.client import Client

# The tree this bench/ belongs to: a server started without an `env` of
# its own runs this tree's placement_lite, not whichever one the
# interpreter would otherwise import (an editable install of another
# checkout, say).
TREE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tree_env(tree=TREE, base=None, **extra):
    """`base` (the environment) with `tree` first on PYTHONPATH, plus
    `extra` variables."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(
        [tree] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                  if p and p != tree])
    env.update(extra)
    return env


class ServerProcess:
    """A server on 127.0.0.1:`port`, ready once /healthcheck answers 200.

    `env` and `cwd` choose the code it runs (the matrix starts each side
    with its own tree on PYTHONPATH; without them, this bench's own tree);
    `extra` goes on the command line. `command` runs another server
    instead (OpenStack Placement's, bench/placement16.py), ready once
    `health` answers 200; `log`: a file for its output (else discarded).
    """

    def __init__(self, db_url, port, workers=1, extra=(), env=None, cwd=None,
                 name="the server", command=None, health="/healthcheck", log=None):
        # Another server on the port would answer the health check in this
        # one's place (and be measured instead of it).
        with socket.socket() as probe:
            # As the server will: a closed connection's TIME_WAIT is no owner.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("127.0.0.1", port))
            except OSError as exc:
                raise RuntimeError(f"{name}: port {port} is taken ({exc}); "
                                   "give another --port") from None
        self.http = f"http://127.0.0.1:{port}"
        command = command or [
            sys.executable, "-m", "placement_lite.cli", "serve", "--db", db_url,
            "--port", str(port), "--workers", str(workers), "--log-level", "WARNING"]
        out = open(log, "ab") if log else subprocess.DEVNULL
        try:
            self.proc = subprocess.Popen(
                [*command, *extra], env=tree_env() if env is None else env,
                cwd=cwd or TREE, stdout=out, stderr=subprocess.STDOUT if log else out)
        finally:
            if log:
                out.close()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                if Client(self.http).get(health)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        self._end()
        raise RuntimeError(f"{name} did not start")

    def pids(self):
        """The server and its worker processes."""
        found = [self.proc.pid]
        try:
            with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as fh:
                found += [int(p) for p in fh.read().split()]
        except OSError:
            pass
        return found

    def cpu(self):
        return runner.cpu_seconds(self.pids())

    def stop(self):
        self._end()

    def _end(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Reference(ServerProcess):
    """A server of one worker over another server's database that reads
    every fact from the database (PLACEMENT_LITE_FACTS_IN_MEMORY=false):
    what the database holds, asked of the same code's SQL path. Give it
    the `extra` arguments bounding answers that the server under test has
    (--max-allocation-candidates), so both answer to the same bound."""

    def __init__(self, db_url, env=None, cwd=None, extra=(), name="the reference server"):
        env = dict(tree_env() if env is None else env,
                   PLACEMENT_LITE_FACTS_IN_MEMORY="false")
        super().__init__(db_url, free_port(), 1, extra, env=env, cwd=cwd, name=name)
        self.client = Client(self.http)

    def count(self, path: str) -> int:
        status, raw = self.client.raw("GET", path)
        if status != 200:
            raise RuntimeError(f"the reference server answered GET {path} with "
                               f"{status}: {raw[:300]!r}")
        return complete.candidates_in(raw)
