import json
import re

import pytest
from click.testing import CliRunner

from satcal.cli import main
from satcal.errors import SatcalError
from satcal.fileio import sha256_file
from satcal.workspace import Workspace


@pytest.fixture
def qrels(tmp_path, ecir_study):
    p = tmp_path / "qrels.txt"
    ecir_study.judgments.to_trec(p)
    return p


def test_init_writes_a_commented_valid_design(tmp_path, qrels):
    ws = Workspace.init(tmp_path / "s", qrels, min_per_cell=50)
    text = (ws.path / "study.toml").read_text()
    assert text.count("\n#") > 10 and "min_per_cell = 50" in text
    assert ws["study.levels"] == [0, 1, 2] and ws.k == 5
    manifest = json.loads((ws.path / "manifest.json").read_text())
    assert manifest["inputs"]["inputs/qrels.txt"] == sha256_file(qrels)
    assert manifest["seeds"]["study"] == 2015 and "numpy" in manifest["packages"]
    assert manifest["history"][0]["command"] == "init"


@pytest.mark.parametrize("old,new,fragment", [
    ("min_per_cell = 50", "min_per_cell = -3", "generator.min_per_cell = -3: expected an integer from 1"),
    ("min_per_cell = 50", "min_per_cell = 1000000000", "generator.min_per_cell = 1000000000: expected an integer from 1 to 100,000"),
    ("n_bins = 10", "n_bins = 1000000", "generator.n_bins = 1000000: expected an integer from 2 to 100"),
    ("[quality]", "[qualty]", "unknown section [qualty] (did you mean [quality]?)"),
    ("min_traps = ", "min_trap = 3\nmin_traps = ", "unknown key quality.min_trap (did you mean quality.min_traps?)"),
    ("seed = 2015", "seed = -1", "study.seed = -1: expected an integer >= 0"),
    ('gains = ["bin2"', 'gains = ["lin", "bin2"', "formulations.gains lists lin more than once"),
    ("# custom_gains = ", "custom_gains = { bad = [0.0, nan, 1.0] }\n# ", "formulations.custom_gains.bad"),
    ("levels = [0, 1, 2]", "levels = [0, 0]", "study.levels = [0, 0]: expected a list of at least two distinct"),
    ("heterogeneity = 0.5", "heterogeneity = inf", "simulation.heterogeneity = inf: expected a finite number"),
    ("intercept = -3.0", "intercept = nan", "simulation.intercept = nan: expected a finite number"),
    ('method = "optimal"', 'method = "fast"', "generator.method = 'fast': expected one of optimal"),
    ("k = 5", 'k = "five"', "study.k = 'five': expected a positive integer"),
    ('platform = "appen"', 'platform = "mturk"', "presentation.platform = 'mturk'"),
    ("trust_threshold = 0.7", "trust_threshold = 7", "quality.trust_threshold = 7: expected a number in [0, 1]"),
    ('gains = ["bin2"', 'gains = ["quad"', "formulations.gains: unknown gain 'quad'"),
    ("seed = 2015", "seed = ", "study.toml"),
])
def test_bad_design_is_explained(tmp_path, qrels, old, new, fragment):
    ws = Workspace.init(tmp_path / "s", qrels, min_per_cell=50)
    toml = ws.path / "study.toml"
    text = toml.read_text()
    assert old in text
    toml.write_text(text.replace(old, new, 1))
    with pytest.raises(SatcalError) as info:
        Workspace.open(ws.path)
    assert fragment in str(info.value) and str(toml) in str(info.value)


def test_not_a_workspace(tmp_path):
    with pytest.raises(SatcalError, match="not a satcal workspace"):
        Workspace.open(tmp_path)


