"""The console's pages: Falcon resources that read through ledger/ and
quota/ functions and render Jinja2 templates.

Each page names the policy rules of the API routes whose data it shows
(`rules`), and is refused (a 403 page) when any of them refuses the
caller, with the same targets those routes would use. The pages are
public as far as the API's AuthMiddleware is concerned because they
identify the caller from the console cookie themselves (ui/session.py).
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Optional
from urllib.parse import parse_qs, urlencode

import falcon
from jinja2 import Environment, PackageLoader, select_autoescape

from placement_lite import errors
from placement_lite.api.auth import READS
from placement_lite.api.paths import canonical_uuid
from placement_lite.ledger import consumers, fleet, providers
from placement_lite.ledger.capacity import MAX_AMOUNT
from placement_lite.quota import enforce, overview
from placement_lite.ui import charts, session

HTML = "text/html; charset=utf-8"
PER_PAGE = 50
TREES_PER_PAGE = 20

# The navigation, in order: (label, path). A page added later (such as an
# explain form) appends itself here.
NAV = [("Fleet", "/ui/"), ("Providers", "/ui/providers"),
       ("Projects and quota", "/ui/projects"), ("Consumers", "/ui/consumers"),
       ("Reservations", "/ui/reservations"), ("Explain", "/ui/explain")]

FLEET_RULES = ("placement:resource_providers:list",
               "placement:resource_providers:inventories:list",
               "placement:resource_providers:usages")
PROVIDER_RULES = ("placement:resource_providers:show",
                  "placement:resource_providers:inventories:list",
                  "placement:resource_providers:usages",
                  "placement:resource_providers:traits:list",
                  "placement:resource_providers:aggregates:list",
                  "placement:resource_providers:allocations:list")
PROJECTS_RULES = ("placement:limits:projects:list",
                  "placement:limits:registered_limits:list",
                  "placement:limits:limits:list", "placement:usages")
PROJECT_RULES = ("placement:limits:projects:show",
                 "placement:limits:registered_limits:list",
                 "placement:limits:limits:list", "placement:usages")
LEDGER_RULE = "placement:lease:ledger"
CONSUMER_RULES = ("placement:allocations:list",)

_ENV = Environment(loader=PackageLoader("placement_lite.ui", "templates"),
                   autoescape=select_autoescape(["html"]),
                   trim_blocks=True, lstrip_blocks=True)
_ENV.globals.update(usage_bar=charts.usage_bar, histogram=charts.histogram,
                    nav=NAV)


def _num(value) -> str:
    if value is None:
        return "unlimited"
    value = float(value)
    if value.is_integer():
        return f"{int(value):,}"
    return f"{value:,.2f}"


def _unit_bound(value) -> str:
    """An inventory's max_unit: Placement's largest integer, its default,
    means no bound but the inventory's own."""
    return "no limit" if value is not None and value >= MAX_AMOUNT else _num(value)


_ENV.filters["num"] = _num
_ENV.filters["unit_bound"] = _unit_bound

# The histogram of free share: its bars' edges (0%, 10%, ... 100%) and
# each bucket in words, as ledger/fleet.py fills it (the first bucket
# holds providers without capacity too; the last includes 100%).
_TENTH = 100 // fleet.BUCKETS
BUCKET_EDGES = [f"{k * _TENTH}%" for k in range(fleet.BUCKETS + 1)]
BUCKET_TITLES = (
    [f"under {_TENTH}% free (or no capacity)"]
    + [f"{k * _TENTH}% to under {(k + 1) * _TENTH}% free"
       for k in range(1, fleet.BUCKETS - 1)]
    + [f"{100 - _TENTH}% to 100% free"])


