"""Providers created at once under one name: exactly one is created and
every other creator is told the name is taken (409), never a 500, on
every backend (MariaDB refuses the duplicate INSERT, PostgreSQL and
SQLite skip it)."""
from __future__ import annotations

import threading
import uuid

from placement_lite import errors
from placement_lite.ledger import providers


def test_one_of_many_creators_of_a_name_wins(db):
    creators = 6
    barrier = threading.Barrier(creators)
    outcomes: list = []

    def create():
        barrier.wait()
        try:
            made = db.run_write(lambda conn: providers.create_provider(
                conn, "contested", str(uuid.uuid4())))
            outcomes.append(made)
        except Exception as exc:  # recorded and checked below
            outcomes.append(exc)

    threads = [threading.Thread(target=create) for _ in range(creators)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    made = [o for o in outcomes if isinstance(o, providers.Provider)]
    refused = [o for o in outcomes if isinstance(o, errors.DuplicateName)]
    assert len(made) == 1 and len(refused) == creators - 1, outcomes
    assert all("Conflicting resource provider name: contested" in str(e.detail)
               for e in refused)
    with db.read() as conn:
        stored = providers.get_by_uuid(conn, made[0].uuid)
    assert stored == providers.Provider(**{**made[0].__dict__,
                                           "created_at": stored.created_at})
    assert stored.root_id == stored.id and stored.root_uuid == stored.uuid


def test_a_taken_uuid_is_named_before_a_taken_name(db):
    first = db.run_write(lambda conn: providers.create_provider(conn, "one"))
    db.run_write(lambda conn: providers.create_provider(conn, "two"))
    for name in ("two", "three"):
        try:
            db.run_write(lambda conn: providers.create_provider(conn, name, first.uuid))
        except errors.DuplicateName as exc:
            assert f"uuid: {first.uuid} already exists" in exc.detail
        else:
            raise AssertionError("a taken uuid was accepted")
