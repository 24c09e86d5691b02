"""Issue 13: one writer at a time, interrupted commands undone, spreadsheet-safe tables,
outputs with the user's umask."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from satcal.ingest import spreadsheet_safe
from satcal.workspace import Workspace



@pytest.fixture
def ws(exported_workspace, tmp_path, copy_workspace):
    """A fresh copy of the exported workspace for each test."""
    return copy_workspace(exported_workspace("csv", 10), tmp_path)


def _split_results(ws, tmp_path, parts):
    out, _ = ws.simulate("csv")
    table = pd.read_csv(out, dtype=str, keep_default_na=False)
    files = []
    for i, chunk in enumerate(np.array_split(np.arange(len(table)), parts)):
        f = tmp_path / f"part{i}.csv"
        table.iloc[chunk].to_csv(f, index=False)
        files.append(f)
    return table, files


def test_concurrent_ingests_lose_nothing(ws, tmp_path):
    """Ten pairs of `satcal ingest` started together on one workspace, disjoint files: every
    file indexed, every row an answer or a reject."""
    table, files = _split_results(ws, tmp_path, 20)
    for a, b in zip(files[0::2], files[1::2]):
        procs = [subprocess.Popen([sys.executable, "-m", "satcal", "ingest", str(ws.path), str(f),
                                   "--threshold", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for f in (a, b)]
        for p in procs:
            _, err = p.communicate(timeout=300)
            assert p.returncode == 0, err.decode()
    index = pd.read_csv(ws.path / "raw" / "index.csv", dtype=str)
    assert sorted(index["original"]) == sorted(f.name for f in files)
    answers = pd.read_csv(ws.path / "answers.csv", dtype=str, keep_default_na=False)
    rejects = pd.read_csv(ws.path / "rejects.csv", dtype=str, keep_default_na=False)
    assert len(answers) + len(rejects) == len(table)


def test_killed_ingest_is_undone_by_the_next_command(ws, tmp_path, monkeypatch):
    _, (first, second) = _split_results(ws, tmp_path, 2)
    ws.ingest([first], threshold=0.0)
    names = ("answers.csv", "rejects.csv", "workers.csv", "raw/index.csv", "manifest.json")
    before = {n: (ws.path / n).read_bytes() for n in names}
    import satcal.ingest as mod
    real = mod.resolve_rows

    def dies(*args, **kwargs):  # the process dies after archiving, before the tables
        raise KeyboardInterrupt
    monkeypatch.setattr(mod, "resolve_rows", dies)
    with pytest.raises(KeyboardInterrupt):
        ws.ingest([second], threshold=0.0)
    monkeypatch.setattr(mod, "resolve_rows", real)
    for name, data in before.items():
        assert (ws.path / name).read_bytes() == data, name
    assert not list((ws.path / "raw").glob("*-part1.csv")) and not list(ws.path.glob(".satcal-stage-*"))
    again = ws.ingest([second], threshold=0.0)  # and the file can then be ingested normally
    assert again.files["new"].sum() == 1


def test_an_older_versions_killed_first_ingest_is_repaired(ws, tmp_path, copy_workspace):
    """What satcal before output sets left when its first ingest was killed after archiving:
    a pending marker, the archived file, no tables. The next ingest undoes it and ingests
    (it died with KeyError: 'answer')."""
    from satcal.cli import main
    from click.testing import CliRunner
    import satcal.ingest as mod
    _, (part,) = _split_results(ws, tmp_path, 1)
    fresh = copy_workspace(ws, tmp_path / "fresh")
    fresh.ingest([part], threshold=0.0)
    raw = ws.path / "raw"
    raw.mkdir()
    index = pd.read_csv(fresh.path / "raw" / "index.csv", dtype=str)
    shutil.copy(fresh.path / "raw" / index["file"][0], raw / index["file"][0])
    (raw / mod.PENDING).write_text(index.to_json(orient="records") + "\n")
    res = CliRunner().invoke(main, ["ingest", str(ws.path), str(part), "--threshold", "0"])
    assert res.exit_code == 0, res.output
    for name in ("answers.csv", "rejects.csv", "workers.csv", "raw/index.csv"):
        assert (ws.path / name).read_bytes() == (fresh.path / name).read_bytes(), name
    assert not (raw / mod.PENDING).exists()


GENERATED = ("examples.csv", "traps.csv", "scores.csv", "coverage.csv", "coverage.png", "coverage.pdf",
             "manifest.json")


def _snapshot(path, names=GENERATED):
    return {n: (path / n).read_bytes() for n in names}


def _reseed(ws, seed):
    toml = ws.path / "study.toml"
    text = toml.read_text()
    toml.write_text(text.replace(f"seed = {ws.seed}", f"seed = {seed}"))
    return Workspace.open(ws.path)


def test_interrupted_generate_leaves_the_old_set_whole(ws, monkeypatch):
    """Killed before its outputs are committed: the old set, byte for byte, and no stage."""
    before = _snapshot(ws.path)
    import satcal.generate as gen

    def dies(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(gen, "coverage_heatmap", dies)  # after three of the tables are written
    with pytest.raises(KeyboardInterrupt):
        _reseed(ws, 7).generate(force=True)
    assert _snapshot(ws.path) == before
    assert not list(ws.path.glob(".satcal-stage-*"))


def test_generate_killed_mid_commit_is_finished_by_the_next_command(ws, tmp_path, monkeypatch, copy_workspace):
    """Killed while moving the committed set into place: half the files are new; the next
    command that takes the workspace finishes the moves, giving the new set whole."""
    reference = copy_workspace(ws, tmp_path / "reference")
    _reseed(reference, 7).generate(force=True)
    after = _snapshot(reference.path)
    import satcal.fileio as fileio
    real, calls = os.replace, []

    def dies_on_third_move(src, dst):
        if ".satcal-stage-" in str(src) and ".satcal-stage-" not in str(dst):  # a commit's move
            calls.append(dst)
            if len(calls) == 3:
                raise KeyboardInterrupt
        return real(src, dst)
    monkeypatch.setattr(fileio.os, "replace", dies_on_third_move)
    with pytest.raises(KeyboardInterrupt):
        _reseed(ws, 7).generate(force=True)
    monkeypatch.setattr(fileio.os, "replace", real)
    half = _snapshot(ws.path)
    assert 0 < sum(half[n] == after[n] for n in GENERATED) < len(GENERATED)
    with Workspace.open(ws.path).locked():
        pass
    final = _snapshot(ws.path)
    manifest_of = lambda snap: snap.pop("manifest.json")
    assert manifest_of(final).count(b'"command": "generate"') == manifest_of(after).count(b'"command": "generate"')
    assert final == after


def test_sigkill_never_leaves_half_a_set(ws, tmp_path, copy_workspace):
    """`satcal generate --force` killed with SIGKILL at several moments: after recovery the
    workspace holds the old set or the new one, every file from the same one."""
    import signal
    import time
    before = _snapshot(ws.path)
    reference = copy_workspace(ws, tmp_path / "reference")
    _reseed(reference, 7).generate(force=True)
    after = _snapshot(reference.path)
    pristine = tmp_path / "pristine"
    shutil.copytree(ws.path, pristine)
    outcomes = []
    for delay in (0.0, 0.05, 0.3):
        shutil.rmtree(ws.path)
        shutil.copytree(pristine, ws.path)
        _reseed(ws, 7)
        proc = subprocess.Popen([sys.executable, "-m", "satcal", "generate", str(ws.path), "--force"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while not list(ws.path.glob(".satcal-stage-*")) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        from satcal.fileio import OutputSet
        OutputSet.recover(ws.path)
        now = _snapshot(ws.path)
        whole = [name for name, snap in (("old", before), ("new", after))
                 if all(now[n] == snap[n] for n in GENERATED if n != "manifest.json")]
        assert whole, f"killed {delay} s into writing: a mix of old and new outputs"
        assert not list(ws.path.glob(".satcal-stage-*"))
        outcomes.append(whole[0])
    assert "old" in outcomes  # the kills did land while the set was being written


def test_spreadsheet_formulas_are_neutralised():
    t = pd.DataFrame({"worker_id": ["=HYPERLINK(\"x\")", "+cmd|' /C calc'!A0", "@SUM(1)", "-2", "w1",
                                    "\tx", "-x"],
                      "line": [2, 3, 4, 5, 6, 7, 8]})
    safe = spreadsheet_safe(t)
    assert safe["worker_id"].tolist() == ["'=HYPERLINK(\"x\")", "'+cmd|' /C calc'!A0", "'@SUM(1)", "-2",
                                          "w1", "'\tx", "'-x"]
    assert safe["line"].tolist() == t["line"].tolist()


def test_ingested_tables_are_spreadsheet_safe(ws, tmp_path):
    out, _ = ws.simulate("csv")
    table = pd.read_csv(out, dtype=str, keep_default_na=False).head(20)
    table.loc[0, "worker_id"] = "=HYPERLINK(\"http://x\",\"y\")"
    f = tmp_path / "evil.csv"
    table.to_csv(f, index=False)
    ws.ingest([f], threshold=0.0)
    for name in ("answers.csv", "workers.csv", "rejects.csv"):
        text = (ws.path / name).read_text()
        assert ",=HYPERLINK" not in text and "\n=HYPERLINK" not in text
    assert "=HYPERLINK" in next((ws.path / "raw").glob("*-evil.csv")).read_text()  # raw kept as is


def test_outputs_follow_the_umask(tmp_path):
    from satcal.fileio import atomic_write_text
    old = os.umask(0o027)
    try:
        path = atomic_write_text(tmp_path / "x.csv", "a\n")
    finally:
        os.umask(old)
    assert (path.stat().st_mode & 0o777) == 0o640


def test_init_checks_everything_before_writing(tmp_path):
    """All-zero judgments, a path that is a file, two inputs with one name: clear errors, and
    nothing is written; a corrected retry then works."""
    from satcal.errors import SatcalError
    zero = tmp_path / "zero.tsv"
    zero.write_text("query\tdoc\tlevel\n" + "".join(f"q1\td{i}\t0\n" for i in range(12)))
    with pytest.raises(SatcalError, match="at least two levels"):
        Workspace.init(tmp_path / "s", zero)
    assert not (tmp_path / "s").exists()
    (tmp_path / "file").write_text("x")
    with pytest.raises(SatcalError, match="not a directory"):
        Workspace.init(tmp_path / "file", zero)
    good = tmp_path / "a" / "data.csv"
    good.parent.mkdir()
    good.write_text("query,doc,level\n" + "".join(f"q1,d{i},{i % 3}\n" for i in range(12)))
    docs = tmp_path / "b" / "data.csv"
    docs.parent.mkdir()
    docs.write_text("doc,title\n" + "".join(f"d{i},Title {i}\n" for i in range(12)))
    ws = Workspace.init(tmp_path / "s", good, docs)
    assert (ws.path / ws["study.judgments"]).read_text() == good.read_text()
    assert (ws.path / ws["study.documents"]).read_text() == docs.read_text()
    # --force onto its own copied inputs
    again = Workspace.init(ws.path, ws.path / ws["study.judgments"], force=True)
    assert (again.path / again["study.judgments"]).read_text() == good.read_text()


def test_collected_answers_are_never_redesigned(ws, tmp_path):
    from satcal.errors import SatcalError
    _, (part,) = _split_results(ws, tmp_path, 1)
    ws.ingest([part], threshold=0.0)
    for call in (lambda: ws.generate(force=True),
                 lambda: Workspace.init(ws.path, ws.path / ws["study.judgments"], force=True)):
        with pytest.raises(SatcalError, match="collected answers"):
            call()
    answers = pd.read_csv(ws.path / "answers.csv", dtype=str)
    assert len(answers) > 0  # untouched
    # the same batch may be exported again (to another platform): its key does not change
    key = (ws.path / "key.csv").read_bytes()
    ws.export("toloka", force=True)
    assert (ws.path / "key.csv").read_bytes() == key
    # a changed presentation would change the key: refused, pointing at --new-batch
    text = (ws.path / "study.toml").read_text().replace("items_per_page = 10", "items_per_page = 7")
    (ws.path / "study.toml").write_text(text)
    ws = Workspace.open(ws.path)
    with pytest.raises(SatcalError, match="--new-batch"):
        ws.export(force=True)
    assert (ws.path / "key.csv").read_bytes() == key


def test_a_new_batch_keeps_every_earlier_answer(ws, tmp_path):
    """Answers to batch 1 stay answers after batch 2 is exported, and batch 2's answers join
    them: ingest resolves item ids across every batch's key."""
    first, _ = ws.simulate("appen")
    report1 = ws.ingest([first])
    ws.export("csv", new_batch=True)
    assert ws.batch_number() == 2
    keys = sorted(p.name for p in (ws.path / "batches" / "keys").glob("*.csv"))
    assert keys == ["batch-1.csv", "batch-2.csv"]
    k1 = pd.read_csv(ws.path / "batches" / "keys" / "batch-1.csv", dtype=str)
    k2 = pd.read_csv(ws.path / "key.csv", dtype=str)
    assert not set(k1["item_id"]) & set(k2["item_id"])  # new opaque ids
    assert set(k1["source_id"]) == set(k2["source_id"])  # the same examples
    second, _ = ws.simulate("csv")
    report2 = ws.ingest([second])
    assert len(report2.answers) + len(report2.rejects) == int(report2.files["rows"].sum())
    assert not report2.rejects["reason"].str.startswith("unknown item").any()
    # batch 1's rows: an answer or the reject they were before, a duplicate of the same
    # simulated worker's answer to the same example in batch 2, or the answer of a worker whom
    # the screening, reading the new batch's answers too, now excludes; never an unknown item
    appen = report1.files["source_file"].iloc[0]
    before = report1.rejects.set_index("row_id")["reason"]
    now = report2.rejects[report2.rejects["source_file"] == appen].set_index("row_id")["reason"]
    fresh = now[~now.index.isin(before.index)]
    rows = report2.rejects[report2.rejects["source_file"] == appen].set_index("row_id")
    newly = set(report2.workers.loc[report2.workers["excluded"], "worker_id"]) - set(
        report1.workers.loc[report1.workers["excluded"], "worker_id"])
    dropped = ~fresh.str.contains("duplicate")
    assert fresh.str.contains("duplicate").sum() > 0
    assert fresh[dropped].str.startswith("excluded worker: ").all()
    assert set(rows.loc[fresh.index[dropped], "worker_id"]) <= newly
    assert now.reindex(before.index).notna().all()  # earlier rejects stay rejects


