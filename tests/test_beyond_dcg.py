"""Measures beyond DCG (SPEC 3.4): RBP, ERR, RR, P, AP, checked against trec_eval (pytrec_eval),
gdeval (through ir_measures) and trectools on TREC-format files read by satcal, and by hand."""
import shutil

import numpy as np
import pandas as pd
import pytest

from satcal.analysis import anova_table, calibrate
from satcal.analysis.effects import crossed_design
from satcal.judgments import read_judgments
from satcal.measures import EXTRA_MEASURES, formulation, score_lists, study_formulations
from satcal.runs import level_cube, read_runs


def _trec_files(rng, tmp_path, levels=(0, 1, 2, 3), numeric_ids=False, n_queries=30):
    """Qrels and one run with distinct scores (so the top k is the same for every tool)."""
    qrel_lines, run_lines = [], []
    for q in range(n_queries):
        qid = f"{q + 1}" if numeric_ids else f"q{q}"
        docs = [f"d{q}_{i:02d}" for i in range(25)]
        for d in docs[:15]:
            qrel_lines.append(f"{qid} 0 {d} {int(rng.choice(levels))}")
        retrieved = rng.choice(docs, size=12, replace=False)
        for rank, d in enumerate(retrieved, start=1):
            run_lines.append(f"{qid} Q0 {d} {rank} {100 - rank} myrun")
    (tmp_path / "qrels").write_text("\n".join(qrel_lines) + "\n")
    (tmp_path / "run").write_text("\n".join(run_lines) + "\n")
    judgments = read_judgments(tmp_path / "qrels")
    cube, _, queries = level_cube(read_runs([tmp_path / "run"]), judgments, 5)
    pools = judgments.pools()
    return cube[0], queries, [pools[q] for q in queries], judgments


@pytest.mark.parametrize("m", [1, 2])
def test_ap_p_rr_equal_trec_eval(rng, tmp_path, m):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    levels, queries, pools, _ = _trec_files(rng, tmp_path, levels=(-1, 0, 1, 2, 3))
    ours = score_lists(levels, [f"ap{m}", f"p{m}", f"rr{m}"], n_levels=4, pools=pools,
                       query_index=np.arange(len(queries)))
    with open(tmp_path / "qrels") as fq, open(tmp_path / "run") as fr:
        qrels, run = pytrec_eval.parse_qrel(fq), pytrec_eval.parse_run(fr)
    top5 = {q: dict(sorted(d.items(), key=lambda kv: -kv[1])[:5]) for q, d in run.items()}
    ev = pytrec_eval.RelevanceEvaluator(qrels, {"map_cut.5", "P.5", "recip_rank"}, relevance_level=m)
    full, cut = ev.evaluate(run), ev.evaluate(top5)  # RR@5: reciprocal rank of the top 5
    np.testing.assert_allclose(ours[:, 0], [full[q]["map_cut_5"] for q in queries], atol=1e-9)
    np.testing.assert_allclose(ours[:, 1], [full[q]["P_5"] for q in queries], atol=1e-9)
    np.testing.assert_allclose(ours[:, 2], [cut[q]["recip_rank"] for q in queries], atol=1e-9)


def test_err_equals_gdeval(rng, tmp_path):
    """gdeval (the TREC Web track's ERR) fixes the top grade at 4: R(l) = (2^l - 1)/16."""
    ir_measures = pytest.importorskip("ir_measures")
    if shutil.which("perl") is None:
        pytest.skip("gdeval needs perl")
    levels, queries, pools, _ = _trec_files(rng, tmp_path, levels=(0, 1, 2, 3, 4), numeric_ids=True)
    err = formulation("err")
    ours = err.score(levels, n_levels=5) * (1.0 / err.scale(5, 4))
    qrels = list(ir_measures.read_trec_qrels(str(tmp_path / "qrels")))
    run = list(ir_measures.read_trec_run(str(tmp_path / "run")))
    theirs = {m.query_id: m.value for m in ir_measures.iter_calc([ir_measures.ERR @ 5], qrels, run)}
    np.testing.assert_allclose(ours, [theirs[q] for q in queries], atol=6e-6)  # gdeval prints 5 decimals


def test_err_by_hand():
    # R = (2^l - 1)/4 with L = 3: levels 2, 0, 1 -> 3/4, 0, 1/4
    raw = 0.75 + 0 + (1 / 3) * 0.25 * (1 - 0.75) * (1 - 0)
    best = 0.75 + 0.5 * 0.75 * 0.25 + (1 / 3) * 0.75 * 0.25 ** 2
    assert formulation("err").score([[2, 0, 1]], n_levels=3)[0] == pytest.approx(raw / best)
    assert formulation("err", normalization="raw").score([[2, 0, 1]], n_levels=3)[0] == pytest.approx(raw)


