"""The console in a real browser: Debian's chromium, headless, driven by
Selenium through chromium-driver, against `placement-lite serve --ui`
with a loaded world. Asserts what a person sees (text on the page,
computed colours), and saves a screenshot of every page.

Skipped, saying why, when chromium, chromedriver or selenium is missing
(`apt-get install chromium chromium-driver`; `pip install selenium`).
Set PLACEMENT_LITE_UI_SCREENSHOTS=DIR to keep the screenshots there, and
PLACEMENT_LITE_UI_README_SHOT=PATH to write the Fleet page's for the
README (docs/console.png).
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile

import pytest

from tests import servers
from tests.backends import fresh_database
from tests.test_ui import AGG, C1, CN2, NUMA0, build_world

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


def test_consumer_lookup(browser, live, shots):
    _login(browser, live.base)
    browser.get(live.base + "/ui/consumers")
    box = browser.find_element(By.NAME, "uuid")
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
    assert browser.find_element(By.ID, "candidates").text == "1 candidate"
    # The funnel is drawn: one bar per step of the unnumbered group.
    funnels = browser.find_elements(By.CSS_SELECTOR, "svg.funnel")
    assert len(funnels) == 2
    assert len(funnels[0].find_elements(By.CSS_SELECTOR, "g.funnel-step")) == 2
    seen = _visible(browser)
    assert f"{NUMA0}: VCPU: needs 12, free 4 of capacity 8 (used 4)" in seen
    assert "In the answer: 1 candidate from its tree." in seen
    _shot(browser, shots, "explain")


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