def test_label_studio_export_shapes_are_rows_not_tracebacks(tmp_path):
    import json
    from satcal.platforms import get_platform
    ann = lambda **kw: {"id": kw.pop("id", 1), "completed_by": kw.pop("by", 7),
                        "result": [{"from_name": "answer", "to_name": "lists", "type": "choices",
                                    "value": {"choices": kw.pop("choices", ["System A gives better results"])}}], **kw}
    tasks = [
        {"data": {"item_id": "i1"}, "annotations": None},                       # nobody annotated
        {"data": {"item_id": "i2"}, "annotations": "oops"},                     # not a list
        {"data": {"item_id": "i3"}, "annotations": ["oops"]},                   # annotation not an object
        {"data": {"item_id": "i4"}, "annotations": [{"id": 2, "completed_by": 7, "result": None}]},
        {"data": {"item_id": "i5"}, "annotations": [{"id": 3, "completed_by": 7, "result": [
            {"from_name": "answer", "value": "System A gives better results"}]}]},                # value as a string
        {"data": {"item_id": "i6"}, "annotations": [ann(id=4, choices=[["System A gives better results"]])]},
        {"data": {"item_id": "i7"}, "annotations": [ann(id=5, choices=["System A gives better results", "System B gives better results"])]},
        {"data": {"item_id": "i8"}, "annotations": [ann(id=6, ground_truth=True)]},
        {"data": {"item_id": "i9"}, "annotations": [ann(id=7, was_cancelled=True)]},
        {"data": {"item_id": "i10"}, "annotations": {"id": 8, "completed_by": {"id": 7, "email": "a@b.c"},
                                                      "result": []}},
        {"data": {"item_id": "i11"}, "annotations": [ann(id=9, by={"id": 7, "email": "a@b.c"})]},
    ]
    f = tmp_path / "export.json"
    f.write_text(json.dumps(tasks))
    rows = get_platform("labelstudio").read_results(f).set_index("item_id")
    assert "i1" not in rows.index and len(rows) == 10
    status = rows["status"]
    assert status["i2"].startswith("malformed task") and status["i3"].startswith("malformed annotation")
    assert status["i4"] == "" and rows.loc["i4", "answer"] == ""      # no answer: a malformed-answer reject
    assert status["i5"] == "" and rows.loc["i5", "answer"] == "a_better"
    assert status["i6"].startswith("malformed annotation: choices")
    assert status["i7"].startswith("several answers")
    assert status["i8"].startswith("ground truth") and status["i9"] == "cancelled"
    assert rows.loc["i11", "worker_id"] == rows.loc["i5", "worker_id"] == "7"  # one id per person


