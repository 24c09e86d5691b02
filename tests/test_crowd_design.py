"""A study with several answers per example: every exporter asks for them, the simulated crowd
gives them, ingest keeps them as separate rows, and the report measures agreement."""
import re

import pandas as pd

from conftest import copy_workspace


def test_three_answers_per_example_from_design_to_report(exported_workspace, tmp_path):
    from satcal.quality import agreement
    from satcal.workspace import Workspace
    ws = copy_workspace(exported_workspace("appen", 10), tmp_path)
    text = re.sub(r"(?m)^answers_per_example = .*$", "answers_per_example = 3", (ws.path / "study.toml").read_text())
    (ws.path / "study.toml").write_text(text)
    ws = Workspace.open(ws.path)
    ws.export("appen", force=True)
    assert "judgments_per_unit = 3" in (ws.path / "batches" / "appen" / "job-settings.txt").read_text()
    results, truth = ws.simulate("appen", force=True)
    report = ws.ingest([results])
    real = report.answers[~report.answers["is_trap"].astype(bool)]
    per_example = pd.read_csv(results, dtype=str).merge(ws.table("key.csv"), on="item_id")
    per_example = per_example[per_example["is_trap"] == "False"].groupby("source_id")["_worker_id"].nunique()
    assert (per_example == 3).all()  # three different simulated workers per example
    assert any(line.startswith("agreement: Krippendorff's alpha") for line in report.lines())
    workers = ws.table("workers.csv")
    assert {"seconds_per_answer", "too_fast", "same_side_share", "same_side"} <= set(workers.columns)
    # the simulated spammers rush (under 2 s an item, from the platform's page times): flagged
    assert set(workers.loc[workers["too_fast"] == "True", "worker_id"]) == set(truth["spammers"])
    result = ws.analyze(bootstrap=0, model_check_folds=0)
    crowd = result.meta["crowd"]
    kept = real[~real["worker_id"].isin(workers.loc[workers["excluded"] == "True", "worker_id"])]
    assert crowd["answers"] == len(kept)
    assert abs(crowd["agreement"]["krippendorff_alpha"] - agreement(kept).alpha) < 1e-12
    html = (ws.path / "analysis" / "report.html").read_text()
    assert "Krippendorff&#x27;s alpha" in html or "Krippendorff's alpha" in html


def test_dawid_skene_with_crowd_kit_finds_the_spammers(exported_workspace, tmp_path):
    """crowd-kit's Dawid-Skene, traps passed as known labels, on a simulated study with three
    answers per example: the simulated spammers get the lowest estimated accuracies, the
    known labels are kept, and the accuracies land in workers.csv and the report."""
    import numpy as np
    import pytest
    pytest.importorskip("crowdkit")
    from click.testing import CliRunner
    from satcal.cli import main
    from satcal.quality import dawid_skene
    from satcal.workspace import Workspace
    ws = copy_workspace(exported_workspace("appen", 10), tmp_path)
    text = re.sub(r"(?m)^answers_per_example = .*$", "answers_per_example = 3", (ws.path / "study.toml").read_text())
    (ws.path / "study.toml").write_text(text)
    ws = Workspace.open(ws.path)
    ws.export("appen", force=True)
    results, truth = ws.simulate("appen", force=True)
    res = CliRunner().invoke(main, ["ingest", str(ws.path), str(results), "--dawid-skene"])
    assert res.exit_code == 0, res.output
    workers = pd.read_csv(ws.path / "workers.csv")
    spam = workers["worker_id"].isin(truth["spammers"])
    assert spam.sum() == len(truth["spammers"]) > 0
    assert workers.loc[spam, "ds_accuracy"].max() < workers.loc[~spam, "ds_accuracy"].min()
    answers = pd.read_csv(ws.path / "answers.csv", dtype=str, keep_default_na=False)
    labels, _ = dawid_skene(answers)
    traps = answers[(answers["is_trap"] == "True") & (answers["correct"] == "True")]
    expected = traps.drop_duplicates("example_id").set_index("example_id")["answer"]
    assert (labels.set_index("task")["label"].loc[expected.index] == expected).all()
    # Dawid-Skene agrees with the trap trust about who is reliable
    rho = np.corrcoef(workers["ds_accuracy"].rank(), workers["trust"].rank())[0, 1]
    assert rho > 0.5
    Workspace.open(ws.path).analyze(bootstrap=0, model_check_folds=0)
    html = (ws.path / "analysis" / "report.html").read_text()
    assert "ds_accuracy" in html and "Dawid-Skene" in html
