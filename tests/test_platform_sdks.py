"""Platform files checked by the platforms' own software: toloka-kit loads the project, the pool
and the tasks; label-studio-sdk parses the labeling config and validates every task; Appen's
files against its documented rules (lower-case columns, CML Liquid variables, gold columns)."""
import inspect
import json
import re
import warnings

import pandas as pd
import pytest

ANSWERS_PER_EXAMPLE = 3


@pytest.fixture(scope="module")
def workspace(make_workspace, tmp_path_factory):
    from satcal.workspace import Workspace
    # some documents have no snippet: a field that is not always filled
    ws = make_workspace(lambda doc: f"Title <b>{doc}</b>", min_per_cell=10)
    docs = pd.read_csv(ws.path / ws["study.documents"], dtype=str, keep_default_na=False)
    docs["snippet"] = [f"snippet of {d}" if i % 3 else "" for i, d in enumerate(docs["doc"])]
    docs.to_csv(ws.path / ws["study.documents"], index=False)
    text = (ws.path / "study.toml").read_text().replace("answers_per_example = 1",
                                                         f"answers_per_example = {ANSWERS_PER_EXAMPLE}")
    (ws.path / "study.toml").write_text(text)
    ws = Workspace.open(ws.path)
    for platform in ("appen", "toloka", "labelstudio"):
        ws.export(platform, force=True)
    return ws


def _toloka():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pytest.importorskip("toloka.client")


def test_toloka_project_loads_in_toloka_kit_and_is_complete(workspace):
    toloka = _toloka()
    raw = json.loads((workspace.path / "batches" / "toloka" / "project.json").read_text())
    project = toloka.Project.structure(raw)
    assert project.public_name and project.public_description and project.public_instructions
    spec = project.task_spec
    assert isinstance(spec.view_spec, toloka.project.view_spec.ClassicViewSpec)
    assert spec.view_spec.settings is not None and spec.view_spec.settings.show_submit
    # the script defines what it calls
    assert "function extend(" in spec.view_spec.script
    # every field the markup shows is an input field, and the answer has the four codes
    shown = set(re.findall(r"\{\{\{?\s*([\w]+)\s*\}?\}\}", spec.view_spec.markup)) - {"field"}
    assert shown and shown <= set(spec.input_spec)
    assert spec.output_spec["answer"].allowed_values == ["a_better", "b_better", "both_good", "both_bad"]
    # required exactly where every task has a value (Toloka refuses an empty required field)
    tasks = json.loads((workspace.path / "batches" / "toloka" / "tasks.json").read_text())
    for name, field in spec.input_spec.items():
        always = all(t["input_values"].get(name, "") != "" for t in tasks)
        assert field.required == always, name
    assert not spec.input_spec["A1_snippet"].required and spec.input_spec["item_id"].required


