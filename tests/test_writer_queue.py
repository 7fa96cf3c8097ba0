"""SQLite's writers wait their turn in the queue, not in SQLite.

A writer that finds an SQLite file locked sleeps in SQLite's busy
handler and looks again, leaving the lock free meanwhile; writers through
`Database.write` queue instead (`engine.WriterQueue`), across threads and
processes, and send nothing to SQLite until their turn. What shows it: a
writer whose turn has not come has not sent its `BEGIN IMMEDIATE`.
"""
from __future__ import annotations

import multiprocessing
import threading

import pytest
from sqlalchemy import text

from placement_lite.db.engine import Database
from tests.backends import fresh_database, statements_run

# Negative checks only: a writer that should be waiting is given this long
# to (wrongly) begin. A slow machine can only make the check pass late.
GRACE = 0.3


@pytest.fixture
def db():
    with fresh_database("sqlite") as database:
        yield database


def _hold_write(url, holding, release):
    """In another process: a worker of its own holds a write open."""
    other = Database(url)
    with other.write() as conn:
        conn.execute(text("UPDATE facts_heads SET floor = floor WHERE shard = 0"))
        holding.set()
        release.wait(30)
    other.dispose()


def _hold_inherited_turn(db, holding, release):
    """In a forked child: the parent's own queue object, inherited."""
    with db._queue.turn():
        holding.set()
        release.wait(30)


def _begins(sent):
    return [s for s in sent if s.startswith("BEGIN IMMEDIATE")]


def _write_in_thread(db):
    done = []

    def write():
        with db.write() as conn:
            conn.execute(text("UPDATE facts_heads SET floor = floor WHERE shard = 1"))
        done.append(True)
    thread = threading.Thread(target=write)
    thread.start()
    return thread, done


@pytest.mark.parametrize("holder", [_hold_write, _hold_inherited_turn],
                         ids=["another worker", "a forked child"])
def test_a_writer_sends_nothing_until_the_other_process_commits(db, holder):
    ctx = multiprocessing.get_context("fork")
    holding, release = ctx.Event(), ctx.Event()
    args = (db.url if holder is _hold_write else db, holding, release)
    child = ctx.Process(target=holder, args=args)
    child.start()
    try:
        assert holding.wait(30), "the other process never began its write"
        with statements_run(db) as sent:
            thread, done = _write_in_thread(db)
            thread.join(GRACE)
            # Waiting in the queue: nothing sent to SQLite yet.
            assert thread.is_alive() and not _begins(sent) and not done
            release.set()
            thread.join(30)
        assert done and len(_begins(sent)) == 1
    finally:
        release.set()
        child.join(30)
    assert child.exitcode == 0


def test_writers_of_one_process_take_turns(db):
    entered, release = threading.Event(), threading.Event()

    def hold():
        with db.write() as conn:
            conn.execute(text("UPDATE facts_heads SET floor = floor WHERE shard = 0"))
            entered.set()
            release.wait(30)
    holder = threading.Thread(target=hold)
    with statements_run(db) as sent:
        holder.start()
        try:
            assert entered.wait(30)
            thread, done = _write_in_thread(db)
            thread.join(GRACE)
            assert thread.is_alive() and len(_begins(sent)) == 1 and not done
        finally:
            release.set()
            holder.join(30)
        thread.join(30)
    assert done and len(_begins(sent)) == 2


def test_a_turn_taken_again_on_the_same_thread_does_not_wait_for_itself(db):
    # Through a second Database on the same file, too: one queue per file.
    again = Database(db.url)
    finished = []

    def nested():
        with db._queue.turn(), again._queue.turn():
            finished.append(True)
    thread = threading.Thread(target=nested)
    thread.start()
    thread.join(10)
    again.dispose()
    assert finished


def test_a_database_in_memory_has_no_queue():
    assert Database("sqlite://")._queue is None