def _headers(resp) -> None:
    resp.content_type = HTML
    resp.set_header("Cache-Control", "no-store")
    resp.set_header("X-Frame-Options", "DENY")
    resp.set_header("X-Content-Type-Options", "nosniff")
    resp.set_header("Referrer-Policy", "same-origin")
    resp.set_header("Content-Security-Policy",
                    "default-src 'none'; style-src 'self'; img-src 'self' data:; "
                    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")


def render(resp, template: str, status=falcon.HTTP_200, **context) -> None:
    _headers(resp)
    resp.status = status
    resp.text = _ENV.get_template(template).render(**context)


def _page(req, name: str = "page") -> int:
    raw = req.get_param(name) or "1"
    try:
        return max(1, min(int(raw), 10 ** 6))
    except ValueError:
        return 1


def _pager(req, page: int, per_page: int, total: int) -> dict:
    pages = max(1, math.ceil(total / per_page))
    params = {k: v for k, v in req.params.items() if k != "page" and isinstance(v, str)}

    def link(n):
        return req.path + "?" + urlencode({**params, "page": n})
    return {"page": page, "pages": pages, "total": total,
            "prev": link(page - 1) if page > 1 else None,
            "next": link(page + 1) if page < pages else None}


def _see_other(resp, location: str) -> None:
    resp.status = falcon.HTTP_303
    resp.location = location
    resp.content_type = HTML
    resp.text = ""


class Page(ABC):
    """A console page: identify, authorise, then `show`, which each page
    defines."""

    public_methods = READS
    policies: dict = {}
    produces = "text/html"
    rules: tuple = ()
    nav = ""

    def __init__(self, services):
        self.services = services
        self.db = services.db
        self.settings = services.settings

    def on_get(self, req, resp, **params):
        identity = session.identify(req, self.settings.auth)
        if identity is None:
            raise falcon.HTTPSeeOther("/ui/login")
        req.context.console_identity = identity
        try:
            session.require(self.services.policy, identity, self.rules)
            self.show(req, resp, identity, **params)
        except session.Refused as refused:
            render(resp, "error.html", falcon.HTTP_403, title="Not permitted",
                   detail=refused.detail, identity=identity, active=self.nav)

    @abstractmethod
    def show(self, req, resp, identity, **params):
        """Render the page for an identity the rules admitted."""

    def missing(self, resp, identity, what: str) -> None:
        render(resp, "error.html", falcon.HTTP_404, title="Not found",
               detail=what, identity=identity, active=self.nav)


class Fleet(Page):
    rules = FLEET_RULES
    nav = "Fleet"

    def show(self, req, resp, identity):
        aggs = [a for a in (req.get_param_as_list("aggregate") or []) if a.strip()]
        traits = [x for x in (req.get_param_as_list("trait") or []) if x.strip()]
        with self.db.read() as conn:
            classes = fleet.class_summaries(conn, aggs, traits)
            count = fleet.count_providers(conn)
        render(resp, "fleet.html", identity=identity, active=self.nav,
               classes=classes, providers=count, aggregates=aggs, traits=traits,
               bucket_edges=BUCKET_EDGES, bucket_titles=BUCKET_TITLES)


class SearchedList(Page):
    """A page of the rows a search (?q=) finds, with a pager."""
    template: str
    per_page = PER_PAGE

    @abstractmethod
    def found(self, conn, search: Optional[str], offset: int) -> tuple[int, dict]:
        """(how many rows match, the template's values for this page)."""

    def show(self, req, resp, identity):
        search = (req.get_param("q") or "").strip()[:200]
        page = _page(req)
        with self.db.read() as conn:
            total, values = self.found(conn, search or None,
                                       (page - 1) * self.per_page)
        render(resp, self.template, identity=identity, active=self.nav,
               search=search, pager=_pager(req, page, self.per_page, total),
               **values)


class ProviderList(SearchedList):
    rules = FLEET_RULES
    nav = "Providers"
    template = "providers.html"

    def found(self, conn, search, offset):
        return (fleet.count_providers(conn, search),
                {"rows": fleet.provider_page(conn, search, offset, self.per_page)})


class ProviderPage(Page):
    rules = PROVIDER_RULES
    nav = "Providers"

    def show(self, req, resp, identity, uuid):
        page = _page(req)
        with self.db.read() as conn:
            provider = providers.find_by_uuid(conn, canonical_uuid(uuid) or uuid)
            if provider is None:
                return self.missing(resp, identity,
                                    f"No resource provider with uuid {uuid[:80]}.")
            nodes = fleet.tree(conn, provider.root_id)
            usage = fleet.tree_usage(conn, provider.root_id)
            sharing = fleet.sharing_providers(conn, provider.root_id)
            invs = fleet.inventories(conn, provider.id)
            traits = fleet.traits(conn, provider.id)
            aggs = fleet.aggregates(conn, provider.id)
            total, held = fleet.consumers_on(conn, provider.id,
                                             (page - 1) * PER_PAGE, PER_PAGE)
        depth = {}
        for n in nodes:
            depth[n.id] = depth.get(n.parent_id, -1) + 1
        # The root and the parent are members of the tree read above.
        names = {n.uuid: n.name for n in nodes}
        render(resp, "provider.html", identity=identity, active=self.nav,
               provider=provider, nodes=nodes, depth=depth, usage=usage,
               names=names, sharing=sharing,
               inventories=invs, traits=traits, aggregates=aggs, consumers=held,
               pager=_pager(req, page, PER_PAGE, total))


class ProjectList(SearchedList):
    rules = PROJECTS_RULES
    nav = "Projects and quota"
    template = "projects.html"
    per_page = TREES_PER_PAGE

    def found(self, conn, search, offset):
        model = enforce.current(conn, self.settings)
        return overview.count_trees(conn, search), {
            "enforcement": model,
            "trees": overview.tree_page(conn, self.settings, search, offset,
                                        self.per_page)}


class ProjectPage(Page):
    rules = ()  # checked per project of the tree, in show
    nav = "Projects and quota"

    def show(self, req, resp, identity, project_id):
        page = _page(req)
        policy = self.services.policy
        with self.db.read() as conn:
            try:
                tree = overview.tree_of(conn, self.settings, project_id)
            except errors.ProjectNotFound:
                # Existence is not revealed to a caller who could not read it.
                session.require(policy, identity, PROJECT_RULES,
                                [{"project_id": project_id}])
                return self.missing(resp, identity,
                                    f"No project with id {project_id[:80]}.")
            members = [tree.root, *tree.children]
            session.require(policy, identity, PROJECT_RULES,
                            [{"project_id": p.external_id} for p in members])
            ledger = None
            if session.allowed(policy, identity, LEDGER_RULE,
                               {"project_id": project_id}):
                ledger = overview.lease_ledger(conn, project_id,
                                               (page - 1) * PER_PAGE, PER_PAGE)
            model = enforce.current(conn, self.settings)
        render(resp, "project.html", identity=identity, active=self.nav,
               tree=tree, focus=project_id, enforcement=model, ledger=ledger,
               ledger_rule=LEDGER_RULE,
               pager=_pager(req, page, PER_PAGE, ledger.total if ledger else 0))


class ConsumerList(Page):
    """Consumers by a piece of their uuid, their project or their user:
    a page of 50 at a time, counted and read by the database."""
    rules = CONSUMER_RULES
    nav = "Consumers"

    def show(self, req, resp, identity):
        def field(name, most):
            return (req.get_param(name) or "").strip()[:most]
        # `uuid` was the one field before the search had three.
        part = field("q", 80) or field("uuid", 80)
        search = fleet.ConsumerSearch(part, field("project", 255),
                                      field("user", 255))
        whole = canonical_uuid(part)
        if whole and not (search.project or search.user):
            raise falcon.HTTPSeeOther("/ui/consumers/" + whole)
        page = _page(req)
        with self.db.read() as conn:
            total = fleet.count_consumers(conn, search)
            rows = fleet.consumer_page(conn, search, (page - 1) * PER_PAGE, PER_PAGE)
        render(resp, "consumers.html", identity=identity, active=self.nav,
               search=search, searched=any((part, search.project, search.user)),
               rows=rows, pager=_pager(req, page, PER_PAGE, total))


class ConsumerPage(Page):
    rules = CONSUMER_RULES
    nav = "Consumers"

    def show(self, req, resp, identity, consumer_uuid: str):
        with self.db.read() as conn:
            found = consumers.get(conn, canonical_uuid(consumer_uuid) or consumer_uuid)
            allocs = ([] if found is None
                      else fleet.consumer_allocations(conn, found.id))
        if found is None:
            return self.missing(resp, identity,
                                f"No consumer with uuid {consumer_uuid[:80]}.")
        render(resp, "consumer.html", identity=identity, active=self.nav,
               consumer=found, allocations=allocs)


class Login:
    """GET: the form. POST: keep the token in the console cookie."""

    public_methods = frozenset({"GET", "HEAD", "POST"})
    policies: dict = {}
    produces = "text/html"

    def __init__(self, services):
        self.mode = services.settings.auth

    def on_get(self, req, resp):
        render(resp, "login.html", mode=self.mode, error=None)

    def on_post(self, req, resp):
        raw = req.bounded_stream.read(session.MAX_TOKEN * 2).decode("utf-8", "replace")
        token = (parse_qs(raw).get("token") or [""])[0].strip()
        if not session.valid_token(token):
            render(resp, "login.html", falcon.HTTP_400, mode=self.mode,
                   error="Give a token: printable characters without spaces, "
                         "quotes, commas, semicolons or backslashes.")
            return
        # The scheme the WSGI server settled on: behind a proxy it is the
        # proxy's X-Forwarded-Proto/Forwarded only when the server believes
        # that proxy (serve: --trusted-proxy); Falcon's forwarded_scheme
        # would take the header from anyone.
        resp.set_cookie(session.COOKIE, token, path=session.PREFIX, http_only=True,
                        same_site="Strict", secure=req.scheme == "https")
        _see_other(resp, "/ui/")


class Logout:
    public_methods = frozenset({"POST"})
    policies: dict = {}

    def __init__(self, services):
        pass

    def on_post(self, req, resp):
        resp.unset_cookie(session.COOKIE, path=session.PREFIX)
        _see_other(resp, "/ui/login")


class Static:
    """The console's stylesheet, from the package (nothing from a CDN)."""

    public_methods = READS
    policies: dict = {}
    produces = None
    TYPES = {".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}

    def __init__(self, services):
        from importlib import resources
        base = resources.files("placement_lite.ui") / "static"
        self.files = {}
        for item in base.iterdir():
            suffix = "." + item.name.rsplit(".", 1)[-1]
            if suffix in self.TYPES:
                self.files[item.name] = (item.read_bytes(), self.TYPES[suffix])

    def on_get(self, req, resp, name):
        found = self.files.get(name)
        if found is None:
            raise falcon.HTTPNotFound()
        resp.data, resp.content_type = found
        resp.set_header("Cache-Control", "public, max-age=3600")
        resp.set_header("X-Content-Type-Options", "nosniff")