def test_duplicate_result_columns_are_named(tmp_path):
    from satcal.errors import InputFileError
    from satcal.platforms import get_platform
    f = tmp_path / "r.csv"
    f.write_text("item_id,worker_id,answer,answer\ni1,w1,a_better,b_better\n")
    with pytest.raises(InputFileError, match=r"r.csv:1: column 'answer' appears 2 times"):
        get_platform("csv").read_results(f)


def test_no_silent_wrong_scale(tmp_path):
    from satcal.errors import InputFileError, SatcalError
    from satcal.ingest import read_external_study
    from satcal.judgments import read_judgments
    from satcal.measures import score_lists
    from satcal.runs import level_cube, read_runs
    with pytest.raises(ValueError, match="level 3 is above the top level 2 .the default"):
        score_lists([[3, 3, 3, 3, 3]], ["exp2-log2"])
    assert score_lists([[3, 3, 3, 3, 3]], ["exp2-log2"], n_levels=4)[0, 0] == pytest.approx(1.0)
    q = tmp_path / "q.txt"
    q.write_text("".join(f"q1 0 d{i} {i % 3}\n" for i in range(10)))
    a = tmp_path / "a.csv"
    a.write_text("query,a1,a2,b1,b2,answer\nq1,d0,d1,d3,d4,a_better\nq1,d2,d0,d1,d3,b_better\n")
    with pytest.raises(InputFileError, match=r"a.csv:3: column 'a1': .*above the top level 1 of --levels 2"):
        read_external_study(a, read_judgments(q), n_levels=2)
    r = tmp_path / "r.run"
    r.write_text("Q9 Q0 d1 1 3.0 blind\n")
    with pytest.raises(SatcalError, match="run 'blind' retrieves documents for no judged query"):
        level_cube(read_runs([r]), read_judgments(q), 5)