@pytest.mark.parametrize("p", [0.5, 0.8, 0.95])
def test_geo_discount_is_normalised_rbp(rng, p):
    """lin-geo<p> with max = graded RBP@k / (1 - p^k), g = l/(L-1) (Moffat & Zobel 2008);
    bin1-geo<p> the binary RBP likewise. RBP computed here by its definition."""
    levels = rng.integers(0, 4, size=(50, 7))
    for gain, g in (("lin", levels / 3.0), ("bin1", (levels >= 1).astype(float))):
        rbp = np.array([(1 - p) * sum(row[i] * p ** i for i in range(7)) for row in g])
        ours = formulation(f"{gain}-geo{p}").score(levels, n_levels=4)
        np.testing.assert_allclose(ours, rbp / (1 - p ** 7), rtol=1e-12)


@pytest.mark.parametrize("p", [0.5, 0.8])
def test_rbp_equals_trectools(rng, tmp_path, p):
    """RBP@5 from TREC files: trectools (Moffat & Zobel's RBP with the level as graded gain, or
    binary) equals (L - 1) (1 - p^k) lin-geo<p>, and (1 - p^k) bin1-geo<p>, of the lists satcal
    reads from the same files."""
    trectools = pytest.importorskip("trectools")
    levels, queries, _, _ = _trec_files(rng, tmp_path, levels=(0, 1, 2, 3))
    ours = score_lists(levels, [f"lin-geo{p}", f"bin1-geo{p}"], n_levels=4)
    evaluation = trectools.TrecEval(trectools.TrecRun(str(tmp_path / "run")),
                                    trectools.TrecQrel(str(tmp_path / "qrels")))
    for col, binary, scale in ((0, False, 3 * (1 - p ** 5)), (1, True, 1 - p ** 5)):
        theirs, _residuals = evaluation.get_rbp(p=p, depth=5, per_query=True, binary_topical_relevance=binary)
        theirs = theirs.iloc[:, 0].reindex(queries)
        # trectools leaves out a query none of whose top 5 is judged relevant: RBP 0 there
        missing = theirs.isna().to_numpy()
        assert missing.sum() < len(queries) / 2 and (np.nan_to_num(levels[missing], nan=0) == 0).all()
        np.testing.assert_allclose(ours[:, col] * scale, theirs.fillna(0).to_numpy(), atol=1e-12)


def test_measures_in_unit_interval_and_unknown_ids_explained(rng):
    levels = rng.integers(-2, 4, size=(400, 5)).astype(float)
    levels[rng.uniform(size=levels.shape) < 0.1] = np.nan
    pools = [rng.integers(-2, 4, size=rng.integers(1, 20)) for _ in range(10)]
    forms = [formulation(m, negatives="zero") for m in EXTRA_MEASURES + ("rr2", "ap3", "p3")]
    phi = score_lists(levels, forms, n_levels=4, pools=pools, query_index=rng.integers(0, 10, 400))
    assert phi.min() >= 0 and phi.max() <= 1 + 1e-12
    with pytest.raises(ValueError, match="measure id"):
        formulation("ndcg")
    with pytest.raises(ValueError, match="pools"):
        score_lists(levels, ["ap"])


def test_anova_keeps_the_crossed_gain_discount_family(ecir_study):
    forms = study_formulations() + [formulation(m) for m in EXTRA_MEASURES]
    phi_a = score_lists(ecir_study.levels("a"), [f for f in forms if not f.uses_pool], n_levels=3)
    phi_b = score_lists(ecir_study.levels("b"), [f for f in forms if not f.uses_pool], n_levels=3)
    result = calibrate(phi_a=phi_a, phi_b=phi_b, answers=ecir_study.answers,
                       formulations=[f for f in forms if not f.uses_pool], model_check_folds=0, bootstrap=0, seed=0, sat_model="published")
    only36 = result.bias[result.bias["formulation"].isin([f.id for f in study_formulations()])]
    assert len(crossed_design(result.bias)) == 36
    pd.testing.assert_frame_equal(result.anova, anova_table(only36))
    assert result.anova.groupby("indicator")["df"].apply(list).tolist() == [[5, 5, 25]] * 3
    assert {"err", "rr", "p", "lin-geo0.8"} <= set(result.bias["formulation"])


