"""Ingest: readers for each platform's real layout, row accounting, idempotency, errors."""
import io
import json
import shutil

import pandas as pd
import pytest

from satcal.errors import InputFileError
from satcal.platforms import get_platform
from satcal.workspace import Workspace



@pytest.fixture
def ws(exported_workspace, tmp_path, copy_workspace):
    """A fresh copy of the exported workspace for each test."""
    return copy_workspace(exported_workspace("appen", 10), tmp_path)


def _items(ws, trap=False, n=3):
    key = ws.table("key.csv")
    return key[key["is_trap"] == ("True" if trap else "False")].head(n)


APPEN_HEADER = ("_unit_id,_created_at,_golden,_id,_missed,_started_at,_tainted,_channel,_trust,"
                "_worker_id,_country,_region,_city,_ip,answer,item_id,query,answer_gold,answer_gold_reason")


def _appen_fixture(ws, rows):
    lines = [APPEN_HEADER]
    for i, (item, worker, answer) in enumerate(rows):
        lines.append(f'{1000 + i},11/02/2026 10:0{i % 10}:00,false,{5000 + i},,11/02/2026 10:00:00,false,'
                     f'neodev,0.9{i % 10},{worker},ESP,,Barcelona,127.0.0.1,{answer},{item},q,"",""')
    return "\n".join(lines) + "\n"


def test_appen_reader(ws, tmp_path):
    items = _items(ws)["item_id"].tolist()
    f = tmp_path / "f1234.csv"
    f.write_text(_appen_fixture(ws, [(items[0], "w1", "a_better"), (items[1], "w2", "both_bad")]))
    raw = get_platform("appen").read_results(f)
    assert raw["item_id"].tolist() == items[:2] and raw["worker_id"].tolist() == ["w1", "w2"]
    assert raw["row_id"].tolist() == ["5000", "5001"] and raw["trust"].tolist() == [0.90, 0.91]
    assert raw["line"].tolist() == [2, 3]


def test_toloka_reader(ws, tmp_path):
    items = _items(ws)["item_id"].tolist()
    header = ["INPUT:item_id", "INPUT:query", "OUTPUT:answer", "GOLDEN:answer", "HINT:text", "ASSIGNMENT:link",
              "ASSIGNMENT:task_id", "ASSIGNMENT:assignment_id", "ASSIGNMENT:task_suite_id", "ASSIGNMENT:worker_id",
              "ASSIGNMENT:status", "ASSIGNMENT:started", "ASSIGNMENT:submitted", "ASSIGNMENT:accepted",
              "ASSIGNMENT:reward"]
    rows = [[items[0], "q", "b_better", "", "", "", "t1", "A1", "S1", "tw1", "ACCEPTED", "s", "2026-11-02T10:00:00", "", "0.03"],
            [items[1], "q", "both_good", "", "", "", "t2", "A1", "S1", "tw1", "REJECTED", "s", "2026-11-02T10:01:00", "", "0.03"]]
    f = tmp_path / "assignments.tsv"
    f.write_text("\n".join("\t".join(r) for r in [header] + rows) + "\n")
    raw = get_platform("toloka").read_results(f)
    assert raw["answer"].tolist() == ["b_better", "both_good"] and raw["status"].tolist() == ["", "rejected"]
    assert raw["row_id"].tolist() == [f"A1:{items[0]}", f"A1:{items[1]}"]


def test_labelstudio_reader(ws, tmp_path):
    items = _items(ws)["item_id"].tolist()
    export = [{"id": 1, "data": {"item_id": items[0], "html": "..."}, "annotations": [
        {"id": 31, "completed_by": {"id": 7, "email": "ann@example.org"}, "was_cancelled": False,
         "created_at": "2026-11-02T10:00:00Z",
         "result": [{"from_name": "answer", "to_name": "lists", "type": "choices",
                     "value": {"choices": ["System B gives better results"]}}]},
        {"id": 32, "completed_by": 8, "was_cancelled": True, "created_at": "2026-11-02T10:05:00Z", "result": []}]}]
    f = tmp_path / "export.json"
    f.write_text(json.dumps(export))
    raw = get_platform("labelstudio").read_results(f)
    assert raw["answer"].tolist() == ["b_better", ""] and raw["worker_id"].tolist() == ["7", "8"]  # the user id, as in exports that give only the id
    assert raw["status"].tolist() == ["", "cancelled"] and raw["row_id"].tolist() == ["31", "32"]


