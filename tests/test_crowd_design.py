"""A study with several answers per example: every exporter asks for them, the simulated crowd
gives them, ingest keeps them as separate rows, and the report measures agreement."""
import re

import pandas as pd

from conftest import copy_workspace


def test_three_answers_per_example_from_design_to_report(exported_workspace, tmp_path):
    from satcal.ingest import ingest
    from satcal.quality import agreement
    from satcal.simulate import simulate_workspace
    from satcal.workspace import Workspace
    ws = copy_workspace(exported_workspace("appen", 10), tmp_path)
    text = re.sub(r"(?m)^answers_per_example = .*$", "answers_per_example = 3", (ws.path / "study.toml").read_text())
    (ws.path / "study.toml").write_text(text)
    ws = Workspace.open(ws.path)
    ws.export("appen", force=True)
    assert "judgments_per_unit = 3" in (ws.path / "batches" / "appen" / "job-settings.txt").read_text()
    results, truth = simulate_workspace(ws, "appen", force=True)
    report = ingest(ws, [results])
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
