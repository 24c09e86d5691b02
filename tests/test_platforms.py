"""Exports: each platform's files, no key in any worker-visible field, escaping, counterbalancing."""
import json

import pandas as pd
import pytest

from satcal.platforms import get_platform, swap_answer
from satcal.errors import SatcalError

PLATFORMS = ["appen", "toloka", "labelstudio", "csv"]
SECRET_WORDS = ("source_id", "is_trap", "swapped", "expected", "example_id", "trap_id")


@pytest.fixture(scope="module")
def workspace(make_workspace):
    ws = make_workspace(lambda doc: f'<script>alert("x")</script> & "{doc}"', audio=True)
    for p in PLATFORMS:
        ws.export(p, force=True)
    return ws


def _visible_frames(ws):
    out = {}
    b = ws.path / "batches"
    out["appen"] = pd.read_csv(b / "appen" / "units.csv", dtype=str, keep_default_na=False)
    out["toloka"] = pd.read_csv(b / "toloka" / "tasks.tsv", sep="\t", dtype=str, keep_default_na=False)
    out["labelstudio"] = pd.DataFrame([t["data"] for t in json.loads((b / "labelstudio" / "tasks.json").read_text())])
    out["csv"] = pd.read_csv(b / "csv" / "items.csv", dtype=str, keep_default_na=False)
    return out


def test_no_key_field_is_worker_visible(workspace):
    frames = _visible_frames(workspace)
    examples = workspace.table("examples.csv")
    hidden_gold = {"appen": {"_golden", "answer_gold", "answer_gold_reason"},
                   "toloka": {"GOLDEN:answer", "HINT:text"}}
    for name, df in frames.items():
        visible_cols = [c for c in df.columns if c not in hidden_gold.get(name, set())]
        for c in visible_cols:
            assert not any(w in c.lower() for w in SECRET_WORDS), (name, c)
            assert not pd.Series(df[c]).isin(examples["example_id"]).any(), (name, c)
            assert not pd.Series(df[c]).isin(["True", "False", "TRUE", "FALSE"]).all(), (name, c)
        text = df[visible_cols].to_csv()
        assert "ex0" not in text and "trap0" not in text


def test_gold_only_in_hidden_columns_and_in_shown_orientation(workspace):
    units = _visible_frames(workspace)["appen"]
    key = workspace.table("key.csv").set_index("item_id")
    traps = units[units["_golden"] == "TRUE"]
    assert len(traps) == (key["is_trap"] == "True").sum() > 0
    assert (units.loc[units["_golden"] == "FALSE", "answer_gold"] == "").all()
    for _, row in traps.iterrows():
        k = key.loc[row["item_id"]]
        expected = k["expected"]
        shown = swap_answer(expected) if k["swapped"] == "True" else expected
        assert row["answer_gold"] == shown


def test_counterbalanced_and_shuffled(workspace):
    key = workspace.table("key.csv")
    share = (key["swapped"] == "True").mean()
    assert 0.4 < share < 0.6
    assert key["item_id"].str.fullmatch(r"[0-9a-f]{16}").all() and key["item_id"].is_unique
    assert not key["source_id"].is_monotonic_increasing


def test_swapped_items_show_b_as_a(workspace):
    key = workspace.table("key.csv").set_index("item_id")
    items = workspace.table("items.csv").set_index("item_id")
    examples = workspace.table("examples.csv").set_index("example_id")
    for item, k in key[key.is_trap == "False"].head(50).iterrows():
        ex = examples.loc[k["source_id"]]
        first_shown = items.loc[item, "A1"]
        assert first_shown == (ex["b1"] if k["swapped"] == "True" else ex["a1"])


def test_titles_are_escaped(workspace):
    frames = _visible_frames(workspace)
    for name in ("appen", "csv"):
        cells = frames[name].filter(like="_title").to_numpy().ravel()
        assert not any("<script>" in str(v) for v in cells)
    html = (workspace.path / "batches" / "labelstudio" / "tasks.json").read_text()
    assert "<script>" not in html
    # the escaped title reaches the files whenever its document was used
    items = workspace.table("items.csv")
    for _, row in items.head(30).iterrows():
        assert row["A1_title"] == f"&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &quot;{row['A1']}&quot;"


