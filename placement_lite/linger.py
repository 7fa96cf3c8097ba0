"""Close a connection without throwing away the answer just sent.

waitress refuses a request it stops reading (a head past 256 kB: 431;
a body past its limit: 413) by sending the answer and closing. When the
client is still sending, the closed socket has unread data, and the
kernel then answers with a reset instead of a FIN: the client's send
fails, or its read does, and the answer is lost. A client sending a 15 MB
URL saw "connection reset by peer" rather than 431.

So a channel that closes with unread data first lingers, as web servers
do: the write side is shut (the answer, then FIN), and what the client
still sends is read and dropped until it stops, for a few seconds and a
few megabytes at most, on a thread of its own so the serving loop never
waits. Normal closes (nothing unread) are untouched. The number of
connections lingering at once is bounded; past it, one is closed at once
as before.
"""
from __future__ import annotations

import socket
import threading
import time

from waitress.channel import HTTPChannel

SECONDS = 5.0
BYTES = 64 * 1024 * 1024
AT_ONCE = 16

_slots = threading.BoundedSemaphore(AT_ONCE)


def _unread(sock: socket.socket) -> bool:
    try:
        return bool(sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except OSError:  # nothing waiting (EAGAIN), or the peer is gone
        return False


def _drain(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + SECONDS
        taken = 0
        while taken < BYTES:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            sock.settimeout(left)
            chunk = sock.recv(256 * 1024)
            if not chunk:
                break
            taken += len(chunk)
    except OSError:
        pass
    finally:
        sock.close()
        _slots.release()


class LingeringChannel(HTTPChannel):
    """waitress' channel, lingering on close while the client still sends."""

    def handle_close(self):
        kept = None
        sock = self.socket
        if sock is not None and self.connected and _unread(sock) and _slots.acquire(
                blocking=False):
            try:
                # The channel closes its own descriptor; the duplicate
                # keeps the connection open for the drain.
                kept = sock.dup()
            except OSError:
                _slots.release()
        super().handle_close()
        if kept is not None:
            threading.Thread(target=_drain, args=(kept,), name="linger",
                             daemon=True).start()
