"""`placement-lite serve` in a child process, for the suite and the matrix."""
from __future__ import annotations

import signal
import subprocess
import sys
import time

from bench import runner
from bench.client import Client


class ServerProcess:
    """A server on 127.0.0.1:`port`, ready once /healthcheck answers 200.

    `env` and `cwd` choose the code it runs (the matrix starts each side
    with its own tree on PYTHONPATH); `extra` goes on the command line.
    """

    def __init__(self, db_url, port, workers=1, extra=(), env=None, cwd=None,
                 name="the server"):
        self.http = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "placement_lite.cli", "serve", "--db", db_url,
             "--port", str(port), "--workers", str(workers),
             "--log-level", "WARNING", *extra], env=env, cwd=cwd,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if Client(self.http).get("/healthcheck")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
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
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