def test_cli_flow_and_no_silent_overwrite(tmp_path, qrels):
    runner = CliRunner()
    d = tmp_path / "study"
    r = runner.invoke(main, ["init", str(d), "--judgments", str(qrels), "--min-per-cell", "10", "--platform", "toloka"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(main, ["generate", str(d), "-q"])
    assert r.exit_code == 0 and "every feasible cell has >= 10: yes" in r.output
    examples = (d / "examples.csv").read_bytes()
    r = runner.invoke(main, ["generate", str(d), "-q"])
    assert r.exit_code == 2 and "--force" in r.output
    assert (d / "examples.csv").read_bytes() == examples
    r = runner.invoke(main, ["export", str(d)])
    assert r.exit_code == 0 and (d / "batches" / "toloka" / "tasks.tsv").exists()
    r = runner.invoke(main, ["preview", str(d)])
    assert r.exit_code == 0 and (d / "preview.html").exists()
    assert (d / "coverage.png").exists() and (d / "coverage.pdf").exists()
    history = [h["command"] for h in json.loads((d / "manifest.json").read_text())["history"]]
    assert history == ["init", "generate", "export"]


def test_custom_formulations_from_the_optimiser(tmp_path, qrels):
    """The TOML snippet written by reliability --optimize makes a study calibrate the optimum."""
    import tomllib
    import numpy as np
    from satcal.reliability import simulate_runs
    from satcal.judgments import read_judgments
    runs_dir = tmp_path / "runs"
    simulate_runs(read_judgments(qrels), n_systems=4, depth=10, seed=1, out_dir=runs_dir)
    args = ["reliability", "--judgments", str(qrels), "--k", "5", "--replicates", "100", "--optimize", "gains",
            "--out", str(tmp_path / "rel"), "-q", "--runs", str(runs_dir)]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    snippet = (tmp_path / "rel" / "optimal_gains.toml").read_text()
    values = tomllib.loads(snippet)["custom_gains"]["optimal"]
    assert len(values) == 3 and values[0] == 0 and abs(sum(values) - 1) < 1e-5
    ws = Workspace.init(tmp_path / "s", qrels, min_per_cell=10)
    toml = ws.path / "study.toml"
    toml.write_text(toml.read_text().replace("[generator]", snippet + "\n[generator]"))
    forms = Workspace.open(ws.path).formulations()
    assert len(forms) == 42 and forms[6].id == "optimal-zipf"
    assert np.allclose(forms[6].gain([0, 1, 2]), values)


def test_custom_gain_of_the_wrong_size(tmp_path, qrels):
    ws = Workspace.init(tmp_path / "s", qrels, min_per_cell=10)
    toml = ws.path / "study.toml"
    toml.write_text(toml.read_text().replace("[generator]", "custom_gains = { mine = [0, 1] }\n[generator]"))
    with pytest.raises(SatcalError, match=r"formulations.custom_gains.mine = \[0, 1\]: expected one value per level"):
        Workspace.open(ws.path)


def test_same_seed_same_bytes_through_the_workspace(tmp_path, qrels):
    """generate + export twice from the same design and seed: byte-identical files."""
    files = ["examples.csv", "traps.csv", "scores.csv", "coverage.csv", "coverage.png", "key.csv",
             "items.csv", "batches/appen/units.csv", "batches/appen/job.cml"]
    contents = []
    for name in ("one", "two"):
        ws = Workspace.init(tmp_path / name, qrels, min_per_cell=15)
        ws.generate()
        ws.export()
        contents.append({f: (ws.path / f).read_bytes() for f in files})
    assert contents[0] == contents[1]


def test_extra_measures_in_a_study_cost_what_generate_says(tmp_path, qrels):
    """[formulations] extra: reported beside the family, covered only with cover_extra, the
    cost in examples printed; a pool-based one covered is refused with the reason."""
    runner = CliRunner()
    d = tmp_path / "study"
    assert runner.invoke(main, ["init", str(d), "--judgments", str(qrels), "--min-per-cell", "10"]).exit_code == 0
    toml = d / "study.toml"
    toml.write_text(toml.read_text().replace('discounts = ["zipf"', 'extra = ["err", "ap"]\ndiscounts = ["zipf"', 1))
    r = runner.invoke(main, ["generate", str(d), "-q"])
    assert r.exit_code == 0, r.output
    plain = len(Workspace.open(d).table("examples.csv"))
    assert "Extra measures err: not covered (cover_extra = false)" in r.output
    assert f"over the {plain} the crossed family alone needs" in r.output
    assert "Extra measures ap: pool-based, not placed by the generator" in r.output
    toml.write_text(toml.read_text().replace("cover_extra = false", "cover_extra = true"))
    r = runner.invoke(main, ["generate", str(d), "-q", "--force"])
    assert r.exit_code == 2 and "ap uses normalisation 'pool'" in r.output
    toml.write_text(toml.read_text().replace('extra = ["err", "ap"]', 'extra = ["err"]'))
    r = runner.invoke(main, ["generate", str(d), "-q", "--force"])
    assert r.exit_code == 0 and "Extra measures err: covered, +" in r.output, r.output
    covered = len(Workspace.open(d).table("examples.csv"))
    line = r.output.split("Extra measures err: covered, ")[1].splitlines()[0]
    cost, without = int(line.split()[0]), int(line.split("over the ")[1].split()[0])
    assert covered == without + cost  # the selection made without err, beside the one made with it
    import pandas as pd
    coverage = pd.read_csv(d / "coverage.csv")
    err = coverage[(coverage["formulation"] == "err") & coverage["feasible"]]
    assert err["covered"].all() and (err["count"] >= 10).all()


def _answer_one_page(ws, url=None):
    """One lab participant answers one page of the hosted study (in process, no server)."""
    from satcal.serve import HostedStudy
    study = ws.hosted_study(url)
    try:
        pid = study.enter("lab", "p1")
        view = study.next_page(pid)
        form = {f"answer-{it['item_id']}": it.get("expected") or "a_better" for it in view.items}
        assert study.submit(pid, view.token, form) == "stored"
        return sum(it["kind"] == "item" for it in view.items)
    finally:
        study.engine.dispose()


def test_answers_in_the_study_database_count_as_collected(exported_workspace, tmp_path, copy_workspace):
    """Issue 25.1: serve.db holds answers not ingested yet; export --force (a changed key),
    generate --force and init --force are refused through the CLI, the key is untouched, and
    the answers then ingest with no 'unknown item id'."""
    import pandas as pd
    ws = copy_workspace(exported_workspace("serve", 10), tmp_path)
    answered = _answer_one_page(ws)
    key = (ws.path / "key.csv").read_bytes()
    toml = ws.path / "study.toml"
    import re
    text = toml.read_text()
    assert re.search(r"(?m)^items_per_page = ", text)
    other = int(ws.table("key.csv").groupby("page").size().max()) + 2  # a new key: pages of another size
    toml.write_text(re.sub(r"(?m)^items_per_page = .*$", f"items_per_page = {other}", text))
    runner = CliRunner()
    res = runner.invoke(main, ["export", str(ws.path), "--force"])
    assert res.exit_code == 2, res.output
    assert f"serve.db holds {answered} answers" in res.output and "--new-batch" in res.output
    assert f"satcal ingest {ws.path} --platform serve" in res.output
    res = runner.invoke(main, ["generate", str(ws.path), "--force"])
    assert res.exit_code == 2 and f"holds {answered} answers" in res.output
    res = runner.invoke(main, ["init", str(ws.path), "--judgments", str(ws.path / ws["study.judgments"]),
                               "--force"])
    assert res.exit_code == 2 and f"{answered} answers not ingested yet" in res.output
    assert (ws.path / "key.csv").read_bytes() == key
    res = runner.invoke(main, ["ingest", str(ws.path), "--platform", "serve", "--threshold", "0"])
    assert res.exit_code == 0, res.output
    answers = pd.read_csv(ws.path / "answers.csv", dtype=str)
    rejects = pd.read_csv(ws.path / "rejects.csv", dtype=str)
    assert len(answers) == answered and not rejects["reason"].str.startswith("unknown item").any()
    # a new batch keeps the key the database is bound to, so its answers still resolve
    res = runner.invoke(main, ["export", str(ws.path), "--new-batch"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(main, ["ingest", str(ws.path), "--platform", "serve", "--threshold", "0"])
    assert res.exit_code == 0, res.output
    assert len(pd.read_csv(ws.path / "answers.csv", dtype=str)) == answered


def test_a_noted_study_database_is_looked_at_too(exported_workspace, tmp_path, copy_workspace):
    """A database given with --db (noted when satcal serve starts) is looked at like
    serve.db; one bound to another key, or holding nothing, does not count."""
    ws = copy_workspace(exported_workspace("serve", 10), tmp_path)
    url = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    ws.remember_database(url)
    toml = ws.path / "study.toml"
    other = int(ws.table("key.csv").groupby("page").size().max()) + 2  # a new key: pages of another size
    toml.write_text(re.sub(r"(?m)^items_per_page = .*$", f"items_per_page = {other}", toml.read_text()))
    fresh = copy_workspace(ws, tmp_path / "fresh")
    assert fresh.export(force=True)  # nothing answered anywhere: the key may be replaced
    answered = _answer_one_page(ws, url)
    with pytest.raises(SatcalError, match=rf"elsewhere.db holds {answered} answers .* --db {url}"):
        Workspace.open(ws.path).export(force=True)


@pytest.mark.parametrize("old,new,fragment", [
    ("k = 5", "k = 6", r"study.k = 6, but \w+.csv was made with k = 5; put study.k back to 5, or run "
                       "satcal generate"),
    ("levels = [0, 1, 2]", "levels = [0, 1, 2, 3]",
     r"study.levels = \[0, 1, 2, 3\], but \w+.csv was made with levels = \[0, 1, 2\] \(phi would be "
     r"rescaled\); put study.levels back to \[0, 1, 2\], or run satcal generate"),
])
def test_a_design_changed_after_generate_is_refused(exported_workspace, tmp_path, old, new, fragment, copy_workspace):
    """Issue 25.4: k or levels edited in study.toml after generate: preview, export, simulate
    and power say which command to run (they ended in KeyError: 'A6' and "['ra6'] not in
    index"); nothing is written."""
    ws = copy_workspace(exported_workspace("csv", 10), tmp_path)
    toml = ws.path / "study.toml"
    toml.write_text(toml.read_text().replace(old, new))
    before = sorted(p.relative_to(ws.path) for p in ws.path.rglob("*"))
    runner = CliRunner()
    for command in ("preview", "export", "simulate", "power"):
        res = runner.invoke(main, [command, str(ws.path), "--force"])
        assert res.exit_code == 2, (command, res.output)
        assert re.search(fragment, res.output), (command, res.output)
        assert res.output.count("\n") == 1  # one line, no traceback
    assert sorted(p.relative_to(ws.path) for p in ws.path.rglob("*")) == before


def test_levels_changed_after_answers_never_rescale_phi(exported_workspace, tmp_path, copy_workspace):
    """After answers, a changed levels made analyze rescale phi silently (lin-const b1 moved,
    exit 0); now it is refused, saying the answers were collected under the old levels."""
    ws = copy_workspace(exported_workspace("csv", 10), tmp_path)
    out, _ = ws.simulate("csv")
    ws.ingest([out], threshold=0.0)
    toml = ws.path / "study.toml"
    toml.write_text(toml.read_text().replace("levels = [0, 1, 2]", "levels = [0, 1, 2, 3]"))
    res = CliRunner().invoke(main, ["analyze", str(ws.path), "--bootstrap", "0", "-q"])
    assert res.exit_code == 2
    assert "put study.levels back to [0, 1, 2] (the answers were collected with it" in res.output
    assert not (ws.path / "analysis").exists()


def test_an_older_workspace_without_a_design_record_is_checked_by_its_examples(exported_workspace, tmp_path, copy_workspace):
    ws = copy_workspace(exported_workspace("csv", 10), tmp_path)
    (ws.path / "design.json").unlink()
    toml = ws.path / "study.toml"
    toml.write_text(toml.read_text().replace("k = 5", "k = 4"))
    with pytest.raises(SatcalError, match="study.k = 4, but examples.csv was made with k = 5"):
        Workspace.open(ws.path).export(force=True)
