"""Topics: TREC classic and XML topics, TREC DL query files and CSV/TSV tables, read alike;
shown to workers; bad files named by line."""
from pathlib import Path

import pandas as pd
import pytest

from satcal.errors import InputFileError
from satcal.topics import read_topics

DATA = Path(__file__).parent / "data"


def test_classic_trec_topics():
    t = read_topics(DATA / "topics-trec-classic.txt").set_index("query")
    assert list(t.index) == ["401", "402"]
    assert t.loc["401", "title"] == "foreign minorities, Germany"
    assert t.loc["401", "description"] == ("What language and cultural differences impede the integration "
                                           "of foreign minorities in Germany?")
    assert t.loc["402", "narrative"].startswith("Relevant documents discuss")


def test_web_track_xml_topics():
    t = read_topics(DATA / "topics-web.xml").set_index("query")
    assert t.loc["251", "title"] == "identifying spider bites"
    assert t.loc["252", "title"] == "history of orcas & killer whales"  # entities decoded once
    assert t.loc["252", "description"] == "Find information on the history of orcas <Orcinus orca>."


def test_deep_learning_query_file():
    t = read_topics(DATA / "topics-dl.tsv")
    assert t.to_dict("records")[1] == {"query": "104861", "title": "cost of interior concrete flooring",
                                       "description": "", "narrative": ""}


@pytest.mark.parametrize("sep", [",", "\t"])
def test_csv_and_tsv_tables(tmp_path, sep):
    path = tmp_path / "topics.txt"
    pd.DataFrame({"query": ["q1", "q2"], "title": ["a, b", "c"], "description": ["d1", ""]}).to_csv(
        path, sep=sep, index=False)
    t = read_topics(path)
    assert t["title"].tolist() == ["a, b", "c"] and t["narrative"].tolist() == ["", ""]


@pytest.mark.parametrize("text, where", [
    ("query,title\nq1,one\nq1,again\n", ":3: column 'query': topic 'q1' appears twice"),
    ("query,title\nq1,\n", ":2: column 'title': a topic without a title"),
    ("query,description\nq1,x\n", ":1: missing column title"),
    ("just some words\n", ":1: not a topics file"),
    ("<top>\n<num> Number: 7\n<desc> only a description\n</top>\n", ":1: column 'title'"),
])
def test_bad_topics_are_named_by_line(tmp_path, text, where):
    path = tmp_path / "topics.csv"
    path.write_text(text)
    with pytest.raises(InputFileError) as err:
        read_topics(path)
    assert where in str(err.value)


def test_workers_see_title_and_description_on_every_platform(make_workspace, tmp_path):
    """Topics given at init reach every exporter's worker-visible fields, escaped once."""
    import json
    from satcal.workspace import Workspace
    base = make_workspace(lambda doc: f"Doc {doc}", min_per_cell=10)
    queries = sorted(base.judgments().table["query"].astype(str).unique())
    topics = tmp_path / "topics.csv"
    pd.DataFrame({"query": queries, "title": [f"Topic <{q}> & co" for q in queries],
                  "description": [f"What about {q}?" for q in queries]}).to_csv(topics, index=False)
    ws = Workspace.init(tmp_path / "study", base.path / base["study.judgments"], base.path / base["study.documents"],
                        min_per_cell=10, topics=topics)
    ws.generate()
    for platform in ("appen", "toloka", "labelstudio", "csv"):
        ws.export(platform, force=True)
    items = ws.table("items.csv")
    first = items.iloc[0]
    assert first["query_title"] == f"Topic &lt;{first['query']}&gt; &amp; co"
    assert first["query_description"] == f"What about {first['query']}?"
    b = ws.path / "batches"
    assert "{{query_description}}" in (b / "appen" / "job.cml").read_text()
    assert "query_description" in json.loads((b / "toloka" / "project.json").read_text())["task_spec"]["view_spec"]["markup"]
    html = json.loads((b / "labelstudio" / "tasks.json").read_text())[0]["data"]["html"]
    assert first["query_title"] in html or "Topic &lt;" in html
    assert "Read the results" in ws["presentation.instructions"]