def _tree(path):
    import hashlib
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file() and p.name != ".satcal.lock"}


def test_another_studys_result_file_is_refused_whole(ws, tmp_path):
    """A result file none of whose answers names an item of the study's batch keys (another
    study's export) is one error naming the file and the item_id column, exit 2, nothing
    archived; a file with one of the study's items among strangers is ingested as before, the
    strangers rejected as unknown items."""
    from click.testing import CliRunner
    from satcal.cli import main
    foreign = tmp_path / "other-study.csv"
    foreign.write_text(_appen_fixture(ws, [(f"{i:016x}", "w1", "a_better") for i in range(5)]))
    before = _tree(ws.path)
    res = CliRunner().invoke(main, ["ingest", str(ws.path), str(foreign)])
    assert res.exit_code == 2 and res.output.count("\n") == 1 and "Traceback" not in res.output
    assert res.output.startswith(f"satcal: error: {foreign}: column 'item_id': none of its 5 answers names an "
                                 "item of this study: item_id '0000000000000000' is in no batch key")
    assert _tree(ws.path) == before
    mixed = tmp_path / "mixed.csv"
    real = _items(ws, n=1)["item_id"].iloc[0]
    mixed.write_text(_appen_fixture(ws, [(real, "w1", "a_better")] + [(f"{i:016x}", "w1", "a_better") for i in range(4)]))
    rep = ws.ingest([mixed], threshold=0.0)
    assert len(rep.answers) == 1 and (rep.rejects["reason"].str.startswith("unknown item id")).sum() == 4


def test_a_file_read_as_another_platform_names_the_platform_it_looks_like(ws, tmp_path):
    """--platform toloka on an Appen report: the one-line error says whose layout the file has
    and the option that reads it; nothing is written."""
    from click.testing import CliRunner
    from satcal.cli import main
    f = tmp_path / "appen-report.csv"
    f.write_text(_appen_fixture(ws, [(_items(ws, n=1)["item_id"].iloc[0], "w1", "a_better")]))
    before = _tree(ws.path)
    res = CliRunner().invoke(main, ["ingest", str(ws.path), str(f), "--platform", "toloka"])
    assert res.exit_code == 2 and res.output.count("\n") == 1 and res.output.startswith(f"satcal: error: {f}:1: ")
    assert res.output.rstrip().endswith("(the file looks like appen's result file: --platform appen?)")
    assert _tree(ws.path) == before
    assert CliRunner().invoke(main, ["ingest", str(ws.path), str(f), "--platform", "appen"]).exit_code == 0


def test_generic_and_ecir_readers(tmp_path):
    f = tmp_path / "r.csv"
    f.write_text("item_id,worker_id,answer,submitted_at\nx1,w1,A,2026-11-02\n")
    raw = get_platform("csv").read_results(f)
    assert raw[["item_id", "worker_id", "answer"]].values.tolist() == [["x1", "w1", "A"]]
    from satcal.datasets import ecir2015_file
    raw = get_platform("ecir2015").read_results(ecir2015_file("crowd.csv"))
    assert len(raw) == 4115 and raw["answer"].iloc[0] == "a" and raw["item_id"].iloc[0] == "example:1"


def test_row_accounting_and_orientation(ws, tmp_path):
    key = ws.table("key.csv").set_index("item_id")
    real = _items(ws, n=4)["item_id"].tolist()
    trap = _items(ws, trap=True, n=1)["item_id"].tolist()
    rows = [(real[0], "w1", "a_better"), (real[1], "w1", "both_good"), (real[2], "w2", "maybe"),
            ("ffffffffffffffff", "w2", "a_better"), (real[0], "w1", "a_better"), (real[1], "w1", "both_bad"),
            (trap[0], "w1", key.loc[trap[0], "expected_shown"].split(";")[0]), (real[3], "", "both_bad")]
    f = tmp_path / "report.csv"
    f.write_text(_appen_fixture(ws, rows))
    rep = ws.ingest([f], threshold=0.0)
    assert len(rep.answers) + len(rep.rejects) == len(rows) == int(rep.files["rows"].sum())
    reasons = rep.rejects.set_index("line")["reason"]
    assert reasons[4].startswith("malformed answer 'maybe'")
    assert reasons[5].startswith("unknown item id")
    assert reasons[6].startswith("duplicate of ")
    assert reasons[7].startswith("conflicting duplicate: ") and reasons[7].endswith("said both_good")
    assert reasons[9] == "missing worker id"
    a = rep.answers.set_index("line")
    expected = "b_better" if key.loc[real[0], "swapped"] == "True" else "a_better"
    assert a.loc[2, "answer"] == expected and a.loc[2, "example_id"] == key.loc[real[0], "source_id"]
    assert a.loc[8, "is_trap"] and a.loc[8, "correct"]
    assert (ws.path / "raw").exists() and len(list((ws.path / "raw").glob("*-report.csv"))) == 1


