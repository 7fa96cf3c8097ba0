"""The parent of several workers: forks them onto one listening socket,
replaces the ones that die (backing off when one keeps dying at once) and
stops them all on SIGTERM or SIGINT."""
from __future__ import annotations

import logging
import os
import signal
import socket
import time
from typing import Callable

from placement_lite.config import Settings
from placement_lite.worker import run_worker

# Logged under the server's name, as before this lived apart from it:
# operators' log filters name it.
LOG = logging.getLogger("placement_lite.server")

# A worker that dies sooner than this after it started counts as a crash
# loop: the parent backs off before the next start instead of spinning.
_QUICK_DEATH_SECONDS = 2.0
_MAX_BACKOFF_SECONDS = 30.0


class Supervisor:
    """Forks the workers, replaces the ones that die, stops them all."""

    def __init__(self, settings: Settings, sock: socket.socket,
                 target: Callable[[Settings, socket.socket, int], None] = None):
        self.settings = settings
        self.sock = sock
        self.target = target or (lambda s, k, i: run_worker(s, k, worker=i))
        self.children: dict[int, tuple[int, float]] = {}  # pid -> (index, started)
        self.crashes = [0] * settings.workers
        self.stopping = False

    def _spawn(self, index: int) -> int:
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the worker
            code = 0
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                _stop_with_parent(parent)
                self.target(self.settings, self.sock, index)
            except BaseException:  # noqa: BLE001 - report, then exit non-zero
                LOG.exception("worker %d failed", index)
                code = 1
            finally:
                logging.shutdown()
                # Never return into the parent's code (or its atexit hooks).
                os._exit(code)
        self.children[pid] = (index, time.monotonic())
        LOG.info("worker %d started (pid %d)", index, pid)
        return pid

    def _on_signal(self, signum, _frame):
        self.stopping = True

    def _reap(self) -> list[tuple[int, int, float]]:
        dead = []
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            index, started = self.children.pop(pid, (None, 0.0))
            if index is None:
                continue
            (LOG.info if self.stopping else LOG.warning)(
                "worker %d (pid %d) exited with %s", index, pid, _describe(status))
            dead.append((index, status, time.monotonic() - started))
        return dead

    def run(self) -> int:
        previous = {s: signal.signal(s, self._on_signal)
                    for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            for index in range(self.settings.workers):
                self._spawn(index)
            restart_at: dict[int, float] = {}
            while not self.stopping:
                for index, _status, lived in self._reap():
                    if lived < _QUICK_DEATH_SECONDS:
                        self.crashes[index] += 1
                    else:
                        self.crashes[index] = 0
                    delay = min(_MAX_BACKOFF_SECONDS,
                                0.1 * (2 ** self.crashes[index]) - 0.1)
                    restart_at[index] = time.monotonic() + delay
                now = time.monotonic()
                for index, when in list(restart_at.items()):
                    if when <= now and not self.stopping:
                        del restart_at[index]
                        self._spawn(index)
                time.sleep(0.1)
            self._stop_all()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        return 0

    def _refuse_new_connections(self) -> None:
        """Stop the shared listening socket for every process at once:
        shutdown() acts on the socket, not on this process's handle, so new
        connections are refused while the workers finish what they hold."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _stop_all(self) -> None:
        for pid in list(self.children):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        # After the signals: a worker handles its SIGTERM before its next
        # look at the socket, so none tries to accept on a dead listener.
        self._refuse_new_connections()
        deadline = time.monotonic() + self.settings.shutdown_timeout + 5
        while self.children and time.monotonic() < deadline:
            self._reap()
            time.sleep(0.05)
        for pid in list(self.children):
            LOG.warning("worker pid %d did not stop in time; killing it", pid)
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            self.children.pop(pid, None)


def _stop_with_parent(parent: int) -> None:
    """Linux: have the kernel send SIGTERM if the supervisor dies, so a
    killed parent does not leave workers serving on unsupervised."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before prctl took effect
        os.kill(os.getpid(), signal.SIGTERM)


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return f"status {os.WEXITSTATUS(status)}"
