"""Reading a reservation's drawn allocations goes through the index on
`allocations.reservation_id` whatever the planner's statistics say.

Nearly every allocation is open (reservation_id NULL). SQLite's ANALYZE
(or `PRAGMA optimize`, which SQLite recommends running now and then)
records that as one value held by every row, and its planner then reads
a lookup of one reservation's rows as a scan of all the allocations
(150 ms a claim at 300,000 allocations). An index of the rows that name
a reservation (partial, where the backend has them) holds only those.
"""
from __future__ import annotations

import pytest
from sqlalchemy import insert

from placement_lite.db import tables as t
from placement_lite.ledger import draws
from tests import factories


@pytest.fixture
def sqlite_db(db, backend):
    if backend != "sqlite":
        pytest.skip("the query plans of SQLite's statistics")
    return db



# What ANALYZE wrote for the allocations of the bench's full cloud:
# 300,000 rows, every one open; 10 a provider and class.
CLOUD_STATS = {"ix_allocations_reservation": "300000 300000",
               "ix_allocations_consumer_rc_used": "300000 3 1 1",
               "ix_allocations_rp_rc_used": "300000 30 10 10",
               "ix_allocations_rc": "300000 100000"}


def test_one_reservations_allocations_are_read_by_index_after_analyze(sqlite_db):
    with sqlite_db.write() as conn:
        rp = factories.provider_with(conn, VCPU=1000)["id"]
        rc = factories.class_id(conn, "VCPU")
        consumer = conn.execute(insert(t.consumers).values(
            uuid="c0000000-0000-0000-0000-000000000000",
            project_id=conn.execute(insert(t.projects).values(
                external_id="p")).inserted_primary_key[0],
            user_id=conn.execute(insert(t.users).values(
                external_id="u")).inserted_primary_key[0],
            generation=0)).inserted_primary_key[0]
        conn.execute(insert(t.allocations), [
            {"resource_provider_id": rp, "consumer_id": consumer,
             "resource_class_id": rc, "used": 1} for _ in range(20)])
        conn.exec_driver_sql("ANALYZE")
        # The statistics of a cloud, which the planner reads as they are.
        for index, stat in CLOUD_STATS.items():
            conn.exec_driver_sql(
                "UPDATE sqlite_stat1 SET stat = ? WHERE tbl = 'allocations' AND idx = ?",
                (stat, index))
        # Read again by this connection (others read them when they open).
        conn.exec_driver_sql("ANALYZE sqlite_schema")
        sql = str(draws._DRAWN.params(ids=[1]).compile(
            dialect=conn.dialect, compile_kwargs={"literal_binds": True}))
        plan = " ".join(str(row[-1]) for row in
                        conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql))
        assert "ix_allocations_reservation" in plan, plan
        assert conn.execute(draws._DRAWN, {"ids": [1]}).all() == []
