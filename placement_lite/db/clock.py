""""Now", as the database says it: whole seconds since the epoch, UTC.

Reservations start and end at instants, and two processes whose clocks
disagree must still agree on whether a reservation has ended and on who
won a race for its room. So no process reads its own clock for that: the
decision is made in SQL, against the database server's clock, inside the
transaction that acts on it.
"""
from __future__ import annotations

from sqlalchemy import BigInteger, cast, func, select
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement


def now_expr(dialect_name: str) -> ColumnElement:
    """A SQL expression for the database's current time in whole seconds
    (floored). PostgreSQL's now() is the transaction's start, which is
    what a decision made in that transaction should see; clock_timestamp()
    would let one transaction see two different instants."""
    if dialect_name == "sqlite":
        return cast(func.strftime("%s", "now"), BigInteger)
    if dialect_name in ("mysql", "mariadb"):
        return cast(func.unix_timestamp(), BigInteger)
    if dialect_name == "postgresql":
        return cast(func.floor(func.extract("epoch", func.now())), BigInteger)
    raise ValueError(f"no clock for the {dialect_name} dialect")


def now(conn: Connection) -> int:
    """The database's current time, in whole seconds since the epoch."""
    return int(conn.execute(select(now_expr(conn.dialect.name))).scalar_one())


__all__ = ["now", "now_expr"]