def test_platform_templates(workspace):
    b = workspace.path / "batches"
    cml = (b / "appen" / "job.cml").read_text()
    assert cml.count("<cml:radio ") == 4 and 'name="answer"' in cml and "{{a1_title}}" in cml
    cfg = (b / "labelstudio" / "label_config.xml").read_text()
    assert '<Choices name="answer" toName="lists" choice="single"' in cfg and cfg.count("<Choice ") == 4
    project = json.loads((b / "toloka" / "project.json").read_text())
    assert project["task_spec"]["output_spec"]["answer"]["allowed_values"] == ["a_better", "b_better", "both_good", "both_bad"]
    tasks = _visible_frames(workspace)["toloka"]
    assert all(c.startswith(("INPUT:", "GOLDEN:", "HINT:")) for c in tasks.columns)
    assert (tasks["GOLDEN:answer"] != "").sum() == (workspace.table("key.csv")["is_trap"] == "True").sum()
    assert "<form>" in (b / "csv" / "template.html").read_text()
    assert (b / "csv" / "items.jsonl").read_text().count("\n") == len(tasks)


def test_export_is_reproducible(workspace, tmp_path):
    before = (workspace.path / "batches" / "appen" / "units.csv").read_bytes()
    key_before = (workspace.path / "key.csv").read_bytes()
    workspace.export("appen", force=True)
    assert (workspace.path / "batches" / "appen" / "units.csv").read_bytes() == before
    assert (workspace.path / "key.csv").read_bytes() == key_before


def test_mturk_is_refused():
    with pytest.raises(SatcalError, match="closed on 2026-09-30"):
        get_platform("mturk")


# --------------------------------------------------------------------------------------------
# What a worker reads as the query: never empty, the same on every platform as in preview
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def untitled_queries(tmp_path_factory, ecir_study):
    """A study whose documents table has titles for documents but none for the query ids (as
    TREC Web qrels with a ClueWeb documents table and no topics file), and none for one
    document in ten; exported to every platform through the command line."""
    from click.testing import CliRunner
    from satcal.cli import main
    d = tmp_path_factory.mktemp("untitled")
    table = ecir_study.judgments.table
    table.to_csv(d / "qrels.tsv", sep="\t", index=False)
    docs = pd.DataFrame({"doc": sorted(set(table["doc"]) - set(table["query"]))})
    docs["title"] = ["" if i % 10 == 0 else f"Title of {doc}" for i, doc in enumerate(docs["doc"])]
    docs.to_csv(d / "docs.csv", index=False)
    study = d / "study"
    runner = CliRunner()
    for args in (["init", str(study), "--judgments", str(d / "qrels.tsv"), "--documents", str(d / "docs.csv"),
                  "--min-per-cell", "3"], ["generate", str(study), "-q"]):
        assert runner.invoke(main, args).exit_code == 0
    outputs = {p: runner.invoke(main, ["export", str(study), "--platform", p, "--force"])
               for p in ("appen", "toloka", "labelstudio", "csv", "serve")}
    assert all(r.exit_code == 0 for r in outputs.values()), outputs
    assert runner.invoke(main, ["preview", str(study), "--n", "400"]).exit_code == 0
    return study, docs, outputs


def _preview_queries(study) -> dict:
    """item id -> the query text preview.html shows for it."""
    import html as html_lib
    import re
    page = (study / "preview.html").read_text()
    found = re.findall(r'<span class="query">(.*?)</span></h2>.*?id="list-A-([0-9a-f]{16})"', page, flags=re.S)
    return {item: html_lib.unescape(text) for text, item in found}


def _shown(row: dict, markup: str, pattern: str, prefix: str = "") -> str:
    """Fill a platform template's query heading with one row's values (Liquid ``{{x}}`` or
    Handlebars ``{{{x}}}``): what the platform shows."""
    import html as html_lib
    import re
    field = re.search(pattern, markup).group(1)
    return html_lib.unescape(row[prefix + field])


