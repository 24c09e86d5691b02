"""End to end: a simulated crowd with a known user model, recovered by the whole pipeline."""
import json

import pytest


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from satcal.pipeline import run_demo
    out = tmp_path_factory.mktemp("demo")
    lines = []
    summary = run_demo(out, seed=7, progress=False, echo=lines.append, min_per_cell=100)
    return out, summary, lines


def test_truth_is_recovered(demo):
    out, s, _ = demo
    assert s["band_coverage"] >= 0.8          # the true curve lies in the fitted 95% band
    assert s["truth_rank"] <= 5                # the generating formulation is among the least biased
    truth = json.loads((out / "study" / "simulated" / "appen-truth.json").read_text())
    assert s["spammers_caught"] == len(truth["spammers"]) > 0


def test_spammers_are_excluded_and_reported(demo):
    import pandas as pd
    out, s, _ = demo
    w = pd.read_csv(out / "study" / "workers.csv")
    truth = json.loads((out / "study" / "simulated" / "appen-truth.json").read_text())
    spam = w[w.worker_id.isin(truth["spammers"])]
    assert spam["excluded"].all() and spam["reason"].str.startswith("trust").all()
    honest = w[~w.worker_id.isin(truth["spammers"])]
    assert honest["excluded"].mean() < 0.2


def test_demo_writes_every_output(demo):
    out, s, lines = demo
    for label, path in s["outputs"].items():
        for p in path.split(", "):
            assert __import__("pathlib").Path(p).exists(), label
    assert (out / "ecir2015" / "report.html").exists() and (out / "study" / "analysis" / "bias.csv").exists()
    assert any("CC BY-SA 4.0" in l for l in lines)
