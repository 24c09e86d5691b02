"""A corpus of malformed and hostile inputs, each given to the command that reads it: every one
ends in a one-line error (exit code 2) with no traceback, and leaves the workspace byte for byte
as it was."""
import hashlib
import shutil

import numpy as np
import pytest
from click.testing import CliRunner

from satcal.cli import main
from satcal.workspace import Workspace



@pytest.fixture
def ws(exported_workspace, tmp_path, copy_workspace):
    """A fresh copy of the exported workspace for each test."""
    return copy_workspace(exported_workspace("csv", 5), tmp_path)


def _tree(path):
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file() and p.name != ".satcal.lock"}


RESULT_FILES = {
    "duplicate column": ("r.csv", b"item_id,worker_id,answer,answer\ni1,w1,a_better,b_better\n"),
    "missing column": ("r.csv", b"item_id,worker\ni1,w1\n"),
    "truncated line": ("r.csv", b"item_id,worker_id,answer\ni1,w1,a_better\ni2,w2\n"),
    "stray quote": ("r.csv", b'item_id,worker_id,answer\ni1,"w1,a_better\ni2,w2,b_better\n'),
    "latin-1": ("r.csv", "item_id,worker_id,answer\ni1,w\xe9,a_better\n".encode("latin-1")),
    "empty": ("r.csv", b""),
    "json garbage": ("r.json", b"[{\"data\": {\"item_id\": \"x\"}, \"annotations\": [}"),
    "json object": ("r.json", b"{\"tasks\": []}"),
    "json without item ids": ("r.json", b"[{\"data\": {}, \"annotations\": []}]"),
    # content that yields no answer at all is an error, never an empty success
    "json tasks never annotated": ("r.json", b'[{"id": 1, "data": {"item_id": "i1"}}, {"id": 2, "data": {"item_id": "i2"}, "annotations": []}]'),
    "json-min never annotated": ("r.json", b'[{"item_id": "i1", "id": 1, "annotator": null, "annotation_id": null}]'),
    "json empty list": ("r.json", b"[]"),
    "json unknown layout": ("r.json", b'[{"task": 1, "label": "a_better"}]'),
    "json lines": ("r.json", b'{"id": 1, "results": {"judgments": []}}\n{"id": 2, "results": {}}\n'),
    "json nested too deeply": ("r.json", b"[" * 100_000 + b"]" * 100_000),
    "label studio csv never annotated": ("r.csv", b'"annotation_id","annotator","created_at","id","item_id","lead_time","updated_at"\n,"",,1,"i1",,\n', "labelstudio"),
    "json choices under another control": ("r.json", b'[{"id": 1, "data": {"item_id": "i1"}, "annotations": [{"id": 3, "completed_by": 1, "result": [{"from_name": "choice", "to_name": "lists", "type": "choices", "value": {"choices": ["a_better"]}}]}]}]'),
    "json-min choices under another control": ("r.json", b'[{"item_id": "i1", "id": 1, "choice": "a_better", "annotator": 1, "annotation_id": 3}]'),
    "label studio csv choices under another column": ("r.csv", b'"annotation_id","annotator","choice","id","item_id"\n3,1,"a_better",1,"i1"\n', "labelstudio"),
    "csv header only": ("r.csv", b"item_id,worker_id,answer\n\n"),
    "appen header only": ("r.csv", b"_unit_id,_created_at,_golden,_id,_worker_id,answer,item_id\n", "appen"),
    "appen aggregated report": ("r.csv", b"_unit_id,_golden,_unit_state,_trusted_judgments,_last_judgment_at,answer,answer:confidence,item_id\n1,false,finalized,3,x,a_better,1,i1\n", "appen"),
    "toloka header only": ("r.tsv", b"INPUT:item_id\tOUTPUT:answer\tASSIGNMENT:worker_id\tASSIGNMENT:assignment_id\n", "toloka"),
    "serve header only": ("r.csv", b"row_id,item_id,worker_id,answer,submitted_at,seconds,status\n", "serve"),
    "utf-16 undecodable on line 3": ("r.csv", "item_id,worker_id,answer\ni1,w1,a_better\n".encode("utf-16")
                                     + b"i\x00\x00\xd8,\x00\n\x00", "csv"),
}


