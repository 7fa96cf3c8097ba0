"""Build the WSGI application the way `placement-lite serve` does, for WSGI
servers other than our own (placement_lite.wsgi holds the `application`
they load).

Settings come from the same sources as `placement-lite serve`, less the
flags a WSGI server cannot pass: the environment (PLACEMENT_LITE_*), the
YAML file PLACEMENT_LITE_CONFIG_FILE names, and Placement's own
configuration, found as Placement's WSGI application finds it:
$OS_PLACEMENT_CONFIG_DIR/placement.conf, or else oslo.config's default
places for `placement` (/etc/placement/placement.conf among them), with the
OS_<GROUP>__<OPTION> variables over it. So a container or web server set
up for Placement's `placement.wsgi.api:application` serves placement-lite
with `placement_lite.wsgi:application` and nothing else changed. Settings
that belong to our own server (host, port, workers, threads,
shutdown_timeout) are the WSGI server's business and are ignored here.

Building does what `serve` does before it listens: create or upgrade the
schema under the database's lock (so several processes starting together
change it once), sync the standard classes and traits, check the
deployment's quota enforcement, build the app. A setting or database that
cannot be used raises StartupError with the one line `serve` would print.
"""
from __future__ import annotations

import logging
import os
from typing import Mapping, Optional

from placement_lite import logs, placement_conf
from placement_lite.config import Settings, load_settings
from placement_lite.startup import (
    StartupError, check_database_directory, database_error, log_start_notes)

LOG = logging.getLogger(__name__)


def _check_auth(settings: Settings) -> None:
    # Under a WSGI server we cannot see which address is served, so noauth2
    # (which trusts any caller's token) must be asked for out loud.
    if settings.auth == "noauth2" and not settings.insecure_noauth2_on_open_address:
        raise StartupError(
            f"{settings.describe('auth')}: noauth2 trusts any caller who sends a "
            "token, and under a WSGI server placement-lite cannot tell whether "
            "the address it is served on is reachable from other machines; set "
            "PLACEMENT_LITE_AUTH=keystone, or accept the risk with "
            "PLACEMENT_LITE_INSECURE_NOAUTH2_ON_OPEN_ADDRESS=true", 2)


def create_application(environ: Optional[Mapping[str, str]] = None,
                       configure_logging: bool = True):
    """Build the WSGI callable from the environment (os.environ by default).

    The pool the start-up checks used is emptied before returning: servers
    that load the app once and then fork (uwsgi without lazy-apps, mod_wsgi's
    preloading) must not hand one database connection to several processes.
    Each process opens its own on first use.
    """
    from sqlalchemy.exc import SQLAlchemyError

    from placement_lite import server
    from placement_lite.db import migrate

    environ = os.environ if environ is None else environ
    try:
        settings = load_settings({}, environ=environ,
                                 placement=placement_conf.wsgi_sources(environ))
    except (ValueError, OSError) as exc:
        raise StartupError(str(exc), 2) from None
    if configure_logging:
        logs.configure(settings.log_format, settings.log_level)
    log_start_notes(settings, LOG)
    try:
        _check_auth(settings)
        check_database_directory(settings)
        server.check_keystone(settings)
        try:
            db = server.prepare_database(settings)
        except (SQLAlchemyError, ImportError, OSError, migrate.ForeignSchema) as exc:
            LOG.debug("database start-up failed", exc_info=True)
            raise database_error(settings, exc) from None
        try:
            app = server._build_app(settings, db)
        finally:
            db.engine.dispose()
    except StartupError as exc:
        LOG.error("placement-lite cannot start: %s", exc)
        raise
    where = db.engine.url.render_as_string(hide_password=True)
    LOG.info("placement-lite WSGI application ready (database: %s; auth: %s)",
             where, settings.auth)
    return app
