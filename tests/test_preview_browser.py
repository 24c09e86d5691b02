"""satcal preview, driven in headless Chromium: what a worker sees and what a click records."""
import shutil

import pytest


from browser import ensure_chromium, start_driver


@pytest.fixture(scope="module")
def driver():
    pytest.importorskip("selenium")
    reason = ensure_chromium()
    if reason:
        pytest.skip(reason)
    drv, profile = start_driver()
    yield drv
    drv.quit()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def preview(make_workspace):
    ws = make_workspace(lambda doc: f"<script>document.title='pwned'</script>Song {doc}",
                        min_per_cell=10, platform="csv")
    ws.export()
    return ws, ws.preview(n=4)


def test_preview_renders_and_records(driver, preview):
    from selenium.webdriver.common.by import By

    ws, path = preview
    driver.get(path.as_uri())
    items = driver.find_elements(By.CSS_SELECTOR, "section.item")
    assert len(items) == 4
    assert driver.title.startswith("Preview")  # the <script> in a title did not run
    for item in items:
        lists = item.find_elements(By.CSS_SELECTOR, ".list")
        assert [l.find_element(By.TAG_NAME, "h3").text for l in lists] == ["System A", "System B"]
        for l in lists:
            docs = l.find_elements(By.CSS_SELECTOR, "li")
            assert len(docs) == ws.k
            assert docs[0].text.startswith("<script>document.title='pwned'</script>Song ")
        options = item.find_elements(By.CSS_SELECTOR, "input[type=radio]")
        assert [o.get_attribute("value") for o in options] == ["a_better", "b_better", "both_good", "both_bad"]
    item = items[1]
    item_id = item.get_attribute("data-item")
    for code in ("b_better", "both_bad", "a_better"):
        item.find_element(By.CSS_SELECTOR, f"input[value={code}]").click()
        assert driver.find_element(By.ID, f"chosen-{item_id}").text == code
    # the items shown are the exported ones
    shown = {i.get_attribute("data-item") for i in items}
    assert shown <= set(ws.table("items.csv")["item_id"])
