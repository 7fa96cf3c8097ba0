"""The web console (/ui/) without a browser: off unless asked for, policy
as the API's, the cookie's attributes, pagination, and the fleet figures
against what the API answers."""
from __future__ import annotations

import re
import uuid as uuidlib
from html import unescape

import falcon.testing
import pytest

from placement_lite.app import create_app
from placement_lite.config import Settings
from tests.backends import backend_id, backend_urls, fresh_database

LATEST = {"OpenStack-API-Version": "placement latest"}
ADMIN = {"X-Auth-Token": "admin", **LATEST}
COOKIE = "placement_lite_console"


def _u(name: str) -> str:
    return str(uuidlib.uuid5(uuidlib.NAMESPACE_DNS, name + ".ui.test"))


AGG = _u("agg")
CN1, CN2, NUMA0, NUMA1, DISK = (_u(n) for n in ("cn1", "cn2", "numa0", "numa1", "disk"))
C1, C2, C3 = (_u(n) for n in ("c1", "c2", "c3"))


def build_world(call) -> None:
    """A small cloud through the API. `call(method, path, body)` returns
    (status, json). Compute cn1 (with two NUMA children) and cn2, a shared
    disk in their aggregate; project tree acme (acme-dev below it) over
    its limit under strict_two_level, and beta within it."""
    def ok(method, path, body=None, want=(200, 201, 204)):
        status, data = call(method, path, body)
        assert status in want, (method, path, status, data)
        return data

    ok("POST", "/resource_providers", {"name": "cn1", "uuid": CN1})
    ok("POST", "/resource_providers", {"name": "cn2", "uuid": CN2})
    ok("POST", "/resource_providers", {"name": "cn1-numa0", "uuid": NUMA0,
                                       "parent_provider_uuid": CN1})
    ok("POST", "/resource_providers", {"name": "cn1-numa1", "uuid": NUMA1,
                                       "parent_provider_uuid": CN1})
    ok("POST", "/resource_providers", {"name": "shared-disk", "uuid": DISK})
    inv = {
        CN1: {"MEMORY_MB": {"total": 8192}},
        NUMA0: {"VCPU": {"total": 8}},
        NUMA1: {"VCPU": {"total": 8}},
        CN2: {"VCPU": {"total": 16, "reserved": 4, "allocation_ratio": 2.0},
              "MEMORY_MB": {"total": 4096}},
        DISK: {"DISK_GB": {"total": 1000, "reserved": 100}},
    }
    for rp, invs in inv.items():
        gen = ok("GET", f"/resource_providers/{rp}")["generation"]
        ok("PUT", f"/resource_providers/{rp}/inventories",
           {"resource_provider_generation": gen, "inventories": invs})
    for rp in (CN1, CN2, DISK):
        gen = ok("GET", f"/resource_providers/{rp}")["generation"]
        ok("PUT", f"/resource_providers/{rp}/aggregates",
           {"resource_provider_generation": gen, "aggregates": [AGG]})
    for rp, traits in ((CN1, ["HW_CPU_X86_AVX2"]),
                       (DISK, ["MISC_SHARES_VIA_AGGREGATE"])):
        gen = ok("GET", f"/resource_providers/{rp}")["generation"]
        ok("PUT", f"/resource_providers/{rp}/traits",
           {"resource_provider_generation": gen, "traits": traits})

    service = ok("POST", "/v3/services", {"service": {"type": "placement"}})
    sid = service["service"]["id"]
    ok("POST", "/v3/registered_limits", {"registered_limits": [
        {"service_id": sid, "resource_name": "class:VCPU", "default_limit": 10}]})
    ok("POST", "/v3/projects", {"project": {"id": "acme", "name": "Acme"}})
    ok("POST", "/v3/projects", {"project": {"id": "acme-dev", "name": "Acme dev",
                                            "parent_id": "acme"}})
    ok("POST", "/v3/projects", {"project": {"id": "beta", "name": "Beta"}})
    ok("POST", "/v3/limits", {"limits": [
        {"project_id": "acme", "service_id": sid, "resource_name": "class:VCPU",
         "resource_limit": 12},
        {"project_id": "acme-dev", "service_id": sid,
         "resource_name": "class:VCPU", "resource_limit": 8}]})

    def alloc(consumer, project, user, allocations, ctype="INSTANCE"):
        ok("PUT", f"/allocations/{consumer}", {
            "allocations": {rp: {"resources": res} for rp, res in allocations.items()},
            "project_id": project, "user_id": user, "consumer_generation": None,
            "consumer_type": ctype})
    alloc(C1, "acme", "alice", {NUMA0: {"VCPU": 4}, CN1: {"MEMORY_MB": 1024},
                                DISK: {"DISK_GB": 100}})
    alloc(C2, "acme-dev", "bob", {CN2: {"VCPU": 10}})
    alloc(C3, "beta", "carol", {CN2: {"VCPU": 2, "MEMORY_MB": 512}})