def test_idempotent_and_overlapping(ws, tmp_path):
    out, truth = ws.simulate("appen")
    ws.ingest([out])
    answers = (ws.path / "answers.csv").read_bytes()
    again = ws.ingest([out])
    assert (ws.path / "answers.csv").read_bytes() == answers and not again.files["new"].any()
    subset = tmp_path / "part.csv"
    pd.read_csv(out, dtype=str, keep_default_na=False).head(40).to_csv(subset, index=False)
    overlap = ws.ingest([subset])
    # the same answers: of two identical rows one is kept (which one is fixed by a rule that
    # does not depend on arrival order), the other is a duplicate
    cols = ["example_id", "worker_id", "answer"]
    before = pd.read_csv(io.BytesIO(answers), dtype=str, keep_default_na=False)
    pd.testing.assert_frame_equal(overlap.answers[cols].astype(str).sort_values(cols).reset_index(drop=True),
                                  before[cols].sort_values(cols).reset_index(drop=True))
    assert len(overlap.rejects) - len(again.rejects) == 40
    assert len(overlap.answers) + len(overlap.rejects) == int(overlap.files["rows"].sum())


def test_conflicting_duplicates_do_not_depend_on_arrival_order(ws, tmp_path):
    """Two files answer the same items differently; ingested in either order (in two copies of
    the workspace) the tables are byte for byte the same, and the earlier submission wins."""
    import shutil
    out, _ = ws.simulate("csv")
    table = pd.read_csv(out, dtype=str, keep_default_na=False)
    early, late = tmp_path / "early.csv", tmp_path / "late.csv"
    table.head(30).assign(submitted_at="2026-11-01T09:00:00Z").to_csv(early, index=False)
    flipped = table.head(30).assign(submitted_at="2026-11-01T10:00:00Z",
                                    answer=lambda t: t["answer"].map({"a_better": "b_better", "b_better": "a_better",
                                                                      "both_good": "both_bad", "both_bad": "both_good"}))
    flipped.to_csv(late, index=False)
    other = tmp_path / "copy"
    shutil.copytree(ws.path, other)
    from satcal.workspace import Workspace
    ws.ingest([late], threshold=0.0)
    ws.ingest([early], threshold=0.0)
    Workspace.open(other).ingest([early, late], threshold=0.0)
    for name in ("answers.csv", "rejects.csv", "workers.csv"):
        assert (ws.path / name).read_bytes() == (other / name).read_bytes(), name
    kept = pd.read_csv(ws.path / "answers.csv", dtype=str, keep_default_na=False)
    assert kept["source_file"].str.endswith("-early.csv").all()


@pytest.mark.parametrize("platform", ["appen", "toloka", "labelstudio", "csv"])
def test_simulated_results_round_trip(ws, platform):
    out, truth = ws.simulate(platform)
    rep = ws.ingest([out], platform=None)
    traps = int((ws.table("key.csv")["is_trap"] == "True").sum())
    ground_truth = traps if platform == "labelstudio" else 0  # the researcher's reference answers
    rows = truth["answers"] + truth["abandoned_assignments"] + ground_truth
    assert int(rep.files["rows"].sum()) == rows == len(rep.answers) + len(rep.rejects)
    assert set(truth["spammers"]) <= set(rep.workers.loc[rep.workers["excluded"], "worker_id"])
    assert (truth["abandoned_assignments"] > 0) == (platform in ("toloka", "labelstudio"))


