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
    assert len(traps) == 20 and (units.loc[units["_golden"] == "FALSE", "answer_gold"] == "").all()
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
    assert (tasks["GOLDEN:answer"] != "").sum() == 20
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