@pytest.fixture
def db():
    # SQLite: the SQL of the read functions is checked on the servers by
    # test_fleet_sql_on_backends below.
    with fresh_database("sqlite") as database:
        yield database


def _settings(db, **kw):
    kw.setdefault("quota_model", "strict_two_level")
    return Settings(db=db.url, **kw)


def _client(db, **kw):
    return falcon.testing.TestClient(create_app(_settings(db, **kw), db))


def _caller(client):
    def call(method, path, body=None):
        r = client.simulate_request(method, path, json=body, headers=ADMIN)
        return r.status_code, (r.json if r.text else None)
    return call


@pytest.fixture
def world(db):
    client = _client(db, ui=True)
    build_world(_caller(client))
    return client


def page(client, path, token="admin", **kw):
    return client.simulate_get(path, cookies={COOKIE: token} if token else None,
                               **kw)


def text(result) -> str:
    """The page's visible text, roughly: tags dropped, whitespace folded."""
    body = re.sub(r"<(script|style|title)[^>]*>.*?</\1>", " ", result.text, flags=re.S)
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", body))).strip()


def test_console_is_off_unless_asked_for(db):
    client = _client(db)
    for path in ("/ui/", "/ui/login", "/ui/providers", "/ui/static/console.css"):
        assert client.simulate_get(path, headers=ADMIN).status_code == 404, path


def test_ui_is_a_setting_and_a_flag():
    from placement_lite.cli import _parser
    args = _parser().parse_args(["serve", "--ui"])
    assert args.ui is True
    assert Settings(ui=True).ui is True
    assert Settings().ui is False


def test_without_a_cookie_a_page_sends_to_the_login_form(world):
    r = page(world, "/ui/", token=None)
    assert r.status_code == 303 and r.headers["location"].endswith("/ui/login")
    form = world.simulate_get("/ui/login")
    assert form.status_code == 200 and 'name="token"' in form.text
    assert 'method="post"' in form.text