@pytest.mark.parametrize("platform,reasons", [
    ("toloka", {"platform status: expired", "platform status: skipped"}),
    ("labelstudio", {"platform status: cancelled",
                     "platform status: ground truth (a reviewer's reference answer)"})])
def test_unfinished_assignments_are_rejects_and_change_no_answer(ws, tmp_path, platform, reasons, copy_workspace):
    """The simulated crowd leaves some pages unfinished where the platform reports them: each
    such row is a reject with the platform's status, and the answers are those of a crowd that
    left nothing unfinished."""
    import re
    toml = ws.path / "study.toml"
    toml.write_text(re.sub(r"(?m)^abandoned = .*$", "abandoned = 0.1", toml.read_text()))
    ws = Workspace.open(ws.path)
    out, truth = ws.simulate(platform)
    rep = ws.ingest([out])
    status_rejects = rep.rejects[rep.rejects["reason"].str.startswith("platform status")]
    assert set(status_rejects["reason"]) == reasons
    left = status_rejects["reason"].isin({"platform status: expired", "platform status: skipped",
                                          "platform status: cancelled"})
    assert left.sum() == truth["abandoned_assignments"] > 0
    assert (status_rejects.loc[left, "answer"].fillna("") == "").all()
    other = copy_workspace(ws, tmp_path / "none-left")
    toml = other.path / "study.toml"
    toml.write_text(re.sub(r"(?m)^abandoned = .*$", "abandoned = 0.0", toml.read_text()))
    other = Workspace.open(other.path)
    for f in ("answers.csv", "rejects.csv", "workers.csv"):
        (other.path / f).unlink(missing_ok=True)
    shutil.rmtree(other.path / "raw", ignore_errors=True)
    out0, truth0 = other.simulate(platform, force=True)
    assert truth0["abandoned_assignments"] == 0
    rep0 = other.ingest([out0])
    cols = ["example_id", "worker_id", "answer", "is_trap", "correct"]
    pd.testing.assert_frame_equal(rep.answers[cols].sort_values(cols).reset_index(drop=True),
                                  rep0.answers[cols].sort_values(cols).reset_index(drop=True))


BROKEN = [
    ("missing.csv", lambda t: t.replace("_worker_id", "_wrkr"), "missing column(s) _worker_id"),
    ("tabs.csv", lambda t: t.replace(",", "\t"), "wrong delimiter"),
    ("truncated.csv", lambda t: t.rstrip("\n").rsplit(",", 5)[0] + "\n", "truncated line"),
    ("quoting.csv", lambda t: t.replace(',q,"",""', ',"q,"",""', 1), "broken quoting"),
]


@pytest.mark.parametrize("name,mutate,fragment", BROKEN)
def test_broken_files_leave_the_workspace_untouched(ws, tmp_path, name, mutate, fragment):
    items = _items(ws)["item_id"].tolist()
    good = tmp_path / "good.csv"
    good.write_text(_appen_fixture(ws, [(items[0], "w1", "a_better"), (items[1], "w2", "b_better")]))
    ws.ingest([good], threshold=0.0)
    before = {p.name: p.read_bytes() for p in ws.path.rglob("*") if p.is_file() and p.name != "manifest.json"}
    bad = tmp_path / name
    bad.write_text(mutate(good.read_text()))
    with pytest.raises(InputFileError) as info:
        ws.ingest([bad], platform="appen")
    assert str(bad) in str(info.value) and fragment in str(info.value) and "\n" not in str(info.value)
    after = {p.name: p.read_bytes() for p in ws.path.rglob("*") if p.is_file() and p.name != "manifest.json"}
    assert before == after


def test_latin1_and_bom(ws, tmp_path):
    items = _items(ws)["item_id"].tolist()
    text = _appen_fixture(ws, [(items[0], "wé", "a_better")])
    latin = tmp_path / "latin.csv"
    latin.write_bytes(text.encode("latin-1"))
    with pytest.raises(InputFileError, match=r"latin.csv:2: is not UTF-8.*Latin-1"):
        ws.ingest([latin], platform="appen")
    bom = tmp_path / "bom.csv"
    bom.write_bytes(text.encode("utf-8-sig").replace(b"\n", b"\r\n"))
    rep = ws.ingest([bom], threshold=0.0)
    assert rep.answers["worker_id"].tolist() == ["wé"]


