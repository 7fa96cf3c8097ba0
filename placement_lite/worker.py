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
from placement_lite.forwarded import trusting
from placement_lite.startup import connection_slots

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
        wasyncore.loop(timeout=0.05, map=server._map, count=1, use_poll=True)
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


def _create_server(settings: Settings, app, sock: socket.socket):
    import waitress

    from placement_lite.linger import LingeringChannel

    server = waitress.create_server(
        app, sockets=[sock], threads=settings.threads, ident="placement-lite",
        # Bodies a little over the API's limit still get the API's own 413
        # (InputLimitsMiddleware); far larger ones are refused by waitress
        # before they are buffered.
        max_request_body_size=max(4 * settings.max_body_bytes, 8 * 1024 * 1024),
        # waitress counts its listening socket and its wake-up pipe among
        # the connections; the setting counts clients.
        connection_limit=connection_slots(settings) + 2,
        channel_timeout=settings.channel_timeout,
        # How often idle connections are looked for: an idle one is closed
        # after channel_timeout plus up to a quarter of it (1 to 10 s).
        cleanup_interval=max(1, min(10, settings.channel_timeout // 4)),
        backlog=settings.backlog,
        # select() cannot watch a descriptor numbered 1024 or above, which
        # a worker holding more than ~1000 connections has; poll() can.
        asyncore_use_poll=True,
        # Done by trusting(), for any number of proxies.
        trusted_proxy=None, clear_untrusted_proxy_headers=False)
    # An answer refusing a request still being sent must reach its client.
    server.channel_class = LingeringChannel
    return server


def _guard_listener(server, stop: list) -> None:
    """Accept in batches; and once the supervisor has shut the shared
    listening socket down (stopping every worker), neither accept on it nor
    close it from the loop: the drain owns it."""
    accept = server.handle_accept

    def handle_accept():
        # Stopping: accept() would fail; what is queued is refused anyway.
        if stop:
            return
        # waitress takes one connection per turn of its loop, and a turn
        # looks at every open connection: a burst of 1,000 (clients coming
        # back after a restart) took ~1 s to be taken in, during which the
        # queue held everyone else. So take what is queued, up to the free
        # slots, in one turn.
        room = server.adj.connection_limit - len(server._map)
        for _ in range(max(1, min(room, 128))):
            held = len(server._map)
            accept()
            if len(server._map) == held:  # nothing queued, or refused
                break

    def handle_close():
        # poll() reports the shut listener as hung up, and waitress' own
        # handler would close it under the drain (and warn). Stop watching
        # it; new connections are refused by the shutdown already.
        server.accepting = False
        server.del_channel()
    server.handle_accept = handle_accept
    server.handle_close = handle_close


def run_worker(settings: Settings, sock: socket.socket, db: Optional[Database] = None,
               worker: Optional[int] = None, app=None) -> None:
    """Serve on `sock` until SIGTERM/SIGINT, then drain."""
    from waitress import wasyncore

    app = app or build_wsgi(settings, db, worker=worker, warm=True)
    # What start-up built lives as long as the process: keep it out of the
    # collector's full scans, which large answers (thousands of candidates)
    # would otherwise trigger over and over (~25% of their CPU).
    gc.freeze()
    # proxy_headers (Placement's enable_proxy_headers_parsing) believes
    # every peer's forwarding headers, as Placement does: they reach the
    # app (api/proxy_headers.py) untouched. Otherwise only the trusted
    # proxies' are believed (forwarded.py).
    served = app if settings.proxy_headers else trusting(app, settings)
    server = _create_server(settings, served, sock)
    _await_idle_threads(server.task_dispatcher)
    stop: list[int] = []

    def on_signal(signum, _frame):
        # Only note it and wake the loop: raising here could surface inside
        # a channel's handler, which would swallow it and drop that client.
        stop.append(signum)
        server.pull_trigger()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    _guard_listener(server, stop)
    while not stop:
        wasyncore.loop(timeout=server.adj.asyncore_loop_timeout,
                       map=server._map, count=1, use_poll=True)
    LOG.info("stopping: finishing requests in flight")
    _drain(server, settings.shutdown_timeout)