def test_login_sets_an_httponly_strict_cookie_and_keeps_the_token_out_of_urls(world):
    r = world.simulate_post("/ui/login", body="token=admin",
                            headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status_code == 303
    assert "token" not in r.headers["location"] and "admin" not in r.headers["location"]
    cookie = r.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=admin;")
    assert "HttpOnly" in cookie
    assert "SameSite=Strict" in cookie
    assert "Path=/ui" in cookie
    # Over plain HTTP the cookie cannot be Secure (the browser would drop it);
    # behind TLS it is.
    assert "Secure" not in cookie
    tls = world.simulate_post("/ui/login", body="token=admin", protocol="https",
                              headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert "Secure" in tls.headers["set-cookie"]
    out = world.simulate_post("/ui/logout", cookies={COOKIE: "admin"})
    assert out.status_code == 303
    assert re.search(rf"{COOKIE}=;|{COOKIE}=\"\";", out.headers["set-cookie"])


def test_the_cookie_is_secure_by_the_servers_scheme_not_by_a_callers_header(world):
    """A forwarding header is the WSGI server's to believe or remove (serve:
    --trusted-proxy); one that reaches the app unvetted, as under a server
    configured to pass them, is the caller's word and makes nothing Secure."""
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    for header in ({"X-Forwarded-Proto": "https"}, {"Forwarded": "proto=https"}):
        r = world.simulate_post("/ui/login", body="token=admin",
                                headers={**form, **header})
        assert r.status_code == 303
        assert "Secure" not in r.headers["set-cookie"], header


def test_a_bad_token_is_refused_on_the_form(world):
    r = world.simulate_post("/ui/login", body="token=a%20b%3Bc",
                            headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status_code == 400 and "set-cookie" not in r.headers
    assert "printable" in text(r)


def test_the_cookie_does_not_authenticate_the_api(world):
    r = world.simulate_get("/resource_providers", cookies={COOKIE: "admin"})
    assert r.status_code == 401


def test_a_caller_the_api_refuses_sees_a_403_page(world):
    # noauth2 "alice:acme" has no roles: the API refuses her the provider
    # list, and so does the console, naming the rule.
    api = world.simulate_get("/resource_providers",
                             headers={"X-Auth-Token": "alice:acme"})
    assert api.status_code == 403
    for path in ("/ui/", "/ui/providers", f"/ui/providers/{CN1}", "/ui/projects",
                 "/ui/projects/acme", f"/ui/consumers/{C1}"):
        r = page(world, path, token="alice:acme")
        assert r.status_code == 403, path
        assert r.headers["content-type"].startswith("text/html")
        assert "Policy does not allow placement:" in text(r)
        assert "cn1" not in text(r) and "Acme" not in text(r)


def test_a_project_reader_sees_their_own_tree_and_not_others(db):
    # A reader under secure-rbac, through noauth2's X-Roles.
    world = _client(db, ui=True, policy_profile="secure-rbac")
    build_world(_caller(world))
    headers = {"X-Roles": "reader"}
    mine = page(world, "/ui/projects/acme", token="rita:acme", headers=headers)
    # acme-dev is in acme's tree but rita reads acme only: the API would
    # refuse her /usages?project_id=acme-dev, so the tree is refused too.
    assert mine.status_code == 403
    assert "placement:" in text(mine)
    beta = page(world, "/ui/projects/beta", token="rita:beta", headers=headers)
    assert beta.status_code == 200, text(beta)
    assert "Beta" in text(beta)
    other = page(world, "/ui/projects/beta", token="rita:acme", headers=headers)
    assert other.status_code == 403
    assert "No lease charges or refunds" in text(beta)
    # A member of beta is not a reader of provider inventories.
    assert page(world, "/ui/", token="rita:beta", headers=headers).status_code == 403


def test_a_section_whose_rule_refuses_is_left_out(db):
    # legacy: quota reads are admin-only, and so is the lease ledger; a
    # policy file lets a reader see the tree but not the ledger.
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as fh:
        fh.write('"placement:limits:projects:show": "role:reader"\n'
                 '"placement:limits:registered_limits:list": "role:reader"\n'
                 '"placement:limits:limits:list": "role:reader"\n'
                 '"placement:usages": "role:reader"\n')
    world = _client(db, ui=True, policy_file=fh.name)
    build_world(_caller(world))
    r = page(world, "/ui/projects/beta", token="rita:beta",
             headers={"X-Roles": "reader"})
    assert r.status_code == 200
    assert "Not shown: policy does not allow placement:lease:ledger" in text(r)


def _api_fleet(client):
    """Per class (capacity, used) summed over providers from the API."""
    totals = {}
    rps = client.simulate_get("/resource_providers", headers=ADMIN).json
    for rp in rps["resource_providers"]:
        invs = client.simulate_get(
            f"/resource_providers/{rp['uuid']}/inventories", headers=ADMIN).json
        used = client.simulate_get(
            f"/resource_providers/{rp['uuid']}/usages", headers=ADMIN).json
        for rc, inv in invs["inventories"].items():
            cap, u = totals.get(rc, (0, 0))
            totals[rc] = (cap + (inv["total"] - inv["reserved"]) * inv["allocation_ratio"],
                          u + used["usages"].get(rc, 0))
    return totals


def _fleet_rows(result):
    rows = {}
    for m in re.finditer(r'<tr data-class="([A-Z_]+)">(.*?)</tr>', result.text, re.S):
        cells = dict(re.findall(r'<td class="n (\w+)">([^<]*)</td>', m.group(2)))
        rows[m.group(1)] = {k: float(v.replace(",", "")) for k, v in cells.items()}
    return rows


def test_fleet_numbers_match_the_api(world):
    r = page(world, "/ui/")
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/html; charset=utf-8"
    shown = _fleet_rows(r)
    expected = _api_fleet(world)
    assert set(shown) == set(expected) == {"VCPU", "MEMORY_MB", "DISK_GB"}
    for rc, (cap, used) in expected.items():
        assert shown[rc]["capacity"] == cap
        assert shown[rc]["used"] == used
        assert shown[rc]["free"] == cap - used
    assert shown["VCPU"] == {"providers": 3, "capacity": 40, "used": 16, "free": 24}
    assert "5 resource providers in all" in text(r)


def test_fleet_filters_by_aggregate_and_trait(world):
    in_agg = _fleet_rows(page(world, f"/ui/?aggregate={AGG}"))
    # numa0/numa1 are not in the aggregate: only cn2's VCPU counts.
    assert in_agg["VCPU"]["capacity"] == 24 and in_agg["DISK_GB"]["capacity"] == 900
    avx = _fleet_rows(page(world, "/ui/?trait=HW_CPU_X86_AVX2"))
    assert set(avx) == {"MEMORY_MB"} and avx["MEMORY_MB"]["used"] == 1024
    none = page(world, "/ui/?trait=CUSTOM_NOPE")
    assert "No inventory matches the filter" in text(none)


def test_fleet_histogram_counts_providers_by_free_share(world, db):
    from placement_lite.ledger import fleet
    with db.read() as conn:
        by_class = {c.resource_class: c for c in fleet.class_summaries(conn)}
    # numa0: 4 of 8 free (50 %); numa1: all free; cn2: 12 of 24 used (50 %).
    assert by_class["VCPU"].histogram == (0, 0, 0, 0, 0, 2, 0, 0, 0, 1)
    # shared disk: 800 of 900 free (88 %).
    assert by_class["DISK_GB"].histogram[8] == 1


def test_provider_page_shows_tree_sharing_inventory_and_consumers(world):
    r = page(world, f"/ui/providers/{NUMA0}")
    assert r.status_code == 200
    seen = text(r)
    for expected in ("cn1-numa0", "cn1", "cn1-numa1", "shared-disk", AGG, C1,
                     "acme", "alice", "INSTANCE"):
        assert expected in seen, expected
    assert re.search(r'data-class="VCPU"><td class="rc">VCPU</td>'
                     r'<td class="n used">4</td><td class="n capacity">8</td>', r.text)
    disk = text(page(world, f"/ui/providers/{DISK}"))
    assert "MISC_SHARES_VIA_AGGREGATE" in disk and AGG in disk
    missing = page(world, f"/ui/providers/{_u('nope')}")
    assert missing.status_code == 404 and "No resource provider" in text(missing)


def test_providers_list_is_searchable_and_paginated(db):
    client = _client(db, ui=True)
    call = _caller(client)
    for i in range(120):
        status, _ = call("POST", "/resource_providers", {"name": f"host-{i:03d}"})
        assert status == 200
    first = page(client, "/ui/providers")
    assert "Page 1 of 3 (120 providers)" in text(first)
    names = re.findall(r">(host-\d{3})</a>", first.text)
    assert names == [f"host-{i:03d}" for i in range(50)]
    assert 'rel="next" href="/ui/providers?page=2"' in first.text
    last = page(client, "/ui/providers?page=3")
    assert re.findall(r">(host-\d{3})</a>", last.text) == [
        f"host-{i:03d}" for i in range(100, 120)]
    assert 'rel="next"' not in last.text and 'rel="prev"' in last.text
    found = page(client, "/ui/providers?q=host-11")
    assert re.findall(r">(host-\d{3})</a>", found.text) == [
        f"host-{i}" for i in range(110, 120)]
    assert "10 providers" in text(found)
    # A search with LIKE's wildcards is taken literally.
    assert "No resource provider matches" in text(page(client, "/ui/providers?q=%25"))
    assert page(client, "/ui/providers?page=abc").status_code == 200


def test_projects_page_marks_the_over_limit_tree(world):
    r = page(world, "/ui/projects")
    assert r.status_code == 200
    cards = {root: cls for cls, root in re.findall(
        r'<article class="tree-card([^"]*)" data-root="([^"]+)"', r.text)}
    assert cards == {"acme": " over-tree", "beta": ""}
    seen = text(r)
    assert "model strict_two_level" in seen and "Over limit" in seen
    detail = page(world, "/ui/projects/acme-dev")
    rows = re.findall(r'<tr class="([^"]*)" data-resource="class:VCPU" '
                      r'data-project="([^"]+)">(.*?)</tr>', detail.text, re.S)
    by_project = {p: (cls, re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body)))
                  for cls, p, body in rows}
    assert "over" not in by_project["acme"][0].split()
    assert "over" in by_project["acme-dev"][0].split()
    # acme's own 4 of 12; acme-dev's 10 of 8 (its override); the tree 14 of 12.
    assert "Acme 12 override 4 8 " in by_project["acme"][1]
    assert "Acme dev 8 override 10 -2 " in by_project["acme-dev"][1]
    assert "over" in by_project["tree"][0].split()
    assert "Whole tree 12 14 -2 " in by_project["tree"][1]
    assert "No lease charges or refunds" in text(detail)


def test_consumer_lookup(world):
    r = page(world, f"/ui/consumers?uuid={C1.upper()}")
    assert r.status_code == 303 and r.headers["location"] == f"/ui/consumers/{C1}"
    seen = text(page(world, f"/ui/consumers/{C1}"))
    for expected in ("acme", "alice", "INSTANCE", "cn1-numa0", "VCPU 4",
                     "shared-disk", "DISK_GB 100"):
        assert expected in seen, expected
    # Anything but a whole uuid is a search, answered on the page: no
    # header carries what was typed.
    odd = page(world, "/ui/consumers?uuid=a%0d%0aSet-Cookie:%20x=1/..")
    assert odd.status_code == 200 and "set-cookie" not in odd.headers
    assert "location" not in odd.headers
    assert "No consumer matches" in text(odd)
    missing = page(world, f"/ui/consumers/{_u('nobody')}")
    assert missing.status_code == 404 and "No consumer with uuid" in text(missing)


def _consumer_uuids(result) -> list:
    return re.findall(r'<a href="/ui/consumers/([0-9a-f-]{36})">', result.text)


def test_consumers_are_found_by_part_of_their_uuid(world):
    part = C1[9:18]
    found = page(world, f"/ui/consumers?q={part.upper()}")
    assert found.status_code == 200
    assert _consumer_uuids(found) == [C1]
    assert "Page 1 of 1 (1 consumers)" in text(found)
    prefix = page(world, f"/ui/consumers?q={C2[:6]}")
    assert C2 in _consumer_uuids(prefix)
    assert C1 not in _consumer_uuids(prefix) or C1.startswith(C2[:6])
    # LIKE's wildcards are taken literally.
    assert _consumer_uuids(page(world, "/ui/consumers?q=%25")) == []
    assert _consumer_uuids(page(world, "/ui/consumers?q=_")) == []
    # With no search, every consumer, by uuid.
    assert _consumer_uuids(page(world, "/ui/consumers")) == sorted([C1, C2, C3])


def test_consumers_are_found_by_project_and_user(world):
    assert _consumer_uuids(page(world, "/ui/consumers?project=acme-dev")) == [C2]
    assert _consumer_uuids(page(world, "/ui/consumers?user=carol")) == [C3]
    assert _consumer_uuids(page(world, "/ui/consumers?project=acme&user=alice")) == [C1]
    none = page(world, "/ui/consumers?project=acme&user=bob")
    assert _consumer_uuids(none) == []
    assert "No consumer matches in project acme of user bob." in text(none)
    assert _consumer_uuids(page(world, "/ui/consumers?project=nobody")) == []
    # A whole uuid with a project is a search too, not the consumer's page.
    both = page(world, f"/ui/consumers?q={C1}&project=beta")
    assert both.status_code == 200 and _consumer_uuids(both) == []
    # The consumer's page links to its project's other consumers.
    assert 'href="/ui/consumers?project=acme"' in page(world, f"/ui/consumers/{C1}").text


def test_consumer_search_is_paginated(db):
    client = _client(db, ui=True)
    call = _caller(client)
    rp = _u("big")
    assert call("POST", "/resource_providers", {"name": "big", "uuid": rp})[0] == 200
    assert call("PUT", f"/resource_providers/{rp}/inventories", {
        "resource_provider_generation": 0,
        "inventories": {"VCPU": {"total": 1000}}})[0] == 200
    made = sorted(_u(f"many-{i}") for i in range(60))
    for i, consumer in enumerate(made):
        status, body = call("PUT", f"/allocations/{consumer}", {
            "allocations": {rp: {"resources": {"VCPU": 1}}},
            "project_id": "many", "user_id": f"u{i % 2}", "consumer_generation": None,
            "consumer_type": "INSTANCE"})
        assert status == 204, body
    first = page(client, "/ui/consumers?project=many")
    assert _consumer_uuids(first) == made[:50]
    assert "Page 1 of 2 (60 consumers)" in text(first)
    assert 'rel="next" href="/ui/consumers?project=many&amp;page=2"' in first.text
    second = page(client, "/ui/consumers?project=many&page=2")
    assert _consumer_uuids(second) == made[50:]
    users = page(client, "/ui/consumers?project=many&user=u1")
    assert "(30 consumers)" in text(users)


def test_providers_list_names_each_parent(world):
    r = page(world, "/ui/providers")
    rows = {m.group(1): m.group(2) for m in re.finditer(
        r'<tr>\s*<td><a href="/ui/providers/[^"]+">([^<]+)</a></td>.*?'
        r'<td class="parent">(.*?)</td>', r.text, re.S)}
    assert set(rows) == {"cn1", "cn1-numa0", "cn1-numa1", "cn2", "shared-disk"}
    for child in ("cn1-numa0", "cn1-numa1"):
        assert re.fullmatch(rf'<a href="/ui/providers/{CN1}"[^>]*>cn1</a>', rows[child])
    assert "a root" in rows["cn2"] and "/ui/providers/" not in rows["cn2"]


def _tree_lines(result) -> dict:
    lines = re.findall(r'<li class="depth-[^"]*" data-uuid="([^"]+)">(.*?)</li>',
                       result.text, re.S)
    return {uuid: re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", body))).strip()
            for uuid, body in lines}


def test_tree_shows_every_members_usage(world):
    r = page(world, f"/ui/providers/{NUMA1}")
    lines = _tree_lines(r)
    assert lines == {CN1: "cn1 gen 4 MEMORY_MB 1,024/8,192",
                     NUMA0: "cn1-numa0 gen 2 VCPU 4/8",
                     NUMA1: "cn1-numa1 gen 1 VCPU 0/8"}
    # The root and the parent by name, linked.
    assert re.search(rf'id="root"><a href="/ui/providers/{CN1}">cn1</a>', r.text)
    assert re.search(rf'id="parent"><a href="/ui/providers/{CN1}">cn1</a>', r.text)
    root = page(world, f"/ui/providers/{CN1}")
    assert 'id="root">itself<' in root.text and "none (a root)" in text(root)
    # A member without inventory says so.
    call = _caller(world)
    leaf = _u("leaf")
    assert call("POST", "/resource_providers", {"name": "cn1-leaf", "uuid": leaf,
                                                "parent_provider_uuid": NUMA1})[0] == 200
    assert _tree_lines(page(world, f"/ui/providers/{CN1}"))[leaf] == \
        "cn1-leaf gen 0 no inventory"


def test_an_unbounded_max_unit_reads_no_limit(world):
    r = page(world, f"/ui/providers/{CN2}")
    units = dict(re.findall(r'<tr data-class="(\w+)">.*?<td class="n units">([^<]*)</td>',
                            r.text, re.S))
    # build_world gives no max_unit: Placement's default, 2147483647.
    assert units == {"MEMORY_MB": "1 / no limit / 1", "VCPU": "1 / no limit / 1"}
    assert "2147483647" not in r.text and "2,147,483,647" not in r.text
    call = _caller(world)
    gen = call("GET", f"/resource_providers/{CN2}")[1]["generation"]
    assert call("PUT", f"/resource_providers/{CN2}/inventories/MEMORY_MB", {
        "resource_provider_generation": gen, "total": 4096, "min_unit": 256,
        "max_unit": 2048, "step_size": 256})[0] == 200
    r = page(world, f"/ui/providers/{CN2}")
    units = dict(re.findall(r'<tr data-class="(\w+)">.*?<td class="n units">([^<]*)</td>',
                            r.text, re.S))
    assert units["MEMORY_MB"] == "256 / 2,048 / 256"


def test_histogram_bins_are_labelled_by_their_edges(world):
    r = page(world, "/ui/")
    vcpu = re.search(r'<figure data-class="VCPU">(.*?)</figure>', r.text, re.S).group(1)
    edges = re.findall(r'<text class="hist-edge"[^>]*>([^<]*)</text>', vcpu)
    assert edges == [f"{k}%" for k in range(0, 101, 10)]
    titles = re.findall(r'<g class="bin"><title>([^<]*)</title>', vcpu)
    assert titles[0] == "under 10% free (or no capacity): 0 providers"
    assert titles[5] == "50% to under 60% free: 2 providers"
    assert titles[9] == "90% to 100% free: 1 provider"
    assert "0% = full" not in text(r)
    assert "less than a tenth free" in text(r)


def test_static_css_is_served_from_the_package(world):
    r = world.simulate_get("/ui/static/console.css")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/css")
    assert ".over-tree" in r.text
    assert world.simulate_get("/ui/static/../app.py").status_code == 404


def test_pages_carry_a_strict_content_security_policy(world):
    r = page(world, "/ui/")
    csp = r.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "unsafe-inline" not in csp
    assert "<script" not in r.text and "http://" not in r.text.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")
    assert r.headers["x-frame-options"] == "DENY"


@pytest.mark.parametrize("backend", backend_urls(), ids=backend_id)
def test_every_page_answers_on_each_backend(backend):
    """The read functions' SQL on each database: same figures everywhere."""
    with fresh_database(backend) as database:
        client = _client(database, ui=True)
        build_world(_caller(client))
        for path in ("/ui/", f"/ui/?aggregate={AGG}&trait=HW_CPU_X86_AVX2",
                     "/ui/providers", "/ui/providers?q=cn1", f"/ui/providers/{NUMA0}",
                     f"/ui/providers/{CN2}?page=1", "/ui/projects", "/ui/projects?q=ac",
                     "/ui/projects/acme", f"/ui/consumers/{C2}", "/ui/consumers"):
            assert page(client, path).status_code == 200, path
        # The consumer search's LIKE (with its escapes) and owner lookups.
        assert _consumer_uuids(page(client, f"/ui/consumers?q={C2[3:11].upper()}"
                                            "&project=acme-dev&user=bob")) == [C2]
        assert _consumer_uuids(page(client, "/ui/consumers?q=_%25")) == []
        assert _tree_lines(page(client, f"/ui/providers/{NUMA0}"))[NUMA1] == \
            "cn1-numa1 gen 1 VCPU 0/8"
        assert _fleet_rows(page(client, "/ui/"))["VCPU"] == {
            "providers": 3, "capacity": 40, "used": 16, "free": 24}
        r = page(client, "/ui/projects")
        assert 'class="tree-card over-tree" data-root="acme"' in r.text
        assert 'class="tree-card" data-root="beta"' in r.text
        # The reservation pages' reads (ledger/calendar.py).
        reserve_world(database)
        rows = _reservation_rows(page(client, "/ui/reservations"))
        assert {u: (row[4], row[-1]) for u, row in rows.items()} == {
            R4: ("ended", "ended"), R5: ("active", "fits"), R1: ("pending", "Short"),
            R2: ("pending", "Short"), R3: ("pending", "fits")}
        assert list(_reservation_rows(page(
            client, f"/ui/reservations?provider={CN2}&status=pending&project=beta"))) == [R2]
        r = page(client, f"/ui/reservations/providers/{CN2}?{DAY_ONE}")
        assert re.findall(r'data-reserved="(\d+)"', r.text) == ["8", "14", "6"]
        r = page(client, f"/ui/reservations/projects/acme?{DAY_ONE}")
        assert re.findall(r'data-reserved="(\d+)"', r.text) == ["200", "8"]


def test_console_pages_are_not_in_the_openapi_document(world):
    doc = world.simulate_get("/openapi.json", headers=ADMIN).json
    assert not [p for p in doc["paths"] if p.startswith("/ui")]
    assert "/resource_providers" in doc["paths"]


def test_flat_model_judges_each_project_alone(db):
    client = _client(db, ui=True, quota_model="flat")
    build_world(_caller(client))
    r = page(client, "/ui/projects/acme")
    assert r.status_code == 200
    assert "model flat" in text(r)
    rows = {project: cls for cls, project in re.findall(
        r'<tr class="([^"]*)" data-resource="class:VCPU" data-project="([^"]+)">', r.text)}
    # acme-dev holds 10 against its own 8: over; acme 4 of 12; no tree total
    # (flat does not add a tree up).
    assert "over" in rows["acme-dev"].split() and "over" not in rows["acme"].split()
    assert 'data-project="tree"' not in r.text
    assert 'class="tree-card over-tree"' in r.text


# Reservations ------------------------------------------------------------------

T0 = 4102444800  # 2100-01-01T00:00:00Z: ahead of any run's now
HOUR, DAY = 3600, 86400
R1, R2, R3, R4, R5 = (_u(n) for n in ("r1", "r2", "r3", "r4", "r5"))
DAY_ONE = "from=2100-01-01T00:00:00Z&to=2100-01-03T00:00:00Z"


def reserve_world(db) -> None:
    """Reservations on build_world's cloud, written as the ledger stores
    them. On cn2 (VCPU capacity 24, 12 allocated): R1 (acme) 8 over
    06:00-18:00 on 1 January 2100 and R2 (beta) 6 over 12:00 to 12:00 the
    next day, together short (26 of 24) over 12:00-18:00; R3 (acme) 200
    DISK_GB of the shared disk over 2 January, which fits; R4 (beta) 30
    VCPU on cn2 that ended two days ago: history, not short; R5 (beta) 2
    VCPU on cn1-numa1 from a day ago to a day ahead: active."""
    import time

    from tests.reservation_rows import reservation

    now = int(time.time())
    with db.write() as conn:
        reservation(conn, T0 + 6 * HOUR, T0 + 18 * HOUR, {CN2: {"VCPU": 8}},
                    project="acme", user="alice", uuid=R1)
        reservation(conn, T0 + 12 * HOUR, T0 + 36 * HOUR, {CN2: {"VCPU": 6}},
                    project="beta", user="carol", uuid=R2)
        reservation(conn, T0 + DAY, T0 + 2 * DAY, {DISK: {"DISK_GB": 200}},
                    project="acme", user="alice", uuid=R3)
        reservation(conn, now - 3 * DAY, now - 2 * DAY, {CN2: {"VCPU": 30}},
                    project="beta", user="carol", uuid=R4)
        reservation(conn, now - DAY, now + DAY, {NUMA1: {"VCPU": 2}},
                    project="beta", user="carol", uuid=R5)


@pytest.fixture
def booked(world, db):
    reserve_world(db)
    return world


def _reservation_rows(result) -> dict:
    """uuid -> the row's cells as text, from a page's reservations table."""
    rows = {}
    for uuid, body in re.findall(r'<tr data-uuid="([^"]+)"[^>]*>(.*?)</tr>', result.text,
                                 flags=re.S):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", body, flags=re.S)
        rows[uuid] = [re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", c))).strip()
                      for c in cells]
    return rows


def test_the_reservations_list_shows_window_status_amounts_and_room(booked):
    r = page(booked, "/ui/reservations")
    assert r.status_code == 200
    assert '<a href="/ui/reservations" class="active" aria-current="page">Reservations</a>' \
        in r.text
    rows = _reservation_rows(r)
    # By start: the ended one first, then the active one.
    assert list(rows) == [R4, R5, R1, R2, R3]
    assert rows[R1] == [R1, "acme", "alice", "2100-01-01 06:00 → 2100-01-01 18:00",
                        "pending", "cn2 VCPU 8", "Short"]
    assert rows[R2][4:] == ["pending", "cn2 VCPU 6", "Short"]
    assert rows[R3][5:] == ["shared-disk DISK_GB 200", "fits"]
    assert rows[R4][4:] == ["ended", "cn2 VCPU 30", "ended"]
    assert rows[R5][4:] == ["active", "cn1-numa1 VCPU 2", "fits"]
    assert 'title="No room for VCPU on cn2 somewhere in its window"' in r.text
    assert list(_reservation_rows(page(booked, "/ui/reservations?project=acme"))) == [R1, R3]
    assert list(_reservation_rows(page(
        booked, f"/ui/reservations?provider={DISK.upper()}"))) == [R3]
    assert list(_reservation_rows(page(booked, "/ui/reservations?status=ended"))) == [R4]
    assert list(_reservation_rows(page(booked, "/ui/reservations?status=active"))) == [R5]
    none = page(booked, "/ui/reservations?project=nobody")
    assert "No reservation matches." in text(none)


def test_the_provider_timeline_draws_capacity_allocations_steps_and_short(booked):
    r = page(booked, f"/ui/reservations/providers/{CN2}?{DAY_ONE}")
    assert r.status_code == 200, text(r)
    seen = text(r)
    assert "Reservations on cn2" in seen
    assert "from 2100-01-01 00:00 to 2100-01-03 00:00 UTC" in seen
    vcpu = re.search(r'<figure class="timeline" data-class="VCPU">(.*?)</figure>',
                     r.text, flags=re.S).group(1)
    # Three steps with something reserved (8, 14, 6), one short interval.
    assert re.findall(r'<g class="tl-step" data-reserved="(\d+)">', vcpu) == ["8", "14", "6"]
    assert vcpu.count('class="tl-short"') == 1
    assert ("VCPU short from 2100-01-01 12:00 to 18:00 UTC: 14 reserved, 2 more "
            "than the room left") in unescape(vcpu)
    assert "VCPU: 14 reserved from 2100-01-01 12:00 to 18:00 UTC" in unescape(vcpu)
    assert "capacity 24" in vcpu and "allocated 12" in unescape(vcpu)
    # The axis in UTC dates: every three hours, the day named where it begins.
    labels = re.findall(r'<text class="tl-xlabel"[^>]*>([^<]+)</text>', vcpu)
    assert labels[:3] == ["00:00", "03:00", "06:00"] and len(labels) == 16
    assert re.findall(r'<text class="tl-xcontext"[^>]*>([^<]+)</text>', vcpu) == [
        "Fri 1 Jan 2100", "Sat 2 Jan 2100"]
    assert "times in UTC" in vcpu
    # MEMORY_MB has inventory and nothing reserved: a chart without steps.
    mem = re.search(r'data-class="MEMORY_MB">(.*?)</figure>', r.text, flags=re.S).group(1)
    assert 'class="tl-step"' not in mem and 'class="tl-short"' not in mem
    assert "allocated now (held from now on)" in seen and "short: allocated and reserved" \
        in seen
    assert list(_reservation_rows(r)) == [R1, R2]


def test_the_provider_timeline_is_the_apis_calendar(booked):
    api = booked.simulate_get(f"/reservations/calendar/resource_providers/{CN2}?{DAY_ONE}",
                              headers=ADMIN).json
    steps = api["classes"]["VCPU"]["steps"]
    r = page(booked, f"/ui/reservations/providers/{CN2}?{DAY_ONE}")
    drawn = re.findall(r'<g class="tl-step" data-reserved="(\d+)"><title>[^<]*'
                       r'reserved from ([\d-]+ [\d:]+) to', r.text)
    assert [(int(n), when) for n, when in drawn] == [
        (s["reserved"], s["start"][:16].replace("T", " ")) for s in steps if s["reserved"]]
    assert len(api["classes"]["VCPU"]["short"]) == r.text.count('class="tl-short" x=')


def test_the_project_timeline_sums_over_providers(booked):
    r = page(booked, f"/ui/reservations/projects/acme?{DAY_ONE}")
    assert r.status_code == 200
    classes = re.findall(r'<figure class="timeline" data-class="([^"]+)">', r.text)
    assert classes == ["DISK_GB", "VCPU"]
    assert re.findall(r'data-reserved="(\d+)"', r.text) == ["200", "8"]
    assert 'class="tl-capacity"' not in r.text.split('id="legend"')[1]
    assert "Reservations counted (2)" in text(r)
    assert list(_reservation_rows(r)) == [R1, R3]
    empty = page(booked, "/ui/reservations/projects/nobody")
    assert "Nothing reserved in this period." in text(empty)


def test_timeline_pages_are_linked_and_refuse_whom_the_api_refuses(booked):
    assert f'href="/ui/reservations/providers/{CN2}"' in page(
        booked, f"/ui/providers/{CN2}").text
    assert 'href="/ui/reservations/projects/acme"' in page(booked, "/ui/projects/acme").text
    for path in ("/ui/reservations", f"/ui/reservations/providers/{CN2}",
                 "/ui/reservations/projects/acme"):
        r = page(booked, path, token="alice:acme")
        assert r.status_code == 403, path
        assert "Policy does not allow placement:reservations:calendar" in text(r)
        assert "cn2" not in text(r)
    missing = page(booked, f"/ui/reservations/providers/{_u('nothing')}")
    assert missing.status_code == 404


def test_a_bad_period_says_why_and_shows_the_next_thirty_days(booked):
    r = page(booked, f"/ui/reservations/providers/{CN2}?from=2100-01-02&to=2100-01-01")
    assert r.status_code == 200
    assert ("'to' (2100-01-01T00:00:00Z) must be after 'from' (2100-01-02T00:00:00Z). "
            "Showing the next 30 days.") in text(r)
    week = page(booked, f"/ui/reservations/providers/{CN2}?from=2100-01-01&days=7")
    assert "from 2100-01-01 00:00 to 2100-01-08 00:00 UTC" in text(week)
    labels = re.findall(r'<text class="tl-xlabel"[^>]*>([^<]+)</text>', week.text)
    assert labels[:3] == ["Fri 1", "Sat 2", "Sun 3"]