def test_ecir_calibrates_extra_measures_with_pools(ecir_study):
    """AP needs the query pools: calibrate takes them from the study's judgments."""
    result = calibrate(ecir_study, ["exp2-log2", "ap", "err"], model_check_folds=0, bootstrap=0, seed=0, sat_model="published")
    assert result.bias.set_index("formulation").loc["ap", "family"] == "ap"
    # AP@5 of each list, scored directly from the pools, is what the curve was fitted on
    pools = ecir_study.judgments.pools()
    q = ecir_study.examples["query"].to_numpy()
    names = sorted(set(q))
    phi = score_lists(ecir_study.levels("a"), ["ap"], pools=[pools[n] for n in names],
                      query_index=pd.Index(names).get_indexer(q))[:, 0]
    sat = np.isin(ecir_study.answers, ("both_good", "both_bad"))
    fit = result.fits.query("formulation == 'ap' and curve == 'sat'").iloc[0]
    assert fit["n"] == 2 * sat.sum()
    assert phi.max() <= 1 and phi[sat].mean() > 0


def test_generator_refuses_pool_based_measures_with_the_reason():
    from satcal.errors import SatcalError
    from satcal.generate import Design
    Design(formulations=[formulation("err"), formulation("rr")])  # pattern-only measures: fine
    with pytest.raises(SatcalError, match="ap uses normalisation 'pool'"):
        Design(formulations=[formulation("ap")])
    with pytest.raises(SatcalError, match="ap uses normalisation 'pool'"):
        Design(extra=["err", "ap"], cover_extra=True)
    assert [f.id for f in Design(extra=["err", "ap"]).placeable_extra] == ["err"]  # not covered: fine


def _extra_counts(examples, design):
    """Coverage counts of the extra measures recomputed from the examples' relevance levels."""
    from satcal.measures import bin_index
    k = design.k
    la = examples[[f"ra{i}" for i in range(1, k + 1)]].to_numpy()
    lb = examples[[f"rb{i}" for i in range(1, k + 1)]].to_numpy()
    sa, sb = (score_lists(lv, design.placeable_extra, top_level=design.top_level) for lv in (la, lb))
    rows = []
    for j, f in enumerate(design.placeable_extra):
        phi = np.bincount(np.concatenate([bin_index(sa[:, j], design.n_bins), bin_index(sb[:, j], design.n_bins)]),
                          minlength=design.n_bins)
        dphi = np.bincount(bin_index(np.abs(sa[:, j] - sb[:, j]), design.n_bins), minlength=design.n_bins)
        rows += [(f.id, "phi", b, int(c)) for b, c in enumerate(phi)]
        rows += [(f.id, "dphi", b, int(c)) for b, c in enumerate(dphi)]
    return pd.DataFrame(rows, columns=["formulation", "kind", "bin", "count"])


@pytest.mark.parametrize("cover", [False, True])
def test_generator_covers_extra_measures_when_asked_and_reports_the_cost(ecir_study, cover):
    from satcal.generate import Design, generate
    family = ["lin-log2", "exp2-zipf", "bin1-const"]
    design = Design(formulations=family, extra=["err", "rr", "lin-geo0.8", "ap"], cover_extra=False,
                    min_per_cell=25, seed=3)
    design.cover_extra = cover
    result = generate(ecir_study.judgments, design)
    s = result.as_dict()
    assert s["extra_covered"] is cover and "ap" not in set(result.coverage["formulation"])
    assert s["examples_with_extra" if cover else "examples_without_extra"] == len(result.examples)
    assert s["extra_cost_examples"] == s["examples_with_extra"] - s["examples_without_extra"] > 0
    cov = result.coverage.merge(_extra_counts(result.examples, design), on=["formulation", "kind", "bin"],
                                suffixes=("", "_recomputed"))
    assert len(cov) == 3 * 2 * design.n_bins and (cov["count"] == cov["count_recomputed"]).all()
    assert cov["covered"].all() == cover
    short = int((cov["feasible"] & (cov["count"] < design.min_per_cell)).sum())
    if cover:
        assert short == 0 and result.complete
    else:  # the crossed family alone leaves some of the extra measures' cells short, and says how many
        assert short == s["extra_cells_short_without"] > 0 and result.complete
    # the family's examples do not depend on whether extra measures are reported beside it
    if not cover:
        alone = generate(ecir_study.judgments, Design(formulations=family, min_per_cell=25, seed=3))
        pd.testing.assert_frame_equal(alone.examples, result.examples)


