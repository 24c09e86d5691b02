"""Label Studio's own server takes satcal's batch: the project from project.json, every task of
tasks.json, annotations made on them, and its JSON export ingested back, each answer where the
key says it belongs."""
import json

import pandas as pd
import pytest

from labelstudio_server import ensure_label_studio, running_label_studio

pytestmark = pytest.mark.slow  # end to end: deselect with -m 'not slow'


@pytest.fixture(scope="module")
def label_studio():
    exe, reason = ensure_label_studio()
    if exe is None:
        pytest.skip(reason)
    with running_label_studio(exe) as client:
        yield client


def _all_tasks(client, project_id):
    tasks, page = [], 1
    while True:
        r = client.get("/api/tasks/", params={"project": project_id, "page": page, "page_size": 500})
        batch = r.json()["tasks"] if r.status_code == 200 else []
        tasks += batch
        if len(batch) < 500:
            return tasks
        page += 1


def test_label_studio_server_takes_the_batch_and_its_export_ingests(label_studio, exported_workspace, tmp_path, copy_workspace):
    from satcal.platforms import ANSWER_LABELS, swap_answer
    client = label_studio
    ws = copy_workspace(exported_workspace("labelstudio", 10), tmp_path)
    batch = ws.path / "batches" / "labelstudio"
    project = json.loads((batch / "project.json").read_text())
    r = client.post("/api/projects/", json=project)
    assert r.status_code == 201, r.text
    pid = r.json()["id"]
    stored = client.get(f"/api/projects/{pid}/").json()
    assert stored["label_config"].strip() == (batch / "label_config.xml").read_text().strip()
    assert stored["maximum_annotations"] == ws["design.answers_per_example"]
    r = client.post(f"/api/projects/{pid}/import", json=json.loads((batch / "tasks.json").read_text()))
    assert r.status_code == 201, r.text
    items = ws.table("items.csv")
    assert r.json()["task_count"] == len(items)
    tasks = _all_tasks(client, pid)
    assert sorted(t["data"]["item_id"] for t in tasks) == sorted(items["item_id"])
    secret = {"source_id", "is_trap", "swapped", "expected", "expected_shown", "example_id"}
    assert not any(secret & set(t["data"]) for t in tasks)

    # annotations as an annotator leaves them: a label's text, or its alias (the answer code)
    codes = list(ANSWER_LABELS)
    made = []
    for i, task in enumerate(tasks[:8]):
        code = codes[i % 4]
        choice = ANSWER_LABELS[code] if i < 4 else code
        ann = {"result": [{"from_name": "answer", "to_name": "lists", "type": "choices",
                           "value": {"choices": [choice]}}]}
        r = client.post(f"/api/tasks/{task['id']}/annotations/", json=ann)
        assert r.status_code == 201, r.text
        made.append((task["data"]["item_id"], code))
    skipped = client.post(f"/api/tasks/{tasks[8]['id']}/annotations/", json={"result": [], "was_cancelled": True})
    assert skipped.status_code == 201, skipped.text
    export = client.get(f"/api/projects/{pid}/export", params={"exportType": "JSON"})
    assert export.status_code == 200
    path = tmp_path / "project-export.json"
    path.write_bytes(export.content)

    report = ws.ingest([path])
    assert report.files["platform"].tolist() == ["labelstudio"]
    assert len(report.answers) + len(report.rejects) == 9
    assert report.rejects["reason"].str.contains("cancelled").sum() == 1
    key = ws.table("key.csv").set_index("item_id")
    got = report.answers.set_index("item_id")["answer"]
    # excluded workers aside (one annotator, a few traps), each answer in the example's own orientation
    kept = pd.Series({item: (swap_answer(code) if key.loc[item, "swapped"] == "True" else code)
                      for item, code in made})
    excluded = report.rejects[report.rejects["reason"].str.startswith("excluded worker")]["item_id"]
    kept = kept.drop(excluded, errors="ignore")
    assert len(kept) + len(excluded) == len(made)
    pd.testing.assert_series_equal(got.loc[kept.index].sort_index(), kept.sort_index(), check_names=False,
                                   check_index_type=False, check_dtype=False)  # text as object or str alike