def test_cli_ingest_summary(ws):
    from click.testing import CliRunner
    from satcal.cli import main
    out, truth = ws.simulate("toloka")
    r = CliRunner().invoke(main, ["ingest", str(ws.path), str(out)])
    assert r.exit_code == 0, r.output
    rows = truth['answers'] + truth['abandoned_assignments']  # unfinished pages are rows too
    assert f"{rows} rows =" in r.output and "rows rejected: platform status: expired" in r.output and "excluded" in r.output


def test_study_from_workspace_uses_kept_examples_only(ws):
    out, truth = ws.simulate("appen")
    rep = ws.ingest([out])
    study = ws.study_data()
    real = rep.answers[~rep.answers["is_trap"]]
    assert len(study.examples) == len(real)
    assert not set(study.examples["worker_id"]) & set(truth["spammers"])


def test_remove_takes_a_file_back_out_and_keeps_it(ws, tmp_path):
    out, _ = ws.simulate("appen")
    ws.ingest([out])
    alone = {n: (ws.path / n).read_bytes() for n in ("answers.csv", "rejects.csv", "workers.csv")}
    mistake = tmp_path / "other-study.csv"
    mistake.write_text(_appen_fixture(ws, [("feedfacefeedface", "wX", "a_better"),
                                           (_items(ws).iloc[0]["item_id"], "wX", "both_bad")]))
    ws.ingest([mistake])
    assert (ws.path / "rejects.csv").read_bytes() != alone["rejects.csv"]
    removed, report = ws.remove("other-study.csv")
    # the tables are exactly those of the files that remain; the file is kept aside
    assert {n: (ws.path / n).read_bytes() for n in alone} == alone
    assert (ws.path / "raw" / "removed" / removed).read_bytes() == mistake.read_bytes()
    assert removed not in set(pd.read_csv(ws.path / "raw" / "index.csv")["file"])
    with pytest.raises(Exception, match="not an archived result file"):
        ws.remove("other-study.csv")


def test_a_killed_removal_is_finished_by_the_next_command(ws, tmp_path):
    from satcal.ingest import REBUILD
    out, _ = ws.simulate("appen")
    ws.ingest([out])
    good = (ws.path / "answers.csv").read_bytes()
    # a removal killed after the index changed, before the tables were rebuilt
    (ws.path / "answers.csv").write_text("stale\n")
    (ws.path / "raw" / REBUILD).write_text("x\n")
    with ws.locked():
        assert ws.repair_interrupted_ingest()
    assert (ws.path / "answers.csv").read_bytes() == good and not (ws.path / "raw" / REBUILD).exists()


def test_utf16_results_read_as_their_utf8_original(ws, tmp_path):
    """A results TSV re-saved as "Unicode text" (UTF-16 with a BOM, as spreadsheet programs
    do; or without one) reads as the UTF-8 file it came from; a sequence that does not decode
    is an error naming its line."""
    out, _ = ws.simulate("toloka")
    text = out.read_text(encoding="utf-8")
    original = get_platform("toloka").read_results(out)
    for encoding in ("utf-16", "utf-16-le", "utf-16-be", "utf-32"):
        f = tmp_path / f"{encoding}.tsv"
        f.write_bytes(text.replace("\n", "\r\n").encode(encoding))
        pd.testing.assert_frame_equal(get_platform("toloka").read_results(f).drop(columns="source_file"),
                                      original.drop(columns="source_file"))
        if encoding != "utf-32":  # ingest guesses the platform from the first bytes, as ingest reads them
            from satcal.platforms import detect_platform
            assert detect_platform(f, f.read_bytes()[:4096].decode("utf-8", "replace")) == "toloka"
    lines = text.splitlines(keepends=True)
    broken = tmp_path / "broken.tsv"
    # a lone high surrogate in the first field of line 4
    broken.write_bytes("".join(lines[:3]).encode("utf-16") + b"\x00\xd8" + "".join(lines[3:]).encode("utf-16-le"))
    with pytest.raises(InputFileError, match=r"broken.tsv:4: is UTF-16 text with bytes that do not decode"):
        get_platform("toloka").read_results(broken)