def test_the_query_a_worker_sees_is_never_empty_and_as_in_preview(untitled_queries):
    import html as html_lib
    import re
    study, docs, _ = untitled_queries
    preview = _preview_queries(study)
    items = pd.read_csv(study / "items.csv", dtype=str, keep_default_na=False)
    assert len(preview) == len(items) > 50
    # preview shows the query id: no query has a title
    assert all(preview[i] == q for i, q in zip(items["item_id"], items["query"]))
    b = study / "batches"
    units = pd.read_csv(b / "appen" / "units.csv", dtype=str, keep_default_na=False)
    cml = (b / "appen" / "job.cml").read_text()
    tolokas = pd.read_csv(b / "toloka" / "tasks.tsv", sep="\t", dtype=str, keep_default_na=False)
    markup = json.loads((b / "toloka" / "project.json").read_text())["task_spec"]["view_spec"]["markup"]
    ls_tasks = json.loads((b / "labelstudio" / "tasks.json").read_text())
    shown = {
        "appen": {r["item_id"]: _shown(r, cml, r"Query: \{\{(\w+)\}\}") for r in units.to_dict("records")},
        "toloka": {r["INPUT:item_id"]: _shown(r, markup, r"Query: \{\{\{(\w+)\}\}\}", "INPUT:")
                   for r in tolokas.to_dict("records")},
        "labelstudio": {t["data"]["item_id"]: html_lib.unescape(
            re.search(r'<span class="query">(.*?)</span>', t["data"]["html"]).group(1)) for t in ls_tasks},
    }
    for platform, by_item in shown.items():
        assert by_item == preview, platform
    # the generic form and the hosted study render the items with preview's own macro
    form = (b / "csv" / "template.html").read_text()
    head = items.head(10)  # the form shows one page
    assert [html_lib.unescape(q) for q in re.findall(r'<span class="query">(.*?)</span>', form)] == \
        [preview[i] for i in head["item_id"]]
    from satcal.platforms import item_view
    served = pd.read_csv(b / "serve" / "items.csv", dtype=str, keep_default_na=False)
    assert {r["item_id"]: item_view(r, 5)["query_title"] or item_view(r, 5)["query"]
            for r in served.to_dict("records")} == preview


def test_untitled_documents_show_their_id_everywhere(untitled_queries):
    """A document the documents table gives no title shows its id on Appen and Toloka, as in
    preview (which falls back to the id)."""
    study, docs, _ = untitled_queries
    titled = set(docs.loc[docs["title"] != "", "doc"])  # a query id in a list has no row either
    units = pd.read_csv(study / "batches" / "appen" / "units.csv", dtype=str, keep_default_na=False)
    tolokas = pd.read_csv(study / "batches" / "toloka" / "tasks.tsv", sep="\t", dtype=str,
                          keep_default_na=False)
    seen = 0
    for side in "ab":
        for i in range(1, 6):
            for frame, doc, title in ((units, f"{side}{i}", f"{side}{i}_title"),
                                      (tolokas, f"INPUT:{side.upper()}{i}", f"INPUT:{side.upper()}{i}_title")):
                blank = ~frame[doc].isin(titled)
                seen += int(blank.sum())
                assert (frame.loc[blank, title] == frame.loc[blank, doc]).all()
                assert (frame.loc[~blank, title] == "Title of " + frame.loc[~blank, doc]).all()
    assert seen > 0


def test_export_warns_for_queries_shown_without_text(untitled_queries):
    """Every query shown as a bare id is counted in one warning, with an example."""
    import re
    study, docs, outputs = untitled_queries
    queries = pd.read_csv(study / "items.csv", dtype=str, keep_default_na=False)["query"]
    for platform, res in outputs.items():
        warned = [l for l in res.output.splitlines() if "satcal: warning:" in l and "quer" in l]
        assert len(warned) == 1, (platform, res.output)
        m = re.search(r"(\d+) of (\d+) queries", warned[0])
        assert m and int(m.group(1)) == int(m.group(2)) == queries.nunique(), warned
        assert any(f"'{q}'" in warned[0] for q in queries)


def test_topics_covering_some_queries_warn_and_show_the_id():
    """A topics file with text for 2 of 3 queries (the quality-control report's 'Query: 527433'):
    the third shows its id on every platform, and one warning counts it."""
    from satcal.errors import SatcalWarning
    from satcal.platforms import build_items, item_view
    examples = pd.DataFrame({"example_id": ["e1", "e2", "e3", "e4"], "query": ["q1", "q2", "527433", "527433"],
                             "a1": ["d1", "d2", "d3", "d4"], "b1": ["d5", "d6", "d7", "d8"]})
    topics = pd.DataFrame({"query": ["q1", "q2", "q9"], "title": ["first <topic>", "second", "unused"],
                           "description": ["", "", ""]})
    with pytest.warns(SatcalWarning, match=r"1 of 3 queries have no text: .*'527433'") as caught:
        visible, _ = build_items(examples, pd.DataFrame(), k=1, seed=1, topics=topics)
    assert len([w for w in caught if "quer" in str(w.message)]) == 1
    by_query = dict(zip(visible["query"], visible["query_title"]))
    assert by_query == {"q1": "first &lt;topic&gt;", "q2": "second", "527433": "527433"}
    assert {item_view(r, 1)["query_title"] for r in visible.to_dict("records")} == \
        {"first <topic>", "second", "527433"}