@pytest.mark.parametrize("case", sorted(RESULT_FILES))
def test_bad_result_files(ws, tmp_path, case):
    name, data, *platform = RESULT_FILES[case]
    f = tmp_path / name
    f.write_bytes(data)
    platform = platform[0] if platform else "labelstudio" if name.endswith(".json") else "csv"
    before = _tree(ws.path)
    res = CliRunner().invoke(main, ["ingest", str(ws.path), str(f), "--platform", platform])
    _assert_clean_error(res)
    assert str(f) in res.output  # the error names the file
    if "on line 3" in case:
        assert f"{f}:3: " in res.output
    assert _tree(ws.path) == before
    # and detecting the platform changes nothing
    if not platform == "serve":
        _assert_clean_error(CliRunner().invoke(main, ["ingest", str(ws.path), str(f)]))
        assert _tree(ws.path) == before


STUDY_TOML_EDITS = {
    "misspelt section": ("[quality]", "[qualty]"),
    "unknown key": ("min_traps = ", "min_trap = 2\nmin_traps = "),
    "negative seed": ("seed = 2015", "seed = -1"),
    "huge bins": ("n_bins = 10", "n_bins = 1000000"),
    "huge cells": ("min_per_cell = 5", "min_per_cell = 1000000000"),
    "repeated gain": ('gains = ["bin2"', 'gains = ["lin", "bin2"'),
    "nan custom gain": ("# custom_gains = ", "custom_gains = { x = [0.0, nan, 1.0] }\n# "),
    "degenerate levels": ("levels = [0, 1, 2]", "levels = [0, 0]"),
    "infinite heterogeneity": ("heterogeneity = 0.5", "heterogeneity = inf"),
    "not toml": ("[study]", "[study"),
    "unknown extra measure": ("# extra = ", "extra = [\"ndcg\"]\n# "),
    # a logarithm or power of base 1 divides by log 1 = 0 or gives every level gain 0
    "log base 1": ('"log2"', '"log1"'),
    "log base below 1": ('"log2"', '"log0.5"'),
    "jarvelin base 1": ('"log2"', '"jarvelin1"'),
    "exp base 1": ('"exp2"', '"exp1"'),
}


@pytest.mark.parametrize("case", sorted(STUDY_TOML_EDITS))
def test_bad_study_toml(ws, case):
    old, new = STUDY_TOML_EDITS[case]
    toml = ws.path / "study.toml"
    text = toml.read_text()
    assert old in text
    toml.write_text(text.replace(old, new, 1))
    before = _tree(ws.path)
    for command in (["generate", "--force"], ["export", "--force"], ["analyze"]):
        res = CliRunner().invoke(main, [*command[:1], str(ws.path), *command[1:]])
        _assert_clean_error(res)
        assert "study.toml" in res.output
    assert _tree(ws.path) == before


@pytest.mark.parametrize("base", ["1", "1.0", "0", "0.5"])
def test_log_base_must_exceed_one(base):
    """log<b> is 1/log_b(b + i - 1): base 1 divides by log 1 = 0 (it crashed the generator);
    the message says what the base must be."""
    from satcal.measures import get_discount
    with pytest.raises(ValueError, match=rf"discount log{base}: the base must be greater than 1"):
        get_discount(f"log{base}")
    # a base just above 1 is a discount: 1 at rank 1, falling with rank
    d = get_discount("log1.5").factors(5)
    np.testing.assert_allclose(d, np.log(1.5) / np.log(1.5 + np.arange(5)))


