"""A real waitress server for the app, on a free loopback port, in a
thread: for clients (oslo.limit, Blazar) that must talk HTTP to us."""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

import waitress.server
from waitress import wasyncore


@contextmanager
def served(app, threads: int = 4) -> Iterator[str]:
    """Serve `app`; yield its base URL; stop at once on exit."""
    srv = waitress.server.create_server(app, host="127.0.0.1", port=0,
                                        threads=threads)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.effective_port}"
    finally:
        # Closing the listener alone leaves keep-alive channels (an SDK
        # session holds one) in the map, and the loop runs until they time
        # out. Closing every channel from the loop's own thread, woken
        # through the trigger, ends the loop at once.
        try:
            srv.trigger.pull_trigger(lambda: wasyncore.close_all(srv._map))
        except OSError:
            # Its pipe already closed (seen once in a full run, under
            # load): the loop is ending or gone; close what is left here.
            wasyncore.close_all(srv._map)
        thread.join(timeout=5)
        srv.task_dispatcher.shutdown()