def _labelstudio_export(ws):
    """A simulated Label Studio JSON export (with cancelled and ground-truth annotations) and
    its annotations, as (item, annotator, choice, cancelled, ground truth) tuples."""
    import re
    toml = ws.path / "study.toml"
    toml.write_text(re.sub(r"(?m)^abandoned = .*$", "abandoned = 0.1", toml.read_text()))
    out, _ = Workspace.open(ws.path).simulate("labelstudio")
    tasks = json.loads(out.read_text())
    annotations = [(t["data"]["item_id"], str(a["completed_by"]),
                    a["result"][0]["value"]["choices"][0] if a["result"] else "",
                    a["was_cancelled"], a["ground_truth"]) for t in tasks for a in t["annotations"]]
    assert any(a[3] for a in annotations) and any(a[4] for a in annotations)
    return out, tasks, annotations


def test_labelstudio_completions_are_read_as_annotations(ws, tmp_path):
    """Label Studio before 1.0 (and some exports since) name a task's annotations
    ``completions`` and a skipped one ``skipped``: read as the same rows, through the CLI too."""
    from click.testing import CliRunner
    from satcal.cli import main
    out, tasks, annotations = _labelstudio_export(ws)
    old = [{("completions" if k == "annotations" else k): v for k, v in t.items()} for t in tasks]
    for t in old:
        for a in t["completions"]:
            a["skipped"] = a.pop("was_cancelled")
    f = tmp_path / "project-1-at-2020.json"
    f.write_text(json.dumps(old))
    new, legacy = (get_platform("labelstudio").read_results(p).drop(columns="source_file") for p in (out, f))
    pd.testing.assert_frame_equal(new, legacy)
    assert len(legacy) == len(annotations)
    assert (legacy["status"] == "cancelled").sum() == sum(a[3] for a in annotations)
    res = CliRunner().invoke(main, ["ingest", str(ws.path), str(f)])
    assert res.exit_code == 0, res.output
    assert f"{len(annotations)} rows = " in res.output
    rejects = ws.table("rejects.csv")
    assert len(ws.table("answers.csv")) + len(rejects) == len(annotations)
    assert (rejects["reason"] == "platform status: cancelled").sum() == sum(a[3] for a in annotations)


@pytest.mark.parametrize("layout", ["json-min", "csv", "tsv"])
def test_labelstudio_minimal_and_table_exports(ws, tmp_path, layout):
    """JSON-MIN, CSV and TSV as Label Studio's own converter writes them from the JSON export
    (label-studio-sdk): one row per annotation that was not skipped, ground-truth ones
    included (these layouts do not mark them: a warning says so)."""
    import shutil
    converter = pytest.importorskip("label_studio_sdk.converter")
    from satcal.errors import SatcalWarning
    from satcal.platforms.labelstudio import label_config
    out, tasks, annotations = _labelstudio_export(ws)
    c = converter.Converter(label_config(), project_dir=None)
    if layout == "json-min":
        c.convert_to_json_min(str(out), str(tmp_path / "min"), is_dir=False)
        f = tmp_path / "min" / "result.json"
    else:
        c.convert_to_csv(str(out), str(tmp_path / "table"), is_dir=False, sep="\t" if layout == "tsv" else ",")
        f = tmp_path / f"project-1.{layout}"
        shutil.copy(tmp_path / "table" / "result.csv", f)
    with pytest.warns(SatcalWarning, match="do not mark ground-truth"):
        raw = get_platform("labelstudio").read_results(f)
    expected = sorted((item, who, choice) for item, who, choice, cancelled, _ in annotations if not cancelled)
    assert sorted(zip(raw["item_id"], raw["worker_id"], raw["answer"])) == expected
    assert (raw["status"] == "").all() and raw["row_id"].str.fullmatch(r"\d+").all()
    from satcal.platforms import detect_platform
    assert detect_platform(f, f.read_text()[:4096]) == "labelstudio"


