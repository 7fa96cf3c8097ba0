"""A connection lost during COMMIT: the outcome is unknown, and the caller
is told so (503, `placement.outcome_unknown`, how to find out) instead of
getting a 500 or a blind retry that could apply the write twice. (A
connection lost before COMMIT changed nothing: the server runs the write
again on a new connection; see tests/test_connection_lost.py.)

On SQLite the loss is simulated after the commit really happened (the
worst case: the claim is stored, the caller heard nothing). On MariaDB
and PostgreSQL the connection is really killed, from another connection,
just before COMMIT reaches the server: the outcome the caller must then
look up is "not stored".
"""
from __future__ import annotations

import logging
import sqlite3
import uuid

import falcon.testing
import pytest
from sqlalchemy import create_engine, event, text

from placement_lite.app import create_app
from placement_lite.config import Settings

LATEST = {"OpenStack-API-Version": "placement latest", "X-Auth-Token": "admin"}


class CommitFault:
    """Arms a one-shot connection loss on the next COMMIT of a write
    transaction of `db` (reads, which routes do before their writes, are
    left alone), and counts the write COMMITs attempted while armed."""

    def __init__(self, db):
        self.db = db
        self.dialect = db.engine.dialect
        self.original = self.dialect.do_commit
        self.armed = False
        self.writing = False
        self.commits = 0
        self.dialect.do_commit = self._do_commit
        event.listen(db.engine, "commit", self._on_commit)

    def restore(self):
        self.dialect.do_commit = self.original
        event.remove(self.db.engine, "commit", self._on_commit)

    def _on_commit(self, conn):
        # Fired just before the driver's commit, with the Connection whose
        # options say whether it is Database.write()'s.
        self.writing = bool(conn.get_execution_options().get("placement_write"))

    def _do_commit(self, dbapi_conn):
        if not (self.armed and self.writing):
            return self.original(dbapi_conn)
        self.commits += 1
        self.armed = False
        backend = self.db.backend
        if backend == "sqlite":
            self.original(dbapi_conn)
            # What pysqlite says once its connection is gone; SQLAlchemy
            # recognises it as a disconnect.
            raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
        _kill(self.db, getattr(dbapi_conn, "dbapi_connection", dbapi_conn))
        return self.original(dbapi_conn)


@pytest.fixture
def client(db):
    return falcon.testing.TestClient(create_app(Settings(db=db.url), db))


@pytest.fixture
def fault(db):
    armed = CommitFault(db)
    yield armed
    armed.restore()


def _provider(client, vcpus=8):
    rp = str(uuid.uuid4())
    result = client.simulate_post("/resource_providers", headers=LATEST,
                                  json={"name": rp, "uuid": rp})
    assert result.status_code == 200, result.text
    result = client.simulate_put(f"/resource_providers/{rp}/inventories", headers=LATEST,
                                 json={"resource_provider_generation": 0,
                                       "inventories": {"VCPU": {"total": vcpus}}})
    assert result.status_code == 200, result.text
    return rp


def _claim(client, rp, consumer, vcpus=2):
    return client.simulate_put(f"/allocations/{consumer}", headers=LATEST, json={
        "allocations": {rp: {"resources": {"VCPU": vcpus}}},
        "project_id": "p", "user_id": "u", "consumer_generation": None,
        "consumer_type": "INSTANCE"})


def test_a_claim_whose_commit_loses_the_connection_is_a_503(client, fault, db, caplog):
    rp = _provider(client)
    consumer = str(uuid.uuid4())
    fault.armed = True
    with caplog.at_level(logging.ERROR):
        result = _claim(client, rp, consumer)
    assert result.status_code == 503, result.text
    (err,) = result.json["errors"]
    assert err["code"] == "placement.outcome_unknown"
    assert err["title"] == "Service Unavailable"
    assert err["detail"].startswith("The outcome of this request is unknown")
    assert f"GET /allocations/{consumer}" in err["detail"]
    # Not retried: a second attempt could have claimed twice.
    assert fault.commits == 1
    assert any("outcome unknown" in r.getMessage() for r in caplog.records)

    # Following the advice finds the outcome, and the server carries on.
    shown = client.simulate_get(f"/allocations/{consumer}", headers=LATEST)
    assert shown.status_code == 200, shown.text
    stored = {k: v["resources"] for k, v in shown.json["allocations"].items()}
    if db.backend == "sqlite":
        # The COMMIT went through before the connection was lost.
        assert stored == {rp: {"VCPU": 2}}
    else:
        # The connection was killed before the server saw COMMIT.
        assert stored == {}
    usage = client.simulate_get(f"/resource_providers/{rp}/usages", headers=LATEST)
    assert usage.json["usages"] == {"VCPU": 2 if stored else 0}
    again = _claim(client, rp, str(uuid.uuid4()))
    assert again.status_code == 204, again.text


def test_other_writes_say_to_read_the_resource_back(client, fault):
    rp = _provider(client)
    fault.armed = True
    result = client.simulate_put(f"/resource_providers/{rp}/inventories", headers=LATEST,
                                 json={"resource_provider_generation": 1,
                                       "inventories": {"VCPU": {"total": 16}}})
    assert result.status_code == 503, result.text
    (err,) = result.json["errors"]
    assert err["code"] == "placement.outcome_unknown"
    assert f"GET /resource_providers/{rp}/inventories" in err["detail"]
    assert fault.commits == 1


def test_a_commit_that_fails_cleanly_is_not_an_unknown_outcome(client, db):
    """Only a lost connection makes the outcome unknown: an error the
    server answers at COMMIT means the transaction was rolled back."""
    rp = _provider(client)
    dialect = db.engine.dialect
    original = dialect.do_commit

    def refuse(dbapi_conn):
        dialect.do_commit = original
        dbapi_conn.rollback()
        raise db.engine.dialect.loaded_dbapi.IntegrityError("refused at commit")

    dialect.do_commit = refuse
    try:
        result = _claim(client, rp, str(uuid.uuid4()))
    finally:
        dialect.do_commit = original
    assert result.status_code == 500, result.text
    assert "code" not in result.json["errors"][0] or \
        result.json["errors"][0]["code"] != "placement.outcome_unknown"


def _kill(db, raw):
    killer = create_engine(db.engine.url, isolation_level="AUTOCOMMIT")
    try:
        with killer.connect() as conn:
            if db.backend == "mysql":
                conn.execute(text(f"KILL {int(raw.thread_id())}"))
            else:
                pid = (raw.info.backend_pid if hasattr(raw, "info")
                       else raw.get_backend_pid())
                conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    finally:
        killer.dispose()
