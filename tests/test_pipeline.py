"""End to end: a simulated crowd with a known user model, recovered by the whole pipeline."""
import json

import pytest

pytestmark = pytest.mark.slow  # end to end: deselect with -m 'not slow'


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from satcal.pipeline import run_demo
    out = tmp_path_factory.mktemp("demo")
    lines = []
    summary = run_demo(out, seed=7, progress=False, echo=lines.append, min_per_cell=100, bootstrap=50)
    return out, summary, lines


def test_truth_is_recovered(demo):
    out, s, _ = demo
    assert s["band_coverage"] >= 0.8          # the true curve lies in the fitted 95% band
    # the standardised estimand of the simulated users, computed from the crowd itself (not from
    # the fit): the estimate ranks its least-biased formulation near the top and orders the 36 as
    # the truth does (the formulation users follow need not be the least biased: b1 = |phi - s*|)
    assert s["true_least_biased_rank"] <= 3
    assert s["b1_std_spearman"] >= 0.9
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


def test_demo_report_has_intervals(demo):
    import pandas as pd
    out, s, _ = demo
    bias = pd.read_csv(out / "ecir2015" / "bias.csv")
    assert (bias.b1_lo <= bias.b1).all() and (bias.b1 <= bias.b1_hi).all()
    assert (out / "ecir2015" / "figures" / "fig4_intervals.png").exists()


def test_reproduction_script(tmp_path):
    import subprocess
    import sys
    from pathlib import Path
    script = Path(__file__).resolve().parents[1] / "analysis" / "reproduce_ecir2015.py"
    proc = subprocess.run([sys.executable, str(script), str(tmp_path), "--bootstrap", "0"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "lin-const" in proc.stdout and (tmp_path / "figures" / "fig3_bias.pdf").exists()


def test_demo_workspace_can_be_served_to_a_prolific_participant(demo):
    from satcal.pipeline import DEMO_COMPLETION_CODE
    from satcal.serve.client import Participant, ServerProcess, attentive
    out, _, lines = demo
    assert any("satcal serve" in line for line in lines)
    with ServerProcess(out / "study") as server:
        visit = Participant(server.url).run("PROLIFIC_PID=demo0001&STUDY_ID=d&SESSION_ID=d", attentive)
    assert visit.errors == []
    assert visit.end_url == f"https://app.prolific.com/submissions/complete?cc={DEMO_COMPLETION_CODE}"
    assert visit.pages == 5  # pages_per_participant of the template


def test_demo_says_which_estimand_each_curve_estimates(demo):
    _, s, lines = demo
    line = next(l for l in lines if "analyze:" in l)
    assert "per-list satisfaction" in line and "same verdict" in line
    # the joint model's band holds the simulated users' per-list curve
    assert s["joint_band_coverage"] >= 0.8


def test_simulate_serve_says_how_many_participants_were_given_no_page():
    """The hosted dry run with more simulated participants than pages: 60 sent, 26 of them given
    no page (a study of 162 pages, 5 a participant, holds about 32); saying "60 answered" would
    count the 26 in."""
    from pathlib import Path
    from satcal.pipeline import simulation_text
    truth = {"pages": 162, "spammers": ["SIM-0008", "SIM-0016"]}
    text = simulation_text(truth, served_at="http://127.0.0.1:8000", participants=60, where=Path("study"),
                           unserved=60 - 34)
    assert text == ("60 simulated participants answered 162 pages at http://127.0.0.1:8000 (2 spammers); 26 of "
                    "them were given no page (the study had none left: [simulation] workers is more than its "
                    "pages hold); truth in study/simulated/serve-truth.json")
    assert "no page" not in simulation_text(truth, served_at="u", participants=30, where=Path("s"))
