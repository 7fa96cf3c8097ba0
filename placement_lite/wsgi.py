"""`application`, for WSGI servers other than our own:

    uwsgi --http-socket :8778 --processes 4 --threads 8 \\
          --module placement_lite.wsgi:application
    gunicorn -w 4 placement_lite.wsgi:application
    WSGIScriptAlias / /path/to/site-packages/placement_lite/wsgi.py  (mod_wsgi)

Importing this module builds the app from Placement's placement.conf
(in $OS_PLACEMENT_CONFIG_DIR, or /etc/placement/, as Placement's
`placement.wsgi.api:application` finds it) and the environment
(PLACEMENT_LITE_*, PLACEMENT_LITE_CONFIG_FILE, Placement's
OS_<GROUP>__<OPTION>): it migrates the schema under the database lock,
syncs the standard names and refuses unusable settings, as `placement-lite
serve` does (see placement_lite.deploy). Servers look `application` up in
the module's namespace, so it is built at import, once per process that
imports it.
"""
from placement_lite.deploy import create_application

application = create_application()
