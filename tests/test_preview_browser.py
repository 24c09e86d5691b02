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


HOSTILE_QUERIES = ["<script>document.title='X'</script>", "<svg/onload=document.title='Y'>",
                   "\"><img src=x onerror=document.title='W'>"]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """A text study whose query ids are scripts and whose document URLs are javascript: links."""
    import pandas as pd
    from satcal.workspace import Workspace
    d = tmp_path_factory.mktemp("hostile")
    rows = [(q, f"d{qi}_{i}", i % 3) for qi, q in enumerate(HOSTILE_QUERIES) for i in range(18)]
    pd.DataFrame(rows, columns=["query", "doc", "level"]).to_csv(d / "qrels.tsv", sep="\t", index=False)
    docs = pd.DataFrame({"doc": [r[1] for r in rows]})
    docs["title"] = "Doc " + docs["doc"]
    docs["url"] = "javascript:document.title='Z'"
    docs.loc[::2, "url"] = "https://example.org/" + docs["doc"]
    docs["audio_url"] = "javascript:document.title='A'"
    docs.to_csv(d / "docs.csv", index=False)
    ws = Workspace.init(d / "study", d / "qrels.tsv", d / "docs.csv", min_per_cell=2, platform="csv")
    ws.generate()
    ws.export()
    return ws, ws.preview(n=8)


def test_hostile_query_ids_and_urls_run_no_script(driver, hostile):
    from selenium.webdriver.common.by import By
    ws, path = hostile
    for page in (path, ws.path / "batches" / "csv" / "template.html"):
        driver.get(page.as_uri())
        before = driver.title
        assert before not in ("X", "Y", "W", "Z", "A")
        queries = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "span.query")]
        assert queries and set(queries) <= set(HOSTILE_QUERIES)  # shown as text
        links = driver.find_elements(By.CSS_SELECTOR, "a")
        assert links and all(l.get_attribute("href").startswith("https://") for l in links)
        for audio in driver.find_elements(By.TAG_NAME, "audio"):
            assert not audio.get_attribute("src").lower().startswith("javascript")
        texts = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "div.url")]
        assert texts and set(texts) <= {"javascript:document.title='Z'", "javascript:document.title='A'"}
        for link in links[:3]:
            driver.execute_script("arguments[0].removeAttribute('target')", link)
        assert driver.title == before
