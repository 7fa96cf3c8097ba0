"""A TCP forwarder between the service and its database server, for
tests that need the server to go away the way a dead node does.

`cut()` resets every forwarded connection (the client sees "connection
reset by peer" in the middle of whatever it was doing) and refuses new
ones until `restore()`: what a client of a Galera node, or of a database
whose host went down, sees. The database server itself is never touched,
so other tests and other users of it carry on.
"""
from __future__ import annotations

import socket
import struct
import threading
from sqlalchemy.engine import make_url


def _reset(sock: socket.socket) -> None:
    """Close with an RST rather than a FIN, as a host that died does.

    shutdown() first: a close() alone would not wake the pump thread
    blocked reading the socket, and until it wakes the kernel keeps the
    connection open (the database server would go on holding the locks of
    a transaction whose client is gone)."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


class Proxy:
    def __init__(self, url: str):
        parsed = make_url(url)
        default = 3306 if parsed.get_backend_name() == "mysql" else 5432
        self.target = (parsed.host or "127.0.0.1", parsed.port or default)
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self.port = 0
        self.restore()
        self.url = parsed.set(host="127.0.0.1", port=self.port).render_as_string(
            hide_password=False)

    def restore(self) -> None:
        """Accept connections again (on the same port)."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(128)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        """Reset every forwarded connection; refuse new ones."""
        with self._lock:
            listener, self._listener = self._listener, None
            sockets, self._open = self._open, set()
        if listener is not None:
            _reset(listener)
        for sock in sockets:
            _reset(sock)

    def close(self) -> None:
        self.cut()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _addr = listener.accept()
            except OSError:
                return  # cut
            try:
                server = socket.create_connection(self.target, timeout=10)
                server.settimeout(None)
            except OSError:
                _reset(client)
                continue
            with self._lock:
                if self._listener is not listener:
                    _reset(client)
                    _reset(server)
                    return
                self._open.update((client, server))
            for src, dst in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        # One side ended: end the other, as the peer would see it.
        with self._lock:
            self._open.discard(src)
            self._open.discard(dst)
        for sock in (src, dst):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                sock.close()
            except OSError:
                pass