def test_answers_to_changed_examples_are_refused(ws, tmp_path):
    """Editing examples.csv after answers were collected would join old answers to new lists:
    the analysis refuses, naming an example."""
    from satcal.errors import SatcalError
    _, (part,) = _split_results(ws, tmp_path, 1)
    ws.ingest([part], threshold=0.0)
    assert len(ws.study_data().examples) > 0
    examples = pd.read_csv(ws.path / "examples.csv", dtype=str, keep_default_na=False)
    examples["a1"], examples["b1"] = examples["b1"].copy(), examples["a1"].copy()
    examples.to_csv(ws.path / "examples.csv", index=False)
    with pytest.raises(SatcalError, match="collected for examples that have changed since"):
        ws.study_data()


def test_errors_name_the_right_place(ws, tmp_path):
    from satcal.errors import InputFileError, SatcalError
    from satcal.platforms import get_platform
    f = tmp_path / "q.csv"
    f.write_text("item_id,worker_id,answer\n" + "i1,w1,a_better\n" * 11 + 'i2,"w2,a_better\n'
                 + "i3,w3,b_better\n" * 600)
    with pytest.raises(InputFileError, match=r"q.csv:13: broken quoting .* runs on to line 613"):
        get_platform("csv").read_results(f)
    ws.preview()
    with pytest.raises(SatcalError, match="preview.html already exists"):
        ws.preview()
    assert ws.preview(force=True).exists()
    fresh = tmp_path / "fresh"
    shutil.copytree(ws.path, fresh)
    (fresh / "items.csv").unlink()
    with pytest.raises(SatcalError, match="items.csv: missing; run satcal export"):
        Workspace.open(fresh).preview(force=True)