def test_toloka_pool_issues_traps_as_control_tasks(workspace):
    toloka = _toloka()
    raw = json.loads((workspace.path / "batches" / "toloka" / "pool.json").read_text())
    pool = toloka.Pool.structure(raw)
    assert pool.defaults.default_overlap_for_new_task_suites == ANSWERS_PER_EXAMPLE
    assert pool.defaults.default_overlap_for_new_tasks == ANSWERS_PER_EXAMPLE
    mixer = pool.mixer_config
    # control tasks a suite from the trap rule: its count (quality.traps_needed of the traps'
    # chance rates) over the 10 suites a worker may do (suites_per_worker, the template's)
    from satcal.quality import _chance, traps_needed
    key = workspace.table("key.csv")
    needed = traps_needed(_chance(key[key["is_trap"] == "True"]), 0.7, workspace["quality.trap_power"])
    per_page = workspace["presentation.items_per_page"]
    golden = min(max(1, -(-needed // 10)), per_page - 1)
    assert mixer.golden_tasks_count == golden and mixer.training_tasks_count == 0
    assert golden * 10 >= needed  # a worker doing their 10 suites meets the rule's count
    assert mixer.real_tasks_count == per_page - golden
    # the 10 suites: Toloka's "submitted answers" rule restricts a worker from the pool after them
    limit = pool.quality_control.configs[1]
    assert limit.collector_config.type.value == "ANSWER_COUNT"
    assert [(c.key.value, c.value) for c in limit.rules[0].conditions] == [("assignments_accepted_count", 10)]
    assert limit.rules[0].action.parameters.scope.value == "POOL"
    assert pool.reward_per_assignment > 0 and pool.assignment_max_duration_seconds > 0
    assert pool.quality_control.configs[0].collector_config.type.value == "GOLDEN_SET"
    tasks = [toloka.Task.structure(t) for t in json.loads(
        (workspace.path / "batches" / "toloka" / "tasks.json").read_text())]
    key = workspace.table("key.csv").set_index("item_id")
    control = [t for t in tasks if t.known_solutions]
    assert len(control) == (key["is_trap"] == "True").sum() > 0
    for t in tasks:
        assert t.overlap == ANSWERS_PER_EXAMPLE
        k = key.loc[t.input_values["item_id"]]
        if t.known_solutions:
            assert {s.output_values["answer"] for s in t.known_solutions} == set(k["expected_shown"].split(";"))
    tsv = pd.read_csv(workspace.path / "batches" / "toloka" / "tasks.tsv", sep="\t", dtype=str,
                      keep_default_na=False)
    assert not any(c.startswith("HINT:") for c in tsv.columns)  # a hint would make a training task
    assert (tsv["GOLDEN:answer"] != "").sum() == (key["is_trap"] == "True").sum()


def test_toloka_results_reader_takes_the_default_download(tmp_path):
    from satcal.platforms import get_platform
    rows = pd.DataFrame({"INPUT:item_id": ["i1", "i2", "i3", "i4"], "OUTPUT:answer": ["a_better"] * 4,
                         "GOLDEN:answer": ["", "", "", ""],
                         "ASSIGNMENT:link": "", "ASSIGNMENT:assignment_id": ["s1", "s1", "s2", "s3"],
                         "ASSIGNMENT:worker_id": ["w1", "w1", "w2", "w3"],
                         "ASSIGNMENT:status": ["APPROVED", "ACCEPTED", "REJECTED", "SKIPPED"],
                         "ASSIGNMENT:started": ["2026-11-01T10:00:00"] * 4})
    path = tmp_path / "assignments.tsv"
    rows.to_csv(path, sep="\t", index=False)
    raw = get_platform("toloka").read_results(path)
    assert list(raw["status"]) == ["", "", "rejected", "skipped"]
    assert list(raw["submitted_at"]) == ["2026-11-01T10:00:00"] * 4


def test_label_studio_config_and_every_task_pass_the_sdk(workspace):
    pytest.importorskip("label_studio_sdk")
    from label_studio_sdk.label_interface import LabelInterface
    b = workspace.path / "batches" / "labelstudio"
    interface = LabelInterface((b / "label_config.xml").read_text())
    tasks = json.loads((b / "tasks.json").read_text())
    assert all(interface.validate_task(t) for t in tasks)
    for t in tasks:
        html = t["data"]["html"]
        assert "<input" not in html and "<fieldset" not in html  # one set of controls: Label Studio's
        assert "display:flex" in html and html.count('class="list"') == 2  # side by side
    project = json.loads((b / "project.json").read_text())
    from label_studio_sdk.projects.client import ProjectsClient
    accepted = set(inspect.signature(ProjectsClient.create).parameters)
    assert set(project) <= accepted
    assert project["maximum_annotations"] == ANSWERS_PER_EXAMPLE
    assert LabelInterface(project["label_config"]).validate_task(tasks[0])


def test_appen_columns_and_liquid_variables_are_lower_case(workspace):
    b = workspace.path / "batches" / "appen"
    units = pd.read_csv(b / "units.csv", dtype=str, keep_default_na=False)
    assert all(c == c.lower() for c in units.columns)
    cml = (b / "job.cml").read_text()
    variables = set(re.findall(r"\{\{\s*([^}\s]+)\s*\}\}", cml))
    assert variables and variables <= set(units.columns)
    settings = (b / "job-settings.txt").read_text()
    assert f"judgments_per_unit = {ANSWERS_PER_EXAMPLE}" in settings
    assert "Convert uploaded test questions" in settings and "Hide answer" in settings
    gold = units[units["_golden"] == "TRUE"]
    assert len(gold) == (workspace.table("key.csv")["is_trap"] == "True").sum() and (gold["answer_gold"] != "").all()
    # gold rows per contributor from the trap rule: the quiz page (a page of test questions) and
    # test questions a page over the 10 pages a contributor may do reach the rule's count
    from satcal.quality import _chance, traps_needed
    key = workspace.table("key.csv")
    needed = traps_needed(_chance(key[key["is_trap"] == "True"]), 0.7, workspace["quality.trap_power"])
    rows = workspace["presentation.items_per_page"]
    per_page = min(max(1, -(-(needed - rows) // 10)), rows - 1)
    assert f"test_questions_per_page = {per_page}\n" in settings and "quiz_mode = on" in settings
    assert f"max_judgments_per_contributor = {10 * rows}\n" in settings
    assert rows + 10 * per_page >= needed
    assert f"asks {needed} test questions a contributor" in settings
    # each gold row's answer_gold holds the accepted answers as shown, one a line
    for (_, g), (_, k) in zip(gold.iterrows(), key.set_index("item_id").loc[gold["item_id"]].iterrows()):
        assert g["answer_gold"].split("\n") == k["expected_shown"].split(";")
