"""Point Placement's own test fixture at placement_lite.

nova's functional tests take Placement from
`placement.tests.functional.fixtures.placement.PlacementFixture` (nova's
fixture subclasses it). Per test, that fixture starts Placement's
`Database` fixture (a fresh in-memory database), then builds the app with
`deploy.loadapp(conf)` and installs a wsgi-intercept for it at
`http://<uuid>/placement`; every request nova's report client makes goes
there, in process.

`install()` swaps two names, so the same fixture, unchanged in everything
else (the intercept, the endpoint, the token, nova's patching of its
report client), serves placement_lite:

- `Database` in `placement.tests.fixtures` (the fixture's `db_fixture`, and
  the module a nova test that manages Placement's database itself uses,
  as test_bug_1679750 does) becomes `LiteDatabase`: a fresh, migrated
  placement_lite database for each use (a temporary SQLite file, or the
  connection the fixture already configured), disposed of when the test's
  fixtures are cleaned up;
- `deploy` in the fixture's module becomes a namespace whose `loadapp` is
  ours: placement_lite's WSGI app (`build_wsgi`) on that database, with
  the settings the fixture's configuration asks of Placement (noauth2, the
  legacy policy defaults).

No nova code and no Placement code changes; only those two lookups answer
differently.
"""
from __future__ import annotations

import types
from contextlib import ExitStack, contextmanager

import fixtures
from oslo_config import cfg
from placement.tests.functional.fixtures import placement as upstream

from placement_lite.app import build_wsgi
from placement_lite.config import Settings
from placement_lite.db import migrate
from placement_lite.db.engine import Database
from placement_lite.ledger import standards
from tests.backends import fresh_database

# The database of the test being set up: the fixture starts its Database
# before it loads the app, in the same setUp.
_CURRENT: dict = {"db": None}


class LiteDatabase(fixtures.Fixture):
    """Stands where Placement's Database fixture stands, with its
    signature and its handling of the connection option: a connection
    already configured (nova's threading mode sets a WAL SQLite file) is
    the database; otherwise a fresh SQLite file is, and with `set_config`
    its URL is written to the option as Placement writes `sqlite://`.
    Either way it is migrated and holds the standard names, as Placement's
    holds its schema and synced classes and traits."""

    def __init__(self, conf_fixture, set_config=False):
        super().__init__()
        self.conf_fixture = conf_fixture
        self.set_config = set_config

    def _setUp(self):
        conf = self.conf_fixture.conf
        if self.set_config:
            try:
                self.conf_fixture.register_opt(cfg.StrOpt("connection"),
                                               group="placement_database")
            except cfg.DuplicateOptError:
                pass
        stack = ExitStack()
        self.addCleanup(stack.close)
        configured = conf.placement_database.connection
        if configured:
            db = stack.enter_context(_migrated(configured))
        else:
            db = stack.enter_context(fresh_database("sqlite"))
            if self.set_config:
                self.conf_fixture.config(connection=db.url, group="placement_database")
        _CURRENT["db"] = db
        self.addCleanup(_CURRENT.update, db=None)


@contextmanager
def _migrated(url: str):
    db = Database(url)
    try:
        migrate.upgrade(db.engine)
        standards.sync(db)
        yield db
    finally:
        db.dispose()


def settings_for(conf) -> Settings:
    """placement_lite's settings for the fixture's Placement config. The
    fixture sets noauth2 and legacy (not "new") policy defaults; anything
    else would be a fixture we have not read, so it stops the test."""
    if conf.api.auth_strategy != "noauth2":
        raise RuntimeError(f"fixture asks for auth_strategy={conf.api.auth_strategy!r}; "
                           "only noauth2 is mapped")
    if conf.oslo_policy.enforce_new_defaults:
        raise RuntimeError("fixture asks for enforce_new_defaults=True; only the "
                           "legacy defaults are mapped")
    return Settings(db=conf.placement_database.connection, auth="noauth2",
                    policy_profile="legacy")


def loadapp(conf):
    db = _CURRENT["db"]
    if db is None:
        raise RuntimeError("PlacementFixture loaded its app with no Database fixture "
                           "started (db=False, and none set up by the test)")
    settings = settings_for(conf)
    if settings.db != db.url:
        raise RuntimeError(f"the fixture's connection {settings.db!r} is not the "
                           f"database its Database fixture made ({db.url!r})")
    return build_wsgi(settings, db)


def _replacements() -> list:
    """(module, name, value) for each name install() sets."""
    return [(upstream.db_fixture, "Database", LiteDatabase),
            (upstream, "deploy", types.SimpleNamespace(loadapp=loadapp))]


def install() -> None:
    """For a process that only runs nova's tests (tests/nova_functional/boot.py)."""
    for module, name, value in _replacements():
        setattr(module, name, value)


@contextmanager
def installed():
    """install(), undone on exit (for a test inside our own suite)."""
    saved = [(module, name, getattr(module, name)) for module, name, _ in _replacements()]
    install()
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)
