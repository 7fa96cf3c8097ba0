"""One serving process: waitress on a listening socket it may share with
other workers, until SIGTERM or SIGINT; then it stops accepting, finishes
the requests in flight and returns."""
from __future__ import annotations

import gc
import logging
import signal
import socket
import time
from typing import Optional

from placement_lite.app import build_wsgi
from placement_lite.config import Settings
from placement_lite.db.engine import Database

# Logged under the server's name, as before this lived apart from it:
# operators' log filters name it.
LOG = logging.getLogger("placement_lite.server")


def _drain(server, timeout: float) -> None:
    """Stop accepting, let requests in flight finish, close idle keep-alives."""
    from waitress import wasyncore

    server.accepting = False
    server.del_channel()
    # Close this process's handle on the listening socket now, not at exit:
    # once no process holds it (the supervisor shuts it down for all of
    # them), a new connection is refused at once instead of waiting in the
    # kernel's queue for a process that will never accept it.
    try:
        server.socket.close()
    except OSError:
        pass
    deadline = time.monotonic() + timeout
    while server.active_channels and time.monotonic() < deadline:
        for channel in list(server.active_channels.values()):
            if (not channel.requests and channel.request is None
                    and not channel.total_outbufs_len):
                channel.will_close = True
        wasyncore.loop(timeout=0.05, map=server._map, count=1)
    if server.active_channels:
        LOG.warning("%d connection(s) still open after %.0fs; closing them",
                    len(server.active_channels), timeout)
    server.task_dispatcher.shutdown(cancel_pending=True,
                                    timeout=max(0.0, deadline - time.monotonic()))


def _await_idle_threads(dispatcher, timeout: float = 2.0) -> None:
    """Return once every waitress thread waits for work (or at `timeout`).

    waitress counts a thread as busy from its start until it first waits
    for a task, and warns ("Task queue depth is 1") when a task finds no
    idle thread. The listening socket takes connections before the server
    starts its threads, so the first request (a health probe, a client
    that connected during start-up) is handed over within a millisecond of
    their start, finds all of them still "busy" and is reported as queued
    although nothing else was running. Accepting only once they are idle
    keeps the warning for what it is for, a request that waited because
    every thread was serving another, without raising its logger's level.
    """
    deadline = time.monotonic() + timeout
    while dispatcher.active_count > 0 and time.monotonic() < deadline:
        time.sleep(0.001)


def run_worker(settings: Settings, sock: socket.socket, db: Optional[Database] = None,
               worker: Optional[int] = None, app=None) -> None:
    """Serve on `sock` until SIGTERM/SIGINT, then drain."""
    import waitress
    from waitress import wasyncore

    app = app or build_wsgi(settings, db, worker=worker, warm=True)
    # What start-up built lives as long as the process: keep it out of the
    # collector's full scans, which large answers (thousands of candidates)
    # would otherwise trigger over and over (~25% of their CPU).
    gc.freeze()
    server = waitress.create_server(
        app, sockets=[sock], threads=settings.threads, ident="placement-lite",
        # Bodies a little over the API's limit still get the API's own 413
        # (InputLimitsMiddleware); far larger ones are refused by waitress
        # before they are buffered.
        max_request_body_size=max(4 * settings.max_body_bytes, 8 * 1024 * 1024),
        # Waitress drops Forwarded / X-Forwarded-* unless told they are
        # trusted; with proxy_headers, the app reads them (api/proxy_headers.py).
        clear_untrusted_proxy_headers=not settings.proxy_headers)
    _await_idle_threads(server.task_dispatcher)
    stop: list[int] = []

    def on_signal(signum, _frame):
        # Only note it and wake the loop: raising here could surface inside
        # a channel's handler, which would swallow it and drop that client.
        stop.append(signum)
        server.pull_trigger()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    accept = server.handle_accept

    def handle_accept():
        # Stopping: the supervisor may have shut the shared listener down
        # (accept() would fail); what is queued there is refused anyway.
        if not stop:
            accept()
    server.handle_accept = handle_accept
    while not stop:
        wasyncore.loop(timeout=server.adj.asyncore_loop_timeout,
                       map=server._map, count=1)
    LOG.info("stopping: finishing requests in flight")
    _drain(server, settings.shutdown_timeout)
