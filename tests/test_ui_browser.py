"""The console in a real browser: Debian's chromium, headless, driven by
Selenium through chromium-driver, against `placement-lite serve --ui`
with a loaded world. Asserts what a person sees (text on the page,
computed colours), and saves a screenshot of every page.

Skipped, saying why, when chromium, chromedriver or selenium is missing
(`apt-get install chromium chromium-driver`; `pip install selenium`).
Set PLACEMENT_LITE_UI_SCREENSHOTS=DIR to keep the screenshots there, and
PLACEMENT_LITE_UI_README_SHOT=PATH to write the Fleet page's for the
README (docs/console.png), PLACEMENT_LITE_UI_TIMELINE_SHOT=PATH a
provider's reservation timeline (docs/reservations-timeline.png).
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile

import pytest

from tests import servers
from tests.backends import fresh_database
from tests.test_ui import (
    AGG, C1, C2, C3, CN1, CN2, NUMA0, NUMA1, R1, R2, R3, R4, R5, build_world,
    reserve_world)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver") or (
    "/usr/bin/chromedriver" if os.path.exists("/usr/bin/chromedriver") else None)
try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:  # pragma: no cover - depends on the install
    webdriver = None

pytestmark = [
    pytest.mark.skipif(webdriver is None, reason="selenium is not installed "
                       "(pip install selenium)"),
    pytest.mark.skipif(CHROMIUM is None or CHROMEDRIVER is None,
                       reason="chromium and chromedriver are not installed "
                       "(apt-get install chromium chromium-driver)"),
]


@pytest.fixture(scope="module")
def live():
    with fresh_database("sqlite") as db:
        db.dispose()
        with servers.serve(db.url, "--ui", "--quota-model", "strict_two_level") as srv:
            def call(method, path, body=None):
                status, _h, parsed = srv.request(method, path, body, version="latest")
                return status, parsed
            build_world(call)
            reserve_world(db)
            yield srv


@pytest.fixture(scope="module")
def shots():
    keep = os.environ.get("PLACEMENT_LITE_UI_SCREENSHOTS")
    path = keep or tempfile.mkdtemp(prefix="pl-ui-shots-")
    os.makedirs(path, exist_ok=True)
    yield path
    if not keep:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def browser():
    profile = tempfile.mkdtemp(prefix="pl-ui-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1280,900",
                 f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _visible(driver) -> str:
    return driver.find_element(By.TAG_NAME, "body").text


def _shot(driver, shots, name):
    # The whole page, not just the window: grow the window to the page.
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, max(700, min(int(height) + 40, 4000)))
    path = os.path.join(shots, f"{name}.png")
    assert driver.save_screenshot(path)
    assert os.path.getsize(path) > 5000
    driver.set_window_size(1280, 900)
    return path


def _wait_for(driver, suffix):
    """Wait for a navigation a click or a submit started to land."""
    WebDriverWait(driver, 15).until(lambda d: d.current_url.endswith(suffix))


def _login(driver, base, token="admin"):
    driver.get(base + "/ui/login")
    box = driver.find_element(By.ID, "token")
    box.clear()
    box.send_keys(token)
    box.submit()
    _wait_for(driver, "/ui/")


def _cells(row) -> list:
    """The text of each cell of a table row, as a person reads it."""
    return [td.text for td in row.find_elements(By.TAG_NAME, "td")]


def _rgb(css: str) -> tuple:
    return tuple(int(x) for x in re.findall(r"\d+", css)[:3])


def test_login_and_the_cookie(browser, live, shots):
    browser.delete_all_cookies()
    browser.get(live.base + "/ui/")
    assert browser.current_url.endswith("/ui/login")
    _shot(browser, shots, "login")
    _login(browser, live.base)
    assert browser.current_url == live.base + "/ui/"
    assert "token" not in browser.current_url
    (cookie,) = browser.get_cookies()
    assert cookie["name"] == "placement_lite_console"
    assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict"
    assert cookie["path"] == "/ui"
    # No script on the page can read it.
    assert "placement_lite_console" not in browser.execute_script(
        "return document.cookie")


def test_fleet_page(browser, live, shots):
    _login(browser, live.base)
    browser.get(live.base + "/ui/")
    seen = _visible(browser)
    assert "5 resource providers in all" in seen
    row = browser.find_element(By.CSS_SELECTOR, 'tr[data-class="VCPU"]')
    assert _cells(row)[:5] == ["VCPU", "3", "40", "16", "24"]
    disk = browser.find_element(By.CSS_SELECTOR, 'tr[data-class="DISK_GB"]')
    assert _cells(disk)[:5] == ["DISK_GB", "1", "900", "100", "800"]
    # The bar and the histogram are drawn (inline SVG) and visible.
    bar = browser.find_element(By.CSS_SELECTOR, 'tr[data-class="VCPU"] svg.bar rect.bar-used')
    assert 80 < float(bar.get_attribute("width")) < 95  # 16 of 40 of 220 px
    hist = browser.find_element(By.CSS_SELECTOR, 'figure[data-class="VCPU"] svg.histogram')
    assert hist.is_displayed() and hist.size["width"] >= 300
    counts = [t.text for t in hist.find_elements(By.CSS_SELECTOR, "text.hist-count")]
    assert counts == ["0", "0", "0", "0", "0", "2", "0", "0", "0", "1"]
    # The bars are labelled by their edges, each label whole, inside the
    # chart and clear of its neighbours.
    edges = browser.execute_script(
        "const svg = arguments[0], w = svg.viewBox.baseVal.width;"
        "return [...svg.querySelectorAll('text.hist-edge')].map(t => {"
        "  const b = t.getBBox(); return [t.textContent, b.x, b.x + b.width, w]; });",
        hist)
    assert [e[0] for e in edges] == [f"{k}%" for k in range(0, 101, 10)]
    for text, left, right, width in edges:
        assert 0 <= left and right <= width, (text, left, right, width)
    for (a, _l, a_right, _w), (b, b_left, _r, _w2) in zip(edges, edges[1:]):
        assert a_right < b_left, (a, b)
    hint = browser.find_element(By.ID, "histogram-hint").text
    assert "less than a tenth free" in hint and "0% = full" not in hint
    # The stylesheet was served from the package and applied.
    header = browser.find_element(By.CSS_SELECTOR, "header.top")
    assert _rgb(header.value_of_css_property("background-color")) == (18, 38, 58)
    path = _shot(browser, shots, "fleet")
    readme = os.environ.get("PLACEMENT_LITE_UI_README_SHOT")
    if readme:
        shutil.copyfile(path, readme)
    browser.get(live.base + f"/ui/?aggregate={AGG}")
    row = browser.find_element(By.CSS_SELECTOR, 'tr[data-class="VCPU"]')
    assert _cells(row)[:5] == ["VCPU", "1", "24", "12", "12"]


def test_providers_pages(browser, live, shots):
    _login(browser, live.base)
    browser.get(live.base + "/ui/providers")
    names = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#providers td:first-child a")]
    assert names == ["cn1", "cn1-numa0", "cn1-numa1", "cn2", "shared-disk"]
    # The parent by its name, linked to it.
    parents = [td.text for td in browser.find_elements(By.CSS_SELECTOR, "#providers td.parent")]
    assert parents == ["a root", "cn1", "cn1", "a root", "a root"]
    link = browser.find_elements(By.CSS_SELECTOR, "#providers td.parent a")[0]
    assert link.get_attribute("href").endswith(f"/ui/providers/{CN1}")
    _shot(browser, shots, "providers")
    box = browser.find_element(By.NAME, "q")
    box.send_keys("numa")
    box.submit()
    _wait_for(browser, "?q=numa")
    names = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#providers td:first-child a")]
    assert names == ["cn1-numa0", "cn1-numa1"]
    browser.find_element(By.LINK_TEXT, "cn1-numa0").click()
    _wait_for(browser, f"/ui/providers/{NUMA0}")
    seen = _visible(browser)
    tree = browser.find_element(By.ID, "tree").text
    assert "cn1" in tree and "cn1-numa1" in tree and "shared-disk" in tree
    here = browser.find_element(By.CSS_SELECTOR, "ul.tree li.here")
    assert here.text.startswith("cn1-numa0")
    inv = browser.find_element(By.CSS_SELECTOR, '#inventories tr[data-class="VCPU"]')
    assert _cells(inv)[:3] == ["VCPU", "4", "8"]
    assert _cells(inv)[-1] == "1 / no limit / 1"
    # Every member of the tree with its usage, not only the one shown.
    lines = [li.text for li in browser.find_elements(By.CSS_SELECTOR, "ul.tree li")]
    assert lines == ["cn1 gen 4 MEMORY_MB 1,024/8,192", "cn1-numa0 gen 2 VCPU 4/8",
                     "cn1-numa1 gen 1 VCPU 0/8"]
    assert browser.find_element(By.ID, "parent").text.startswith("cn1 ")
    assert C1 in seen and "alice" in seen
    _shot(browser, shots, "provider")
    browser.get(live.base + f"/ui/providers/{CN2}")
    assert "acme-dev" in _visible(browser) and "beta" in _visible(browser)


def test_projects_page_highlights_the_over_limit_tree(browser, live, shots):
    _login(browser, live.base)
    browser.get(live.base + "/ui/projects")
    acme = browser.find_element(By.CSS_SELECTOR, 'article[data-root="acme"]')
    beta = browser.find_element(By.CSS_SELECTOR, 'article[data-root="beta"]')
    assert "Over limit" in acme.text and "Over limit" not in beta.text
    red = (198, 40, 40)
    assert _rgb(acme.value_of_css_property("border-left-color")) == red
    assert _rgb(beta.value_of_css_property("border-left-color")) != red
    assert _rgb(acme.value_of_css_property("background-color")) != _rgb(
        beta.value_of_css_property("background-color"))
    badge = acme.find_element(By.CSS_SELECTOR, ".badge")
    assert _rgb(badge.value_of_css_property("background-color")) == red
    dev = acme.find_element(By.CSS_SELECTOR, 'tr[data-project="acme-dev"]')
    assert _cells(dev)[1:5] == ["└ Acme dev", "8 override", "10", "-2"]
    cell = dev.find_element(By.CSS_SELECTOR, "td.usage")
    assert cell.text == "10" and _rgb(cell.value_of_css_property("color")) == red
    fine = beta.find_element(By.CSS_SELECTOR, 'tr[data-project="beta"] td.usage')
    assert fine.text == "2" and _rgb(fine.value_of_css_property("color")) != red
    _shot(browser, shots, "projects")
    acme.find_element(By.LINK_TEXT, "Acme").click()
    _wait_for(browser, "/ui/projects/acme")
    seen = _visible(browser)
    assert "Whole tree 12 14 -2" in seen
    assert "Lease budget ledger" in seen
    _shot(browser, shots, "project")


def test_consumer_search(browser, live, shots):
    _login(browser, live.base)
    browser.get(live.base + "/ui/consumers")
    shown = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#consumers td.uuid a")]
    assert shown == sorted([C1, C2, C3])
    box = browser.find_element(By.NAME, "q")
    box.send_keys(C2[4:12].upper())
    box.submit()
    WebDriverWait(browser, 15).until(lambda d: "q=" in d.current_url)
    rows = browser.find_elements(By.CSS_SELECTOR, "#consumers tbody tr")
    assert [_cells(r)[:4] for r in rows] == [[C2, "acme-dev", "bob", "INSTANCE"]]
    browser.get(live.base + "/ui/consumers")
    browser.find_element(By.NAME, "project").send_keys("beta")
    browser.find_element(By.NAME, "project").submit()
    WebDriverWait(browser, 15).until(lambda d: "project=beta" in d.current_url)
    rows = browser.find_elements(By.CSS_SELECTOR, "#consumers tbody tr")
    assert [_cells(r)[:3] for r in rows] == [[C3, "beta", "carol"]]
    _shot(browser, shots, "consumers")


def test_consumer_lookup(browser, live, shots):
    _login(browser, live.base)
    browser.get(live.base + "/ui/consumers")
    box = browser.find_element(By.NAME, "q")
    box.send_keys(C1)
    box.submit()
    _wait_for(browser, f"/ui/consumers/{C1}")
    assert browser.find_element(By.ID, "consumer-project").text == "acme"
    assert browser.find_element(By.ID, "consumer-user").text == "alice"
    assert browser.find_element(By.ID, "consumer-type").text == "INSTANCE"
    rows = [r.text for r in browser.find_elements(By.CSS_SELECTOR, "#allocations tbody tr")]
    assert "shared-disk DISK_GB 100" in rows and "cn1-numa0 VCPU 4" in rows
    _shot(browser, shots, "consumer")


def test_explain_a_query(browser, live, shots):
    _login(browser, live.base)
    browser.find_element(By.LINK_TEXT, "Explain").click()
    _wait_for(browser, "/ui/explain")
    browser.find_element(By.ID, "query").send_keys("resources=VCPU:12,DISK_GB:10")
    box = browser.find_element(By.ID, "providers")
    box.send_keys(f"{NUMA0} {CN2}")
    box.submit()
    WebDriverWait(browser, 15).until(
        lambda d: d.find_elements(By.ID, "candidates"))
    # cn2 has the room by what is allocated (12 of 24), but R1 and R2
    # hold 14 together in 2100: as GET /allocation_candidates, no candidate.
    assert browser.find_element(By.ID, "candidates").text == "0 candidates"
    # The funnel is drawn: one bar per step of the unnumbered group, the
    # reservations' step after the capacity ones.
    funnels = browser.find_elements(By.CSS_SELECTOR, "ol.funnel")
    assert len(funnels) == 2
    assert len(funnels[0].find_elements(By.CSS_SELECTOR, "li.funnel-step svg.bar")) == 3
    labels = [text for text, _whole, _clear in _funnel_labels(browser)]
    assert labels[:3] == ["resources DISK_GB:10", "resources VCPU:12",
                          "reserved_ahead the most reserved at any instant from now on"]
    seen = _visible(browser)
    assert f"{NUMA0}: VCPU: needs 12, free 4 of capacity 8 (used 4)" in seen
    assert (f"reserved_ahead (group unnumbered): {CN2}: VCPU: needs 12, free -2 of "
            "capacity 24 (used 12, reserved ahead 14)") in seen
    # What lacks room there from now on, and where to see it.
    short = browser.find_element(By.ID, f"short-{CN2}")
    assert [li.text for li in short.find_elements(By.TAG_NAME, "li")] == [
        f"reservation {R1}: VCPU lacks 2 from 2100-01-01T12:00:00Z",
        f"reservation {R2}: VCPU lacks 2 from 2100-01-01T12:00:00Z"]
    _shot(browser, shots, "explain")
    short.find_element(By.LINK_TEXT, "2100-01-01T12:00:00Z").click()
    _wait_for(browser, f"/ui/reservations/providers/{CN2}?from=2100-01-01&days=2")


def _funnel_labels(driver) -> list:
    """Each funnel label: its visible text, whether its box holds all of
    it, and whether it ends before its bar begins."""
    return driver.execute_script(
        "return [...document.querySelectorAll('.funnel-label')].map(l => {"
        "  const bar = l.nextElementSibling.getBoundingClientRect();"
        "  return [l.innerText.replace(/\\s+/g, ' ').trim(),"
        "          l.scrollWidth <= l.clientWidth && l.scrollHeight <= l.clientHeight,"
        "          l.getBoundingClientRect().right <= bar.left]; });")


def test_explain_shows_every_label_whole_and_no_none(browser, live, shots):
    _login(browser, live.base)
    query = "resources=VCPU:80,MEMORY_MB:8192&required=HW_CPU_X86_SSE42"
    browser.get(live.base + "/ui/explain")
    browser.find_element(By.ID, "query").send_keys(query)
    browser.find_element(By.ID, "query").submit()
    WebDriverWait(browser, 15).until(lambda d: d.find_elements(By.ID, "candidates"))
    steps = []
    for table in browser.find_elements(By.CSS_SELECTOR, "table.steps"):
        steps += [_cells(r) for r in table.find_elements(By.CSS_SELECTOR, "tbody tr")]
    labels = _funnel_labels(browser)
    # Each bar's label is the step's whole name, as in its table, and all
    # of it is in view: no box cuts it and it does not run into the bar.
    assert [text for text, _whole, _clear in labels] == [f"{c[0]} {c[1]}" for c in steps]
    assert "resources MEMORY_MB:8192" in [x[0] for x in labels]
    assert "required HW_CPU_X86_SSE42" in [x[0] for x in labels]
    assert all(whole and clear for _t, whole, clear in labels), labels
    # Counts a step does not make are a dash, never Python's None.
    search = {c[0]: c[2:] for c in steps if c[0] in ("offered", "limit")}
    assert search == {"offered": ["—", "0 trees"],
                      "limit": ["0 candidates", "0 candidates"]}
    assert "None" not in _visible(browser)
    # A narrow window wraps long names rather than cutting them.
    browser.set_window_size(700, 900)
    try:
        assert all(whole and clear for _t, whole, clear in _funnel_labels(browser))
    finally:
        browser.set_window_size(1280, 900)
    _shot(browser, shots, "explain-no-candidate")


def test_a_caller_without_rights_sees_the_refusal(browser, live, shots):
    _login(browser, live.base, token="alice:acme")
    browser.get(live.base + "/ui/")
    detail = browser.find_element(By.ID, "detail")
    assert detail.text.startswith(
        "Policy does not allow placement:resource_providers:list to be performed.")
    assert "VCPU" not in _visible(browser)
    _shot(browser, shots, "refused")
    browser.find_element(By.CSS_SELECTOR, "form.who button").click()
    _wait_for(browser, "/ui/login")
    assert browser.get_cookies() == []


RED = (198, 40, 40)


def test_the_reservations_list(browser, live, shots):
    _login(browser, live.base)
    browser.find_element(By.LINK_TEXT, "Reservations").click()
    _wait_for(browser, "/ui/reservations")
    rows = browser.find_elements(By.CSS_SELECTOR, "#reservations tbody tr")
    assert [r.get_attribute("data-uuid") for r in rows] == [R4, R5, R1, R2, R3]
    assert _cells(rows[2]) == [R1, "acme", "alice", "2100-01-01 06:00 → 2100-01-01 18:00",
                               "pending", "cn2 VCPU 8", "Short"]
    badge = rows[2].find_element(By.CSS_SELECTOR, "td.room .badge")
    assert _rgb(badge.value_of_css_property("background-color")) == RED
    assert badge.get_attribute("title") == "No room for VCPU on cn2 somewhere in its window"
    assert [_cells(r)[4] for r in rows] == ["ended", "active", "pending", "pending", "pending"]
    assert [_cells(r)[-1] for r in rows] == ["ended", "fits", "Short", "Short", "fits"]
    _shot(browser, shots, "reservations")
    browser.find_element(By.NAME, "project").send_keys("beta")
    browser.find_element(By.NAME, "project").submit()
    WebDriverWait(browser, 15).until(lambda d: "project=beta" in d.current_url)
    rows = browser.find_elements(By.CSS_SELECTOR, "#reservations tbody tr")
    assert [r.get_attribute("data-uuid") for r in rows] == [R4, R5, R2]


def _drawn(driver, figure) -> dict:
    """What the chart of one figure draws, read from the rendered SVG."""
    return driver.execute_script(
        "const f = arguments[0], q = s => [...f.querySelectorAll(s)];"
        "const box = e => { const b = e.getBBox(); return [b.x, b.x + b.width, b.y]; };"
        "return {steps: q('g.tl-step').map(g => [g.dataset.reserved,"
        "          g.querySelector('title').textContent, box(g)]),"
        "  short: q('g.tl-short-interval').map(g => [g.querySelector('title').textContent,"
        "          getComputedStyle(g.querySelector('rect.tl-short')).fill])," 
        "  capacity: q('line.tl-capacity').map(l => l.y1.baseVal.value),"
        "  labels: q('text.tl-xlabel').map(t => [t.textContent, ...box(t)]),"
        "  context: q('text.tl-xcontext').map(t => t.textContent),"
        "  width: f.querySelector('svg').viewBox.baseVal.width};", figure)


def test_a_providers_timeline(browser, live, shots):
    _login(browser, live.base)
    browser.get(live.base + f"/ui/providers/{CN2}")
    browser.find_element(By.LINK_TEXT, "Timeline of what is reserved here").click()
    _wait_for(browser, f"/ui/reservations/providers/{CN2}")
    # The period, typed in as a person would.
    for name, value in (("from", "2100-01-01"), ("to", "2100-01-03 00:00")):
        box = browser.find_element(By.NAME, name)
        box.clear()
        box.send_keys(value)
    box.submit()
    WebDriverWait(browser, 15).until(lambda d: "to=2100-01-03" in d.current_url)
    seen = _visible(browser)
    assert "from 2100-01-01 00:00 to 2100-01-03 00:00 UTC" in seen
    legend = browser.find_element(By.ID, "legend").text
    assert legend.split("\n") == [
        "capacity", "allocated now (held from now on)",
        "reserved (on top of the allocations from now on)",
        "short: allocated and reserved exceed capacity (in red, what does not fit)"]
    vcpu = browser.find_element(By.CSS_SELECTOR, 'figure[data-class="VCPU"]')
    assert vcpu.is_displayed()
    assert "capacity 24 · allocated 12 · most reserved 14" in vcpu.text
    drawn = _drawn(browser, vcpu)
    # Three reserved bars; the one of 14 rises above the capacity line.
    assert [s[0] for s in drawn["steps"]] == ["8", "14", "6"]
    assert drawn["steps"][1][1] == "VCPU: 14 reserved from 2100-01-01 12:00 to 18:00 UTC"
    (capacity_y,) = drawn["capacity"]
    assert drawn["steps"][1][2][2] < capacity_y < drawn["steps"][0][2][2]
    # One short interval, in red, where the 14 is.
    (short,) = drawn["short"]
    assert short[0] == ("VCPU short from 2100-01-01 12:00 to 18:00 UTC: 14 reserved, "
                        "2 more than the room left")
    assert _rgb(short[1]) == RED
    assert "Short 2100-01-01 12:00 → 2100-01-01 18:00 UTC: 14 reserved, 2 more than " \
        "the room left" in vcpu.text
    # The axis: every three hours, the day where it begins, labels apart.
    assert [x[0] for x in drawn["labels"][:3]] == ["00:00", "03:00", "06:00"]
    assert drawn["context"] == ["Fri 1 Jan 2100", "Sat 2 Jan 2100"]
    for (a, _l, a_right, _y), (b, b_left, _r, _y2) in zip(drawn["labels"], drawn["labels"][1:]):
        assert a_right < b_left, (a, b)
    assert 0 <= drawn["labels"][0][1] and drawn["labels"][-1][2] <= drawn["width"]
    assert "times in UTC" in vcpu.text
    rows = browser.find_elements(By.CSS_SELECTOR, "#reservations tbody tr")
    assert [r.get_attribute("data-uuid") for r in rows] == [R1, R2]
    path = _shot(browser, shots, "reservations-provider")
    keep = os.environ.get("PLACEMENT_LITE_UI_TIMELINE_SHOT")
    if keep:
        shutil.copyfile(path, keep)


def test_a_projects_timeline(browser, live, shots):
    _login(browser, live.base)
    browser.get(live.base + "/ui/reservations")
    browser.find_element(By.CSS_SELECTOR, f'tr[data-uuid="{R3}"] td a').click()
    _wait_for(browser, "/ui/reservations/projects/acme")
    browser.get(live.base + "/ui/reservations/projects/acme?from=2100-01-01&days=7")
    figures = browser.find_elements(By.CSS_SELECTOR, "figure.timeline")
    assert [f.get_attribute("data-class") for f in figures] == ["DISK_GB", "VCPU"]
    assert [s[0] for s in _drawn(browser, figures[0])["steps"]] == ["200"]
    drawn = _drawn(browser, figures[1])
    assert [s[1] for s in drawn["steps"]] == [
        "VCPU: 8 reserved from 2100-01-01 06:00 to 18:00 UTC"]
    assert drawn["capacity"] == [] and drawn["short"] == []
    assert [x[0] for x in drawn["labels"][:3]] == ["Fri 1", "Sat 2", "Sun 3"]
    assert browser.find_element(By.ID, "legend").text == "reserved"
    assert "Reservations counted (2)" in _visible(browser)
    _shot(browser, shots, "reservations-project")


def test_a_timeline_across_now(browser, live, shots):
    """Two days either side of now on cn1-numa1: the running reservation's
    bar crosses the dashed line marking now."""
    import datetime as dt
    import time
    _login(browser, live.base)
    day = dt.datetime.utcfromtimestamp(time.time() - 2 * 86400).strftime("%Y-%m-%d")
    browser.get(live.base + f"/ui/reservations/providers/{NUMA1}?from={day}&days=4")
    vcpu = browser.find_element(By.CSS_SELECTOR, 'figure[data-class="VCPU"]')
    now = vcpu.find_element(By.CSS_SELECTOR, "line.tl-now")
    # A vertical line has no width, which Selenium counts as not shown:
    # ask for its height and its colour instead.
    assert now.rect["height"] > 100
    assert _rgb(now.value_of_css_property("stroke")) == (224, 161, 0)
    assert vcpu.find_element(By.CSS_SELECTOR, "text.tl-now-label").text == "now"
    drawn = _drawn(browser, vcpu)
    (step,) = drawn["steps"]
    assert step[0] == "2" and step[1].startswith("VCPU: 2 reserved from ")
    x = float(now.get_attribute("x1"))
    assert step[2][0] < x < step[2][1]
    assert drawn["short"] == []
    rows = browser.find_elements(By.CSS_SELECTOR, "#reservations tbody tr")
    assert [(r.get_attribute("data-uuid"), _cells(r)[4]) for r in rows] == [(R5, "active")]
    _shot(browser, shots, "reservations-now")
