"""The power analysis simulates satcal simulate's crowd and reads the report's tests."""
import numpy as np
import pandas as pd
import pytest

from satcal.analysis.bootstrap import bootstrap_calibration
from satcal.analysis.power import holm_p, simulated_answers
from satcal.measures import formulation, score_lists
from satcal.platforms import swap_answer
from satcal.simulate import UserModel, simulate_answers

CODES = ["a_better", "b_better", "both_good", "both_bad"]


def test_power_answers_follow_the_simulate_model(ecir_study):
    """Answer-code frequencies per sign of dphi: satcal simulate's answers (swapped back to the
    canonical orientation, as ingest does) against the power analysis's, same model and lists,
    within Monte-Carlo error. Many workers, so the crowd's own draw hardly matters."""
    model = UserModel(workers=3000, spammers=0.0, heterogeneity=0.8, position_bias=0.1,
                      undecided_preference=0.3, preference_accuracy=0.7, lapse=0.1, seed=5)
    ex = ecir_study.examples
    n = len(ex)
    lists = ex.assign(source_id=[f"e{i}" for i in range(n)])
    items = pd.DataFrame({"item_id": [f"i{i}" for i in range(n)], "page": np.arange(n)})
    swapped = np.random.default_rng(1).random(n) < 0.5
    key = pd.DataFrame({"item_id": items.item_id, "source_id": lists.source_id, "is_trap": "False",
                        "swapped": np.where(swapped, "True", "False")})
    sim, _ = simulate_answers(items, key, lists, 5, 2, model)
    sim = sim.merge(key, on="item_id")
    canon = [swap_answer(a) if s == "True" else a for a, s in zip(sim.answer, sim.swapped)]
    order = sim.item_id.str[1:].astype(int).to_numpy()
    truth = formulation(model.formulation)
    phi_a = score_lists(ecir_study.levels("a"), [truth], top_level=2)[:, 0]
    phi_b = score_lists(ecir_study.levels("b"), [truth], top_level=2)[:, 0]
    reps = 5
    ours = simulated_answers(np.tile(phi_a, reps), np.tile(phi_b, reps), model, np.random.default_rng(9))
    sign_sim, sign_ours = np.sign(phi_a - phi_b)[order], np.tile(np.sign(phi_a - phi_b), reps)
    checked = 0
    for s in (-1, 0, 1):
        a, b = np.asarray(canon)[sign_sim == s], ours[sign_ours == s]
        for code in CODES:
            p1, p2 = np.mean(a == code), np.mean(b == code)
            pooled = (p1 * a.size + p2 * b.size) / (a.size + b.size)
            se = np.sqrt(pooled * (1 - pooled) * (1 / a.size + 1 / b.size))
            assert abs(p1 - p2) <= 4 * se + 1e-12, (s, code, p1, p2, se)
            checked += pooled > 0.01
    assert checked >= 10


def test_power_answers_without_the_joint_model_are_the_papers(ecir_study):
    """Undecided users never state a preference and never lapse under the paper's model, and
    with no position bias a preference always goes to the list that satisfies."""
    model = UserModel(position_bias=0.0)
    truth = formulation("lin-const")
    phi = score_lists(ecir_study.levels("a"), [truth], top_level=2)[:, 0]
    answers = simulated_answers(phi, phi, model, np.random.default_rng(0), answers_per_example=3)
    assert answers.size == 3 * phi.size and set(answers) <= set(CODES)
    # equal lists: P(a_better) = P(b_better) = E[s (1 - s)], within Monte-Carlo error
    p_a, p_b = np.mean(answers == "a_better"), np.mean(answers == "b_better")
    assert abs(p_a - p_b) < 4 * np.sqrt((p_a + p_b) / answers.size)


def test_holm_detection_equals_pairwise_and_multipletests(ecir_study):
    from scipy.stats import norm
    from statsmodels.stats.multitest import multipletests
    forms = [formulation(f) for f in ("lin-const", "exp2-log2", "bin1-zipf", "exp5-zipf", "lin-log2")]
    phi_a = score_lists(ecir_study.levels("a")[:400], forms, n_levels=3)
    phi_b = score_lists(ecir_study.levels("b")[:400], forms, n_levels=3)
    boot = bootstrap_calibration(phi_a, phi_b, np.asarray(ecir_study.answers[:400], dtype=object), forms,
                                 replicates=60, seed=4)
    boot.indicators[[3, 17], 2, 0] = np.nan                      # two failed fits
    pairs = boot.pairwise.set_index(["indicator", "formulation_1", "formulation_2"])
    ids = boot.formulations
    for k, name in enumerate(("b1", "b2", "b3")):
        est, reps = boot.estimates[:, k], boot.indicators[:, :, k]
        # by hand: p from the bootstrap SE (normalised IQR) with a normal approximation, Holm over the 10 pairs
        p = []
        for i in range(5):
            for j in range(i + 1, 5):
                d = reps[:, i] - reps[:, j]
                d = d[np.isfinite(d)]
                q25, q75 = np.percentile(d, [25, 75])   # the bootstrap SE: normalised IQR
                p.append(2 * norm.sf(abs(est[i] - est[j]) / ((q75 - q25) / (2 * norm.ppf(0.75)))))
        adjusted = multipletests(p, method="holm")[1]
        ours = holm_p(est, reps)
        assert np.isnan(np.diag(ours)).all() and np.array_equal(ours, ours.T, equal_nan=True)
        n = 0
        for i in range(5):
            for j in range(i + 1, 5):
                assert ours[i, j] == pytest.approx(adjusted[n], rel=1e-9)
                assert ours[i, j] == pytest.approx(pairs.loc[(name, ids[i], ids[j]), "p_holm"], rel=1e-9)
                n += 1


def test_power_cli_reads_every_simulation_key():
    """satcal power builds its crowd as satcal simulate does: every [simulation] key of the
    study file reaches the user model (values changed from the defaults to see them arrive)."""
    import tomllib
    from dataclasses import asdict
    from satcal.settings import SimulationSection
    from satcal.settings import render_template
    section = render_template({}).split("[simulation]")[1].split("\n[")[0]   # up to the next table
    keys = tomllib.loads(section)
    changed = {"formulation": "exp2-log2", "intercept": -2.5, "slope": 5.0, "heterogeneity": 0.7,
               "workers": 40, "spammers": 0.1, "position_bias": 0.08, "undecided_preference": 0.2,
               "preference_accuracy": 0.9, "lapse": 0.05, "abandoned": 0.01, "spammer_kind": "mixed"}
    assert set(keys) == set(changed)
    model = asdict(UserModel.from_settings(SimulationSection(**changed), seed=3))
    assert {k: model[k] for k in changed} == changed