def test_out_directory_is_written_as_one_set(tmp_path, monkeypatch):
    """`satcal analyze --out DIR --force` that dies half-way leaves DIR as it was; a run that
    finishes replaces its own files and keeps the user's others. (Two formulations: the
    output set, its staging and its commit are the same whatever the number calibrated.)"""
    from click.testing import CliRunner
    from satcal.cli import main
    import satcal.report as report
    out = tmp_path / "out"
    out.mkdir()
    (out / "bias.csv").write_text("an older analysis\n")
    (out / "my-notes.txt").write_text("mine\n")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    args = ["analyze", "--dataset", "ecir2015", "--formulations", "lin-const,exp2-log2", "--bootstrap", "0",
            "--out", str(out), "--force", "-q"]

    def dies(*a, **k):  # after the tables are written, while the figures are drawn
        raise RuntimeError("killed")
    monkeypatch.setattr(report, "figure_bias", dies)
    res = CliRunner().invoke(main, args)
    assert res.exit_code != 0
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    monkeypatch.undo()
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert (out / "my-notes.txt").read_text() == "mine\n"
    assert (out / "bias.csv").read_text().startswith("formulation,")
    assert (out / "report.html").exists() and not list(out.glob(".satcal-stage-*"))


def test_the_lock_is_reentrant_in_a_process(ws):
    """A command that holds the workspace and calls a stage that takes it too does not wait
    for itself (it once waited the full LOCK_WAIT); another process still waits."""
    import time
    start = time.monotonic()
    with ws.locked(), Workspace.open(ws.path).locked(), ws.locked():
        probe = subprocess.run([sys.executable, "-c",
                                "from filelock import FileLock, Timeout; import sys\n"
                                f"try: FileLock({str(ws.path / '.satcal.lock')!r}).acquire(timeout=0.2)\n"
                                "except Timeout: sys.exit(3)"], timeout=60)
    assert probe.returncode == 3  # held against other processes
    assert time.monotonic() - start < 30