def test_unreadable_study_toml(ws, monkeypatch):
    """study.toml that cannot be read (its permissions; simulated, as the tests may run as
    root, who reads anything) is a one-line error naming it, for every command."""
    import pathlib
    toml = ws.path / "study.toml"
    real = pathlib.Path.read_bytes

    def read_bytes(self):
        if self == toml:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    before = _tree(ws.path)
    with monkeypatch.context() as patch:
        patch.setattr(pathlib.Path, "read_bytes", read_bytes)
        for command in (["generate", "--force"], ["export", "--force"], ["analyze"], ["preview"]):
            res = CliRunner().invoke(main, [*command[:1], str(ws.path), *command[1:]])
            _assert_clean_error(res)
            assert f"{toml}: permission denied" in res.output
    assert _tree(ws.path) == before


def test_unreadable_result_file(ws, tmp_path, monkeypatch):
    import pathlib
    f = tmp_path / "results.csv"
    f.write_text("item_id,worker_id,answer\ni1,w1,a_better\n")
    real = pathlib.Path.read_bytes
    before = _tree(ws.path)
    with monkeypatch.context() as patch:
        patch.setattr(pathlib.Path, "read_bytes",
                      lambda self: (_ for _ in ()).throw(PermissionError(13, "Permission denied"))
                      if self == f else real(self))
        res = CliRunner().invoke(main, ["ingest", str(ws.path), str(f)])
    _assert_clean_error(res)
    assert f"{f}: permission denied" in res.output
    assert _tree(ws.path) == before


def test_study_toml_in_latin1_or_as_a_directory(ws):
    toml = ws.path / "study.toml"
    toml.write_bytes(toml.read_bytes().replace(b'name = "', b'name = "caf\xe9 '))
    before = _tree(ws.path)
    _assert_clean_error(CliRunner().invoke(main, ["generate", str(ws.path), "--force"]))
    assert _tree(ws.path) == before
    toml.unlink()
    toml.mkdir()
    _assert_clean_error(CliRunner().invoke(main, ["export", str(ws.path)]))


JUDGMENTS = {
    "huge level": "q1 0 d1 2\nq1 0 d2 100000000\n",
    "overflowing level": "q1 0 d1 2\nq1 0 d2 1e30\n",
    "all zero": "".join(f"q1 0 d{i} 0\n" for i in range(20)),
    "conflicting": "q1 0 d1 2\nq1 0 d1 1\n",
    "fractional": "q1 0 d1 2\nq1 0 d2 0.5\n",
    "three fields": "q1 0 d1 2\nq1 d2 1\n",
}


@pytest.mark.parametrize("case", sorted(JUDGMENTS))
def test_bad_judgments_at_init(tmp_path, case):
    q = tmp_path / "qrels.txt"
    q.write_text(JUDGMENTS[case])
    res = CliRunner().invoke(main, ["init", str(tmp_path / "s"), "--judgments", str(q)])
    _assert_clean_error(res)
    assert not (tmp_path / "s").exists()  # nothing written


def test_init_on_a_file_and_missing_inputs(tmp_path):
    (tmp_path / "f").write_text("x")
    q = tmp_path / "q.txt"
    q.write_text("q1 0 d1 2\nq1 0 d2 0\n")
    _assert_clean_error(CliRunner().invoke(main, ["init", str(tmp_path / "f"), "--judgments", str(q)]))
    _assert_clean_error(CliRunner().invoke(main, ["init", str(tmp_path / "s"), "--judgments",
                                                  str(tmp_path / "nope.txt")]))


def _assert_clean_error(res):
    assert res.exit_code == 2, (res.exit_code, res.output, res.exception)
    assert res.exc_info is None or res.exc_info[0] is SystemExit, res.exc_info
    lines = [l for l in res.output.splitlines() if l.strip()]
    errors = [l for l in lines if l.startswith("satcal: error:") or l.startswith("Error:")]
    assert len(errors) == 1 and "Traceback" not in res.output, res.output
