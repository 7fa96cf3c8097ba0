"""The read-only operator console, served at /ui/ when `--ui` is given.

Pages (ui/pages.py, ui/explain_page.py; routed in ui/routes.py) read
through ledger/ and quota/ read functions and the API's policy; templates
and the stylesheet ship in the package.
"""
from placement_lite.ui.routes import ROUTES  # noqa: F401