# --------------------------------------------------------------------------------------------
# Issue 25.2: every writing command killed at random instants; a full disk
# --------------------------------------------------------------------------------------------
INGESTED = ("answers.csv", "rejects.csv", "workers.csv", "traps_report.csv", "raw/index.csv",
            "raw/ingest-settings.json")


def _state(path, names):
    return {n: (path / n).read_bytes() if (path / n).exists() else None for n in names}


def _kill_at_random(args, ws_path, rng, span=0.6):
    """Start ``satcal ARGS``; SIGKILL it a random time (uniform over ``span`` s) after it has
    started writing into the workspace (its lock taken)."""
    import signal
    import time
    lock = ws_path / ".satcal.lock"
    stamp = lock.stat().st_mtime_ns if lock.exists() else None
    proc = subprocess.Popen([sys.executable, "-m", "satcal", *map(str, args)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if lock.exists() and lock.stat().st_mtime_ns != stamp or list(ws_path.glob(".satcal-stage-*")):
            break
        time.sleep(0.002)
    time.sleep(float(rng.uniform(0, span)))
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    return proc.returncode == -signal.SIGKILL  # killed (not finished before the kill)


def test_writing_commands_killed_at_random_instants(ws, tmp_path):
    """Issue 25.2: the first ingest, a later one, ingest --remove and export --force, each
    killed with SIGKILL at seeded random instants: the workspace then holds the state before
    the command or after it, every file from the same one, and the next command finishes
    cleanly (a killed first ingest once left `KeyError: 'answer'` for good)."""
    from click.testing import CliRunner
    from satcal.cli import main
    rng = np.random.default_rng(25)
    _, (first, second) = _split_results(ws, tmp_path, 2)
    pristine = tmp_path / "pristine"
    shutil.copytree(ws.path, pristine)
    runner = CliRunner()

    def fresh():
        shutil.rmtree(ws.path)
        shutil.copytree(pristine, ws.path)

    def cli(*args):
        res = runner.invoke(main, [str(a) for a in args])
        assert res.exit_code == 0, (args, res.output)

    # states before and after each command, made without kills
    fresh()
    s0 = _state(ws.path, INGESTED)
    cli("ingest", ws.path, first, "--threshold", "0")
    s1 = _state(ws.path, INGESTED)
    cli("ingest", ws.path, second, "--threshold", "0")
    s2 = _state(ws.path, INGESTED)
    cli("ingest", ws.path, "--remove", second.name, "--threshold", "0")
    s3 = _state(ws.path, INGESTED)
    assert len({str(s) for s in (s0, s1, s2)}) == 3
    assert s3 == s1  # removing the second file gives the tables of the first alone, byte for byte
    toml = ws.path / "study.toml"
    toml.write_text(toml.read_text().replace("items_per_page = 10", "items_per_page = 7"))
    exported = ("key.csv", "items.csv", "batches/keys/batch-1.csv", "batches/csv/items.csv")
    e0 = _state(pristine, exported)
    fresh()
    toml.write_text(toml.read_text().replace("items_per_page = 10", "items_per_page = 7"))
    cli("export", ws.path, "--force")
    e1 = _state(ws.path, exported)
    assert e0 != e1

    plans = [  # (state before, the command, state after, names compared)
        (lambda: None, ("ingest", ws.path, first, "--threshold", "0"), s0, s1, INGESTED),
        (lambda: None, ("ingest", ws.path, first, "--threshold", "0"), s0, s1, INGESTED),
        (lambda: cli("ingest", ws.path, first, "--threshold", "0"),
         ("ingest", ws.path, second, "--threshold", "0"), s1, s2, INGESTED),
        (lambda: cli("ingest", ws.path, first, second, "--threshold", "0"),
         ("ingest", ws.path, "--remove", second.name, "--threshold", "0"), s2, s3, INGESTED),
        (lambda: toml.write_text(toml.read_text().replace("items_per_page = 10", "items_per_page = 7")),
         ("export", ws.path, "--force"), e0, e1, exported),
    ]
    outcomes = []
    for setup, args, before, after, names in plans:
        fresh()
        setup()
        killed = _kill_at_random(args, ws.path, rng)
        with Workspace.open(ws.path).locked():  # what every next command does first
            pass
        now = _state(ws.path, names)
        assert now in (before, after), f"{args[0]} killed at random: a mix of old and new"
        assert not list(ws.path.glob(".satcal-stage-*"))
        outcomes.append((args[0], killed, "old" if now == before else "new"))
        if "--remove" in args and now == after:  # it had finished: the file is out already
            cli("ingest", ws.path, first, "--threshold", "0")  # the next command, changing nothing
        else:
            cli(*args)  # the next command finishes cleanly
        assert _state(ws.path, names) == after
        if args[0] == "ingest":  # the answers read as a study (it died with KeyError: 'answer')
            assert len(Workspace.open(ws.path).study_data().examples) > 0
    assert any(k for _, k, _ in outcomes)  # the kills did land while commands ran


def _mount_small_fs(path, size_kb):
    """A tmpfs of ``size_kb`` at ``path``, or the reason it cannot be mounted here."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(path)],
                          capture_output=True, text=True)
    return None if done.returncode == 0 else f"mount -t tmpfs failed: {done.stderr.strip()}"


@pytest.mark.parametrize("free_kb", [20, 200])
def test_a_full_disk_is_one_line_and_leaves_nothing(ws, tmp_path, free_kb):
    """Issue 25.2: the workspace on a small tmpfs filled to ``free_kb`` KB: every writing
    command either succeeds or ends with one line naming the path (exit 1, no traceback),
    the workspace is as before and no stage is left; with space again the next ingest works
    (it once failed with KeyError: 'answer')."""
    from click.testing import CliRunner
    from satcal.cli import main
    _, (part,) = _split_results(ws, tmp_path, 1)
    used = sum(p.stat().st_size for p in ws.path.rglob("*") if p.is_file()) // 1024
    small = tmp_path / "small"
    reason = _mount_small_fs(small, used + free_kb + 4096)
    if reason:
        pytest.skip(reason)
    try:
        target = small / "study"
        shutil.copytree(ws.path, target)
        free = os.statvfs(small).f_bavail * os.statvfs(small).f_frsize
        with open(small / "filler", "wb") as fh:  # leave free_kb KB
            fh.write(b"\0" * max(0, free - free_kb * 1024))
        names = [p.relative_to(target) for p in target.rglob("*") if p.is_file()]
        before = {n: (target / n).read_bytes() for n in names}
        runner = CliRunner()
        failed = []
        for args in (["ingest", target, part, "--threshold", "0"], ["generate", target, "--force", "-q"],
                     ["export", target, "--force"], ["preview", target, "--force"],
                     ["simulate", target, "--force"]):
            res = runner.invoke(main, [str(a) for a in args])
            if res.exit_code == 0:  # it fitted: what it wrote is the state the next one keeps
                names = [p.relative_to(target) for p in target.rglob("*") if p.is_file()]
                before = {n: (target / n).read_bytes() for n in names}
                continue
            failed.append(args[0])
            assert res.exit_code == 1, (args, res.output)
            errors = [line for line in res.output.splitlines() if not line.startswith("satcal: warning:")]
            assert len(errors) == 1 and errors[0].startswith(f"satcal: error: {target}/"), res.output
            assert errors[0].endswith("no space left on the device; free some and run the command again "
                                      "(nothing was changed)") and ".satcal-stage" not in errors[0]
            assert {n: (target / n).read_bytes() for n in names} == before, args[0]
            left = {p.relative_to(target) for p in target.rglob("*") if p.is_file()} - set(names)
            assert left <= {Path(".satcal.lock")}, (args[0], left)
            assert not list(target.glob(".satcal-stage-*"))
        assert "ingest" in failed  # the disk was full enough to matter
        res = runner.invoke(main, ["init", str(small / "new"), "--judgments", str(ws.path / ws["study.judgments"])])
        if res.exit_code != 0:
            assert res.exit_code == 1 and "no space left on the device" in res.output, res.output
            assert not (small / "new").exists()
        (small / "filler").unlink()
        res = runner.invoke(main, ["ingest", str(target), str(part), "--threshold", "0"])
        assert res.exit_code == 0, res.output
        answers = pd.read_csv(target / "answers.csv", dtype=str)
        rejects = pd.read_csv(target / "rejects.csv", dtype=str)
        assert len(answers) + len(rejects) == len(pd.read_csv(part, dtype=str))
    finally:
        subprocess.run(["umount", str(small)], capture_output=True)


def test_a_read_only_workspace_is_one_line(ws, tmp_path):
    """EROFS (a read-only mount) and EACCES end in one line naming the path, exit 1."""
    import errno
    from click.testing import CliRunner
    from satcal.cli import environment_error, main
    assert environment_error(PermissionError(errno.EACCES, "Permission denied", "/x/key.csv")) == \
        "/x/key.csv: permission denied"
    assert environment_error(OSError(errno.ENOSPC, "No space", "/x/a.csv", None, "/x/.satcal-stage-ingest/new/b.csv")) \
        == "/x/b.csv: no space left on the device; free some and run the command again (nothing was changed)"
    assert environment_error(OSError(errno.EIO, "I/O error", "/x")) == "/x: I/O error"  # any named path: one line
    assert environment_error(OSError(errno.EIO, "I/O error")) is None  # no path: the traceback stays
    _, (part,) = _split_results(ws, tmp_path, 1)
    small = tmp_path / "ro"
    reason = _mount_small_fs(small, 64 * 1024)
    if reason:
        pytest.skip(reason)
    try:
        shutil.copytree(ws.path, small / "study")
        subprocess.run(["mount", "-o", "remount,ro", str(small)], check=True)
        res = CliRunner().invoke(main, ["ingest", str(small / "study"), str(part)])
        assert res.exit_code == 1
        assert res.output == f"satcal: error: {small / 'study' / '.satcal.lock'}: read-only file system\n"
    finally:
        subprocess.run(["umount", str(small)], capture_output=True)
