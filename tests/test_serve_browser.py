"""satcal serve in headless Chromium: a Prolific participant from the study URL to the
completion redirect, clicking as a person would; hostile document text shown as text."""
import json

import pytest

from browser import chromium_fixture, keep_screenshots

pytestmark = pytest.mark.slow  # end to end: deselect with -m 'not slow'

CODE = "BR0WSER1"


@pytest.fixture(scope="module")
def driver():
    yield from chromium_fixture(performance_log=True)


@pytest.fixture(scope="module")
def server(make_workspace):
    from satcal.serve.client import ServerProcess
    ws = make_workspace(lambda doc: f"<img src=x onerror=\"document.title='pwned'\">Doc {doc}",
                        min_per_cell=10, platform="serve")
    text = (ws.path / "study.toml").read_text()
    text = text.replace('completion_code = ""', f'completion_code = "{CODE}"')
    text = text.replace("pages_per_participant = 5", "pages_per_participant = 2")
    text = text.replace("duration_minutes = 0", "duration_minutes = 12").replace('pay = ""', 'pay = "GBP 2.00"')
    text = text.replace('contact = ""', 'contact = "lab@example.org"')
    (ws.path / "study.toml").write_text(text)
    ws.export()
    with ServerProcess(ws.path) as running:
        yield ws, running


def _requested_urls(driver):
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def _submit(driver):
    """Click the form's button and wait until the browser has loaded the next page (a click
    returns before the navigation it starts).

    While the old document is being torn down, chromedriver may answer a question about the
    button with a generic inspector error ("Node with given id does not belong to the
    document") rather than a stale-element one; both mean the page is going, so the wait
    asks again instead of failing.
    """
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait
    button = driver.find_element(By.CSS_SELECTOR, "button[type=submit]")
    button.click()
    wait = WebDriverWait(driver, 30, ignored_exceptions=(WebDriverException,))
    wait.until(expected_conditions.staleness_of(button))
    wait.until(lambda d: d.execute_script("return document.readyState") == "complete")


def test_prolific_participant_in_chromium(driver, server, tmp_path):
    from selenium.webdriver.common.by import By
    ws, running = server
    driver.get(f"{running.url}/?PROLIFIC_PID=60a1b2c3d4e5f60718293a4b&STUDY_ID=st&SESSION_ID=se")
    assert driver.find_element(By.CSS_SELECTOR, "h1").text == "Which search results are better?"
    driver.save_screenshot(str(tmp_path / "consent.png"))
    driver.find_element(By.NAME, "consent").click()
    _submit(driver)
    pages = 0
    while driver.find_elements(By.CSS_SELECTOR, "section.item"):
        pages += 1
        items = driver.find_elements(By.CSS_SELECTOR, "section.item")
        for item in items:
            check = item.find_elements(By.CSS_SELECTOR, "p.check strong")
            if check:  # an attention check: do as it says
                wanted = check[0].text
                label = [l for l in item.find_elements(By.TAG_NAME, "label") if l.text.strip() == wanted][0]
                label.click()
                continue
            lists = item.find_elements(By.CSS_SELECTOR, ".list")
            assert [l.find_element(By.TAG_NAME, "h3").text for l in lists] == ["System A", "System B"]
            # side by side: B starts to the right of A, on the same row
            a, b = lists[0].rect, lists[1].rect
            assert b["x"] >= a["x"] + a["width"] - 1 and abs(b["y"] - a["y"]) < 5
            # the hostile title is text: shown, not run
            assert "<img" in lists[0].find_element(By.CSS_SELECTOR, "li .title").text
            item.find_elements(By.CSS_SELECTOR, "input[type=radio]")[2].click()
        if pages == 1:
            driver.save_screenshot(str(tmp_path / "page.png"))
        _submit(driver)
    assert pages == 2
    assert driver.title != "pwned"
    assert f"https://app.prolific.com/submissions/complete?cc={CODE}" in _requested_urls(driver)
    shots = sorted(p.name for p in tmp_path.glob("*.png"))
    assert shots == ["consent.png", "page.png"]
    keep_screenshots(*tmp_path.glob("*.png"))


def test_phone_keeps_lists_side_by_side_and_consent_says_duration_pay_contact(driver, server, tmp_path):
    from selenium.webdriver.common.by import By
    ws, running = server
    driver.set_window_size(390, 844)
    try:
        driver.get(f"{running.url}/?PROLIFIC_PID=60a1b2c3d4e5f60718293a99&STUDY_ID=st&SESSION_ID=ph")
        about = driver.find_element(By.CSS_SELECTOR, "section.about").text
        assert "about 12 minutes" in about and "GBP 2.00" in about and "lab@example.org" in about
        driver.save_screenshot(str(tmp_path / "phone-consent.png"))
        driver.find_element(By.NAME, "consent").click()
        _submit(driver)
        width = driver.execute_script("return window.innerWidth")
        for item in driver.find_elements(By.CSS_SELECTOR, "section.item"):
            lists = item.find_elements(By.CSS_SELECTOR, ".list")
            if not lists:
                continue  # an attention check
            a, b = lists[0].rect, lists[1].rect  # two columns on a phone, within the screen
            assert b["x"] >= a["x"] + a["width"] - 1 and abs(b["y"] - a["y"]) < 5
            assert b["x"] + b["width"] <= width
        assert driver.execute_script("return document.documentElement.scrollWidth") <= width  # no sideways scroll
        driver.save_screenshot(str(tmp_path / "phone-page.png"))
    finally:
        driver.set_window_size(1280, 1000)
    from satcal.serve import HostedStudy
    study = ws.hosted_study()
    driver.get(f"{running.url}/status/{study.status_token}")
    study.engine.dispose()
    # the researcher's page has its own title, and lists this phone participant with their page
    assert driver.title == "Study status (researcher's page)"
    assert "60a1b2c3d4e5f60718293a99" in driver.find_element(By.CSS_SELECTOR, "table.wide").text
    cells = driver.find_elements(By.XPATH, "//h2[text()='Each page']/following-sibling::table[1]//tbody/tr/td[2]")
    assert sum(int(c.text) for c in cells) == len(ws.table("items.csv"))  # items on each page, all pages
    driver.save_screenshot(str(tmp_path / "status.png"))
    keep_screenshots(*tmp_path.glob("*.png"))