def test_evaluate_puts_several_measures_on_one_scale(rng, tmp_path):
    """Each measure's column equals a one-measure evaluation; phi is the measure's own score of
    the run's top k (AP against the query pools)."""
    from scipy.special import expit
    from satcal.analysis.evaluate import Calibration, evaluate_runs
    levels, queries, pools, judgments = _trec_files(rng, tmp_path)
    # a second system: the same run reversed
    lines = (tmp_path / "run").read_text().splitlines()
    (tmp_path / "run2").write_text("\n".join(
        " ".join(p[:4] + [str(float(p[4]) * -1), "other"]) for p in (l.split() for l in lines)) + "\n")
    runs = read_runs([tmp_path / "run", tmp_path / "run2"])
    cals = [Calibration(f, np.array([-2.0, 3.0, 1.0]), np.array([-1.0, 4.0, 0.0]))
            for f in ("lin-log2", "ap", "err", "lin-geo0.8")]
    both = evaluate_runs(judgments, runs, cals, k=5)
    assert list(both.side_by_side.columns) == ["system", "lin-log2", "ap", "err", "lin-geo0.8"]
    for cal in cals:
        alone = evaluate_runs(judgments, runs, cal, k=5)
        pd.testing.assert_frame_equal(
            both.per_system[both.per_system["formulation"] == cal.formulation].reset_index(drop=True),
            alone.per_system.reset_index(drop=True))
    ap = both.per_query[(both.per_query["formulation"] == "ap") & (both.per_query["system"] == "myrun")]
    expected = score_lists(levels, ["ap"], pools=pools, query_index=np.arange(len(queries)))[:, 0]
    np.testing.assert_allclose(ap.set_index("query").loc[queries, "phi"], expected)
    np.testing.assert_allclose(ap["p_sat"], expit(-2 + 3 * ap["phi"] + ap["phi"] ** 2))


def test_analyze_all_ranks_dcg_and_other_measures_in_one_report(tmp_path):
    """The published answers calibrate RBP, ERR, RR, AP and P beside the 36, with intervals;
    the report places them in the joint ranking and says how sure the comparison is."""
    from click.testing import CliRunner
    from satcal.cli import main
    out = tmp_path / "all"
    res = CliRunner().invoke(main, ["analyze", "--dataset", "ecir2015", "--formulations", "all",
                                    "--bootstrap", "30", "--out", str(out), "-q"])
    assert res.exit_code == 0, res.output
    bias = pd.read_csv(out / "bias.csv", keep_default_na=False).set_index("formulation")
    assert set(EXTRA_MEASURES) <= set(bias.index) and len(bias) == 36 + len(EXTRA_MEASURES)
    assert bias.loc[list(EXTRA_MEASURES), ["b1_lo", "b1_hi"]].notna().all().all()
    anova = pd.read_csv(out / "anova.csv")
    dfs = anova.groupby("indicator")["df"].apply(list)
    assert {"b1", "b2", "b3"} <= set(dfs.index) and all(v == [5, 5, 25] for v in dfs)
    # with replicates every effect has its bootstrap Wald p (the standardised indicators'
    # too: they are bootstrapped by default), the residual rows none
    effects = anova[anova.term != "Residual"]
    assert effects.indicator.str.endswith("_std").any()
    assert effects.p.between(0, 1).all() and anova[anova.term == "Residual"].p.isna().all()
    report = (out / "report.html").read_text()
    assert "Measures beyond DCG" in report and "err #" in report
    bad = CliRunner().invoke(main, ["analyze", "--dataset", "ecir2015", "--formulations", "ndcg",
                                    "--out", str(tmp_path / "bad")])
    assert bad.exit_code == 2 and "--formulations" in bad.output and "Traceback" not in bad.output


@pytest.mark.parametrize("name,fid,norm,cutoff", [
    ("nDCG@10", "lin-log2", "ideal", 10), ("nDCG(dcg='exp-log2')@5", "exp2-log2", "ideal", 5),
    ("ERR@5", "err", "max", 5), ("RR(rel=2)@5", "rr2", "max", 5), ("AP@5", "ap", "pool", 5),
    ("P@3", "p", "max", 3)])
def test_ir_measures_names(rng, name, fid, norm, cutoff):
    f = formulation(name)
    assert (f.id, f.normalization, f.cutoff) == (fid, norm, cutoff)
    levels = rng.integers(0, 3, size=(20, cutoff))
    pools = [rng.integers(0, 3, size=12)]
    kw = dict(pools=pools, query_index=np.zeros(20, int))
    same = formulation(fid, normalization=norm if norm != "pool" else "max")
    np.testing.assert_allclose(score_lists(levels, [f], **kw), score_lists(levels, [same], **kw))
    from satcal.errors import SatcalError
    with pytest.raises(SatcalError, match=f"named at cutoff {cutoff}, but the lists have k = {cutoff + 1}"):
        score_lists(rng.integers(0, 3, size=(2, cutoff + 1)), [f], pools=pools, query_index=[0, 0])
