"""satcal preview, driven in headless Chromium: what a worker sees and what a click records."""

import pytest


from browser import chromium_fixture, keep_screenshots

pytestmark = pytest.mark.slow  # end to end: deselect with -m 'not slow'


@pytest.fixture(scope="module")
def driver():
    yield from chromium_fixture()


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


def test_text_retrieval_study_shows_topics_beside_readable_lists(driver, tmp_path):
    """A TREC Web-like study (levels -2..4, no query with 5 documents at level 4, XML topics,
    documents with titles and snippets): workers see the topic's title and description above
    lists A and B side by side."""
    import numpy as np
    import pandas as pd
    from selenium.webdriver.common.by import By
    from satcal.workspace import Workspace
    rng = np.random.default_rng(11)
    lines, docs = [], []
    for q in range(251, 259):
        for d in range(80):
            level = int(rng.choice([-2, 0, 1, 2, 3, 4], p=[.05, .45, .25, .15, .08, .02]))
            doc = f"clueweb12-{q}-{d:04d}"
            lines.append(f"{q} 0 {doc} {level}")
            docs.append({"doc": doc, "title": f"Page {d} about topic {q}",
                         "snippet": f"A short extract of page {d}, as a search engine shows it."})
    (tmp_path / "qrels.txt").write_text("\n".join(lines) + "\n")
    pd.DataFrame(docs).to_csv(tmp_path / "docs.csv", index=False)
    topics = "".join(f'<topic number="{q}"><query>topic {q} words</query>'
                     f"<description>Find pages that explain topic {q}.</description></topic>\n"
                     for q in range(251, 259))
    (tmp_path / "topics.xml").write_text(f"<webtrack2014>\n{topics}</webtrack2014>\n")
    ws = Workspace.init(tmp_path / "study", tmp_path / "qrels.txt", tmp_path / "docs.csv",
                        topics=tmp_path / "topics.xml", levels=[0, 1, 2, 3, 4], min_per_cell=3,
                        platform="csv")
    ws.generate()
    ws.export()
    page = ws.preview(n=3)
    driver.set_window_size(1280, 1000)
    driver.get(page.as_uri())
    items = driver.find_elements(By.CSS_SELECTOR, "section.item")
    assert len(items) == 3
    for item in items:
        heading = item.find_element(By.CSS_SELECTOR, "h2").text
        q = heading.split()[-2] if heading.endswith("words") else ""
        assert heading.startswith("Query: topic ") and q
        assert item.find_element(By.CSS_SELECTOR, "p.description").text == f"Find pages that explain topic {q}."
        a, b = [l.rect for l in item.find_elements(By.CSS_SELECTOR, ".list")]
        assert b["x"] > a["x"] + a["width"] - 1 and abs(b["y"] - a["y"]) < 5
        first = item.find_element(By.CSS_SELECTOR, ".list li")
        assert first.find_element(By.CSS_SELECTOR, ".title").text.startswith("Page ")
        assert "short extract" in first.find_element(By.CSS_SELECTOR, ".snippet").text
    driver.save_screenshot(str(tmp_path / "text-study.png"))
    keep_screenshots(tmp_path / "text-study.png")


@pytest.fixture(scope="module")
def platform_pages(make_workspace, tmp_path_factory):
    """The generic form and a Label Studio task's HyperText payload, as pages of their own."""
    import json
    ws = make_workspace(lambda doc: f"Song {doc}", min_per_cell=10, platform="csv")
    ws.export("csv")
    ws.export("labelstudio")
    tasks = json.loads((ws.path / "batches" / "labelstudio" / "tasks.json").read_text())
    d = tmp_path_factory.mktemp("ls-payload")
    page = d / "task.html"
    # Label Studio's HyperText puts the payload in its own block: a bare page shows it alike
    page.write_text("<!doctype html><meta charset='utf-8'><body>" + tasks[0]["data"]["html"] + "</body>")
    return ws, ws.path / "batches" / "csv" / "template.html", page


def _side_by_side(lists):
    a, b = (l.rect for l in lists)
    return b["x"] >= a["x"] + a["width"] - 1 and abs(b["y"] - a["y"]) < 5


def test_platform_pages_show_lists_side_by_side_with_one_control_set(driver, platform_pages, tmp_path):
    """At 1280 px: the generic form has one radio group of the four answers per item, and Label
    Studio's payload none at all (its <Choices> are the only controls), both with the query
    and lists A and B side by side."""
    from selenium.webdriver.common.by import By
    ws, form, payload = platform_pages
    driver.set_window_size(1280, 1000)
    driver.get(form.as_uri())
    items = driver.find_elements(By.CSS_SELECTOR, "section.item")
    assert len(items) == min(ws["presentation.items_per_page"], len(ws.table("items.csv")))  # one page
    for item in items[:20]:
        radios = item.find_elements(By.CSS_SELECTOR, "input[type=radio]")
        assert [r.get_attribute("value") for r in radios] == ["a_better", "b_better", "both_good", "both_bad"]
        assert len({r.get_attribute("name") for r in radios}) == 1
        assert _side_by_side(item.find_elements(By.CSS_SELECTOR, ".list"))
    driver.save_screenshot(str(tmp_path / "form.png"))
    driver.get(payload.as_uri())
    assert driver.find_elements(By.CSS_SELECTOR, "input, select, textarea, button, form") == []
    lists = driver.find_elements(By.CSS_SELECTOR, ".list")
    assert len(lists) == 2 and _side_by_side(lists)
    assert [len(l.find_elements(By.TAG_NAME, "li")) for l in lists] == [ws.k, ws.k]
    assert driver.find_element(By.CSS_SELECTOR, ".query").text
    driver.save_screenshot(str(tmp_path / "labelstudio-task.png"))
    keep_screenshots(tmp_path / "form.png", tmp_path / "labelstudio-task.png")