def test_a_document_with_a_snippet_but_no_title_is_not_bare():
    """The documents warning counts only documents that show nothing but their id."""
    import warnings
    from satcal.errors import SatcalWarning
    from satcal.platforms import build_items
    examples = pd.DataFrame({"example_id": ["e1", "e2"], "query": ["q1", "q2"],
                             "a1": ["d1", "d2"], "b1": ["d3", "d4"]})
    documents = pd.DataFrame({"doc": ["q1", "q2", "d1", "d2", "d3"], "title": ["Q1", "Q2", "", "", "T3"],
                              "snippet": ["", "", "a snippet", "", ""]})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        visible, _ = build_items(examples, pd.DataFrame(), k=1, seed=1, documents=documents)
    messages = [str(w.message) for w in caught if issubclass(w.category, SatcalWarning)]
    # d2 (no title, no snippet) and d4 (not in the table) show their ids only; d1 has a snippet
    assert messages == ["2 of 4 documents have no text: workers will see the bare id (e.g. 'd2'); "
                        "give documents-table titles for them"]
    shown = dict(zip(visible["A1"].tolist() + visible["B1"].tolist(),
                     visible["A1_title"].tolist() + visible["B1_title"].tolist()))
    assert shown == {"d1": "d1", "d2": "d2", "d3": "T3", "d4": "d4"}


def test_export_summaries_say_where_a_worker_meets_the_trap_rules_count():
    """Each platform's settings line takes the trap rule's count (TrapCount.needed, here
    quality.traps_needed of 40 traps accepting one answer) and says what the platform cannot
    enforce; the numbers are worked again here."""
    from satcal.platforms import appen, labelstudio, toloka
    from satcal.platforms.base import TrapCount
    from satcal.quality import traps_needed
    needed = traps_needed([0.25] * 40, 0.7, 0.99)
    traps = TrapCount(needed, 40, 1000)
    # Toloka: ceil(needed / 10) control tasks in each suite of 8, reached after that many suites
    golden = -(-needed // 10)
    line = toloka.describe_settings({}, 8, 1, traps)
    assert f"{golden} control task(s) a suite (auto), at most 10 task suites a worker" in line
    assert f"meets the trap rule's {needed} traps after {-(-needed // golden)} task suites; Toloka cannot" in line
    # a number set lower: the suites would not reach the count, and what would
    line = toloka.describe_settings({"control_tasks_per_suite": 1}, 8, 1, traps)
    assert (f"a worker meets 10 traps by the last of their 10 task suites, fewer than the trap rule's {needed}: "
            f"set control_tasks_per_suite to {golden} (\"auto\") or raise suites_per_worker to {needed}") in line
    # Appen: the quiz page holds 8, then ceil((needed - 8) / 10) a page
    per_page = -(-(needed - 8) // 10)
    line = appen.describe_settings({}, 8, 1, traps)
    assert f"{per_page} test question(s) a page (auto) after a quiz page of 8" in line and "Appen cannot" in line
    # Label Studio: no test questions; an annotator meets one trap in 25 tasks
    line = labelstudio.describe_settings({}, 8, 1, traps)
    assert (f"Label Studio cannot set how many traps an annotator meets: its 40 traps are tasks like the others, "
            f"about one in 25 of the 1000, so an annotator meets the trap rule's {needed} only after about "
            f"{25 * needed} tasks") in line
    # a batch holding fewer traps than the count: said on every platform with test questions
    few = TrapCount(needed, needed - 1, 1000)
    for line in (toloka.describe_settings({}, 8, 1, few), appen.describe_settings({}, 8, 1, few)):
        assert f"the batch holds {needed - 1} traps, fewer than the trap rule's {needed}" in line
        assert f'set [traps] count = {needed} (or "auto") and generate and export again' in line  # key = value
    # a batch with no traps: no control task or test question is printed, as pool.json writes none
    none = TrapCount(None, 0, 1000)
    assert toloka.pool_json(8, 1, 0)["mixer_config"]["golden_tasks_count"] == 0
    assert "0 control task(s) a suite" in toloka.describe_settings({}, 8, 1, none)
    assert "no control tasks: the batch has no traps" in toloka.describe_settings({}, 8, 1, none)
    line = appen.describe_settings({}, 8, 1, none)
    assert "0 test question(s) a page" in line and "no test questions: the batch has no traps" in line
