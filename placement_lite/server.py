"""Run the WSGI app under waitress."""
from __future__ import annotations

import logging
import sys

from placement_lite.app import create_app
from placement_lite.config import Settings
from placement_lite.db import migrate
from placement_lite.db.engine import Database
from placement_lite.ledger import standards

LOG = logging.getLogger(__name__)


def prepare_database(settings: Settings) -> Database:
    """Create or upgrade the schema and sync the standard names."""
    db = Database(settings.db, pool_size=settings.db_pool_size,
                  retries=settings.db_retries)
    migrate.upgrade(db.engine)
    standards.sync(db)
    return db


def build_wsgi(settings: Settings, db: Database):
    app = create_app(settings, db)
    return app


def serve(settings: Settings) -> int:
    import waitress

    db = prepare_database(settings)
    app = build_wsgi(settings, db)
    where = db.engine.url.render_as_string(hide_password=True)
    print(f"placement-lite listening on http://{settings.host}:{settings.port}/ "
          f"(database: {where})", file=sys.stderr, flush=True)
    try:
        waitress.serve(app, host=settings.host, port=settings.port,
                       threads=settings.threads, ident="placement-lite",
                       _quiet=True)
    except KeyboardInterrupt:
        pass
    finally:
        db.dispose()
    return 0