def test_removing_the_only_file_leaves_empty_tables_not_a_broken_workspace(ws):
    """Issue 25.2: `ingest --remove` of the only ingested file left a workspace where every
    later ingest and analyze died with KeyError: 'answer'. Now the tables are empty (their
    header only), analyze says there is nothing to analyse, and ingesting again restores the
    tables byte for byte."""
    from click.testing import CliRunner
    from satcal.cli import main
    from satcal.ingest import ANSWER_TABLE_COLUMNS, REJECT_TABLE_COLUMNS
    out, _ = ws.simulate("csv")
    runner = CliRunner()
    assert runner.invoke(main, ["ingest", str(ws.path), str(out)]).exit_code == 0
    tables = {n: (ws.path / n).read_bytes() for n in ("answers.csv", "rejects.csv", "workers.csv")}
    res = runner.invoke(main, ["ingest", str(ws.path), "--remove", out.name])
    assert res.exit_code == 0, res.output
    assert "total: 0 rows = 0 answers (0 on traps) + 0 rejects" in res.output
    assert (ws.path / "answers.csv").read_text() == ",".join(ANSWER_TABLE_COLUMNS) + "\n"
    assert (ws.path / "rejects.csv").read_text() == ",".join(REJECT_TABLE_COLUMNS) + "\n"
    # the empty workers table has the columns of the non-empty one, relative_speed included
    header = tables["workers.csv"].decode().splitlines()[0]
    assert "relative_speed" in header.split(",")
    assert (ws.path / "workers.csv").read_text() == header + "\n"
    res = runner.invoke(main, ["analyze", str(ws.path), "-q"])
    assert res.exit_code == 2 and "has no answers to examples; ingest result files first" in res.output
    assert runner.invoke(main, ["ingest", str(ws.path), str(out)]).exit_code == 0
    assert {n: (ws.path / n).read_bytes() for n in tables} == tables


def test_labelstudio_lead_time_and_a_single_task(tmp_path):
    """An annotation's lead_time (seconds on the task) is the row's time, in every layout; a
    task exported on its own (a JSON object, not a list) is read as a list of one."""
    ann = {"id": 31, "completed_by": 7, "created_at": "2026-11-02T10:00:00Z", "lead_time": 12.5,
           "result": [{"from_name": "answer", "to_name": "lists", "type": "choices",
                       "value": {"choices": ["Both are equally bad"]}}]}
    task = {"id": 1, "data": {"item_id": "i1"}, "annotations": [ann]}
    one = tmp_path / "task.json"
    one.write_text(json.dumps(task))
    minimal = tmp_path / "min.json"
    minimal.write_text(json.dumps([{"item_id": "i1", "id": 1, "answer": "Both are equally bad", "annotator": 7,
                                    "annotation_id": 31, "created_at": "2026-11-02T10:00:00Z", "lead_time": 12.5}]))
    read = get_platform("labelstudio").read_results
    full = read(one)
    with pytest.warns(Warning):
        flat = read(minimal)
    for raw in (full, flat):
        assert raw[["item_id", "worker_id", "answer", "row_id"]].values.tolist() == [["i1", "7", "both_bad", "31"]]
        assert raw["seconds"].tolist() == [12.5]


def test_ingest_with_and_without_pyarrow_writes_the_same_tables(ws, tmp_path, monkeypatch):
    """The fast paths (pyarrow's reader giving codes, the Arrow writer) and the core install's
    (pandas' C parser or the csv module, pandas' writer) give the four tables byte for byte,
    over two files (one answering the same items again, with a duplicate and a trap)."""
    import shutil
    from satcal import fileio
    pytest.importorskip("pyarrow")
    out, _ = ws.simulate("csv")
    table = pd.read_csv(out, dtype=str, keep_default_na=False)
    again = tmp_path / "again.csv"
    table.head(40).assign(submitted_at="2026-11-02T09:00:00Z", row_id=lambda t: "x" + t["row_id"]).to_csv(again, index=False)
    other = tmp_path / "core"
    shutil.copytree(ws.path, other)
    monkeypatch.setattr(fileio, "ARROW_MIN_ROWS", 0)  # the Arrow writer for these small tables too
    ws.ingest([out, again], platform="csv", threshold=0.6)
    monkeypatch.setattr(fileio, "_read_regular_arrow", lambda *a: NotImplemented)  # as without pyarrow
    monkeypatch.setattr(fileio, "_arrow_columns", lambda t: None)
    Workspace.open(other).ingest([out, again], platform="csv", threshold=0.6)
    for name in ("answers.csv", "rejects.csv", "workers.csv", "traps_report.csv"):
        assert (ws.path / name).read_bytes() == (other / name).read_bytes(), name
    assert "duplicate" in (ws.path / "rejects.csv").read_text()
