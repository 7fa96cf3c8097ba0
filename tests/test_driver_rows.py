"""db.engine.driver_rows: a statement's rows as the driver's tuples, on
every backend, with SQLAlchemy's counting and error translation kept and
the connection usable after."""
from __future__ import annotations

import pytest
from sqlalchemy import bindparam, select, text, update
from sqlalchemy.exc import DBAPIError

from placement_lite.db import tables as t
from placement_lite.db.engine import StatementCounter, driver_rows
from tests import factories

INV = t.inventories
USED = (select(INV.c.resource_provider_id, INV.c.resource_class_id, INV.c.used)
        .where(INV.c.resource_provider_id.between(bindparam("lo"), bindparam("hi")))
        .order_by(INV.c.resource_provider_id, INV.c.resource_class_id))


@pytest.fixture
def world(db):
    with db.write() as conn:
        rps = [factories.provider_with(conn, VCPU=8, MEMORY_MB=4096) for _ in range(3)]
        conn.execute(update(INV).where(INV.c.resource_provider_id == rps[1]["id"])
                     .values(used=3))
    return rps


def test_the_rows_are_the_drivers_tuples_equal_to_sqlalchemys(db, world):
    with db.read() as conn:
        lo, hi = world[0]["id"], world[-1]["id"]
        got = driver_rows(conn, USED, {"lo": lo, "hi": hi})
        want = [tuple(row) for row in conn.execute(USED, {"lo": lo, "hi": hi})]
    assert list(got) == want
    assert len(got) == 6
    assert {type(v) for row in got for v in row} == {int}
    assert all(type(row) is tuple for row in got)
    assert sorted(n for rp, _rc, n in got if rp == world[1]["id"]) == [3, 3]


def test_an_empty_answer_and_the_connection_after_it(db, world):
    with db.read() as conn:
        assert list(driver_rows(conn, USED, {"lo": -2, "hi": -1})) == []
        # The result was closed: the same connection runs the next
        # statement (mysqlclient refuses one with rows left unread).
        again = driver_rows(conn, USED, {"lo": world[0]["id"], "hi": world[0]["id"]})
        assert len(again) == 2
        assert conn.scalar(select(t.resource_providers.c.uuid).where(
            t.resource_providers.c.id == world[0]["id"])) == world[0]["uuid"]


def test_statements_are_counted_and_errors_translated(db, world):
    counter = StatementCounter()
    counter.install(db.engine)
    with db.read() as conn:
        counter.reset()
        driver_rows(conn, USED, {"lo": 0, "hi": 10**9})
        assert counter.count() == 1
    with pytest.raises(DBAPIError):
        with db.read() as conn:
            driver_rows(conn, text("SELECT no_such_column FROM inventories"))
