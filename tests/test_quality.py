import sys

import numpy as np
import pandas as pd
import pytest

from satcal.errors import SatcalError
from satcal.quality import dawid_skene, worker_table


def test_trust_from_traps_and_platform():
    a = pd.DataFrame({
        "worker_id": ["a"] * 5 + ["b"] * 3 + ["c"] * 2,
        "is_trap": [True, True, True, True, False, True, True, False, False, False],
        "correct": [True, True, True, False, "", False, False, "", "", ""],
        "trust": [np.nan] * 8 + [0.95, 0.95],
    })
    w = worker_table(a, threshold=0.7).set_index("worker_id")
    assert w.loc["a", "trust"] == 0.75 and not w.loc["a", "excluded"] and w.loc["a", "trust_source"] == "traps"
    assert w.loc["b", "trust"] == 0.0 and w.loc["b", "excluded"] and "0.00 < 0.70" in w.loc["b", "reason"]
    assert w.loc["c", "trust"] == 0.95 and w.loc["c", "trust_source"] == "platform"
    assert w.loc["a", "examples_answered"] == 1 and w.loc["a", "traps_seen"] == 4


def test_min_traps_before_trap_trust_counts():
    a = pd.DataFrame({"worker_id": ["a", "a"], "is_trap": [True, False], "correct": [False, ""]})
    w = worker_table(a, threshold=0.7, min_traps=3)
    assert w["trust_source"].iloc[0] == "none" and not w["excluded"].iloc[0]


def test_dawid_skene_is_an_optional_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "crowdkit", None)
    monkeypatch.setitem(sys.modules, "crowdkit.aggregation", None)
    with pytest.raises(SatcalError, match=r"pip install 'satcal\[crowd\]'"):
        dawid_skene(pd.DataFrame({"example_id": ["e"], "worker_id": ["w"], "answer": ["a_better"]}))


def test_cli_dawid_skene_without_crowdkit_writes_nothing(monkeypatch, tmp_path):
    from click.testing import CliRunner
    from satcal.cli import main
    from satcal.workspace import Workspace
    (tmp_path / "q.txt").write_text("q1 0 d1 0\nq1 0 d2 1\nq1 0 d3 2\n")
    ws = Workspace.init(tmp_path / "s", tmp_path / "q.txt", k=2, min_per_cell=1)
    monkeypatch.setitem(sys.modules, "crowdkit", None)
    monkeypatch.setitem(sys.modules, "crowdkit.aggregation", None)
    (tmp_path / "r.csv").write_text("item_id,worker_id,answer\nx,w,a_better\n")
    res = CliRunner().invoke(main, ["ingest", str(ws.path), str(tmp_path / "r.csv"), "--dawid-skene"])
    assert res.exit_code == 2 and "pip install 'satcal[crowd]'" in res.output
    assert not (ws.path / "answers.csv").exists() and not (ws.path / "raw").exists()
