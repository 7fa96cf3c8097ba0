"""Races over the ledger itself, for the concurrency tests: real processes
(spawned, each with its own engine and pool), each running racing
threads over one Database, every thread a worker that writes until the
room is gone and keeps count of how each write went in a dict `out`
shared by its process:
  out["granted"]     what the worker's writes were granted
  out["gave_up"]     writes that lost their race every time they were tried
  out["unexpected"]  any other error (the test reports every one)
"""
from __future__ import annotations

import multiprocessing
import threading

from placement_lite import errors
from placement_lite.db.engine import Database


def one_write(write, refused, out: dict, lock: threading.Lock) -> str | None:
    """Call `write` (which writes in a transaction of its own) as a racing
    worker does: "granted"; "refused" when it raised `refused` (an error
    class or a tuple of them: the room is gone); "lost" when it lost its
    race every time (counted in out["gave_up"]); None when it failed
    otherwise (kept in out["unexpected"]): the worker should stop."""
    try:
        write()
    except refused:
        return "refused"
    except errors.ConcurrentUpdate:
        with lock:
            out["gave_up"] += 1
        return "lost"
    except Exception as exc:  # noqa: BLE001 - the test reports every one
        with lock:
            out["unexpected"].append(repr(exc))
        return None
    return "granted"


def in_threads(url: str, work, thread_args: list, out: dict, queue, label) -> None:
    """In this process: work(db, *args, out, lock) in a thread for each
    `args` of `thread_args`, all over one Database at `url` (a pooled
    connection each) and one lock; then (label, out) put on `queue`."""
    db = Database(url, pool_size=len(thread_args))
    lock = threading.Lock()
    try:
        threads = [threading.Thread(target=work, args=(db, *args, out, lock))
                   for args in thread_args]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    except Exception as exc:  # noqa: BLE001
        out["unexpected"].append(repr(exc))
    finally:
        db.dispose()
        queue.put((label, out))


def in_processes(target, process_args: list, timeout: float) -> list:
    """target(*args, queue) in a spawned process for each `args` of
    `process_args`; the (label, out) each put on the queue, in the order
    they came, once every process has exited cleanly and no worker met an
    unexpected error."""
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args, queue)) for args in process_args]
    for proc in procs:
        proc.start()
    results = [queue.get(timeout=timeout) for _ in procs]
    for proc in procs:
        proc.join(timeout=30)
        assert proc.exitcode == 0
    unexpected = [e for _label, out in results for e in out["unexpected"]]
    assert not unexpected, unexpected
    return results
