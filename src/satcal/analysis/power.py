"""Power of a design, by simulation: how many answers tell formulations apart?

For each budget (examples x answers per example), ``sims`` studies are simulated from a user
model (the simulated crowd's, honest workers: traps are assumed to remove spammers) on
examples drawn from a generated design. In each simulated study:

- the difference in each bias indicator between two formulations is tested with a paired
  bootstrap over examples (B replicates, BC interval excluding 0 = detected);
- the additive ANOVA over all formulations tests the gain and the discount effects
  (p < alpha = detected).

Power is the share of simulated studies with a detection.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import expit

from .._threads import one_blas_thread
from ..errors import SatcalError
from ..measures import formulation as parse_formulation
from ..measures import score_lists
from .core import (GRID, anova_table, bias_indicators, design, fit_logit_batch, fit_logit_replicates,
                   preference_data, satisfaction_data)

__all__ = ["power_analysis", "PowerResult"]


@dataclass
class PowerResult:
    table: pd.DataFrame
    pair: tuple[str, str]

    def figure(self):
        from ..fileio import new_figure
        fig, axes = new_figure(nrows=1, ncols=2, figsize=(11, 4), sharey=True)
        t = self.table
        for ind in ("b1", "b2", "b3"):
            axes[0].plot(t["answers"], t[f"power_pair_{ind}"], marker="o", label=ind)
            axes[1].plot(t["answers"], t[f"power_gain_{ind}"], marker="o", label=f"gain, {ind}")
            axes[1].plot(t["answers"], t[f"power_discount_{ind}"], marker="s", ls="--", label=f"discount, {ind}")
        axes[0].set_title(f"{self.pair[0]} vs {self.pair[1]}: difference detected")
        axes[1].set_title("ANOVA effects detected")
        for ax in axes:
            ax.axhline(0.8, color="0.6", ls=":")
            ax.set_xlabel("budget (answers)")
            ax.set_ylim(0, 1.02)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        axes[0].set_ylabel("power")
        fig.tight_layout()
        return fig

    def save(self, out_dir) -> dict[str, str]:
        from pathlib import Path
        from ..fileio import atomic_write_text, save_figure
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out / "power.csv", self.table.to_csv(index=False, lineterminator="\n", float_format="%.6g"))
        png, _ = save_figure(self.figure(), out / "power")
        return {"table": str(out / "power.csv"), "figure": str(png)}


def _canonical(phi_a, phi_b, model, rng, n_workers):
    """Honest answers: each list satisfies with expit(a + u_w + b phi) under the truth."""
    u = rng.normal(0, model.heterogeneity, n_workers)[rng.integers(0, n_workers, phi_a.size)]
    sa = rng.random(phi_a.size) < expit(model.intercept + u + model.slope * phi_a)
    sb = rng.random(phi_b.size) < expit(model.intercept + u + model.slope * phi_b)
    return np.select([sa & sb, ~sa & ~sb, sa], ["both_good", "both_bad", "a_better"], "b_better")


def _indicators_all(phi_a, phi_b, answers):
    """b1, b2, b3 of every formulation at once (batched fits), shape (F, 3)."""
    x_sat, y_sat = satisfaction_data(phi_a, phi_b, answers)
    pref = preference_data(phi_a, phi_b, answers)
    f = phi_a.shape[1]
    b_sat, _ = fit_logit_batch(design(x_sat.T), np.broadcast_to(y_sat, (f, y_sat.size)))
    b_pref, _ = fit_logit_batch(np.stack([design(p[0]) for p in pref]), np.stack([p[1] for p in pref]))
    g = design(GRID)
    ind = bias_indicators(expit(b_sat @ g.T), expit(b_pref @ g.T))
    return np.stack([ind["b1"], ind["b2"], ind["b3"]], axis=1)


def _pair_detected(phi_a, phi_b, answers, cols, boot, rng):
    """Paired bootstrap over examples of the indicator differences; BC-free percentile test."""
    from .bootstrap import _bc_interval
    n = answers.size
    W = np.vstack([np.ones((1, n))] + [np.bincount(rng.integers(0, n, n), minlength=n)[None] for _ in range(boot)])
    keep = np.isin(answers, ("both_good", "both_bad"))
    x_sat, y_sat = satisfaction_data(phi_a[:, cols], phi_b[:, cols], answers)
    pref = preference_data(phi_a[:, cols], phi_b[:, cols], answers)
    w_sat = np.concatenate([W[:, keep], W[:, keep]], axis=1)
    g = design(GRID)
    vals = []
    for j in range(2):
        bs, _ = fit_logit_replicates(design(x_sat[:, j]), y_sat, w_sat)
        bp, _ = fit_logit_replicates(design(pref[j][0]), pref[j][1], W)
        ind = bias_indicators(expit(bs @ g.T), expit(bp @ g.T))
        vals.append(np.stack([ind["b1"], ind["b2"], ind["b3"]], axis=1))
    diff = vals[0] - vals[1]                                   # (1 + B, 3)
    lo, hi = _bc_interval(diff[1:], diff[0])
    return (lo > 0) | (hi < 0), diff[0]


@one_blas_thread
def power_analysis(examples: pd.DataFrame, k: int, top_level: int, model, formulations,
                   pair: tuple[str, str] = ("lin-const", "exp2-log2"), budgets=(250, 500, 1000, 2000),
                   answers_per_example: int = 1, sims: int = 50, boot: int = 100, alpha: float = 0.05,
                   seed: int = 0, progress: bool = False) -> PowerResult:
    """Power against budget (see module docstring).

    ``examples`` is a generated design (``examples.csv`` with levels ``ra1..``, ``rb1..``);
    each simulated study draws its examples from it with replacement.
    """
    from tqdm.auto import tqdm

    ids = [f.id for f in formulations]
    missing = [p for p in pair if p not in ids]
    if missing:
        raise SatcalError(f"power: formulation(s) {', '.join(missing)} are not among the study's")
    if sims < 2 or boot < 10 or answers_per_example < 1 or not budgets:
        raise SatcalError("power: sims >= 2, boot >= 10, answers_per_example >= 1 and at least one budget")
    truth = parse_formulation(model.formulation)
    la = examples[[f"ra{i}" for i in range(1, k + 1)]].to_numpy(float)
    lb = examples[[f"rb{i}" for i in range(1, k + 1)]].to_numpy(float)
    all_a, all_b = score_lists(la, formulations, top_level=top_level), score_lists(lb, formulations, top_level=top_level)
    true_a = score_lists(la, [truth], top_level=top_level)[:, 0]
    true_b = score_lists(lb, [truth], top_level=top_level)[:, 0]
    cols = [ids.index(p) for p in pair]
    bias_frame = pd.DataFrame({"formulation": ids, "gain": [f.gain.id for f in formulations],
                               "discount": [f.discount.id for f in formulations]})
    rng = np.random.default_rng(seed)
    rows = []
    bar = tqdm(total=len(budgets) * sims, desc="power", disable=not progress)
    for budget in budgets:
        n_examples = max(int(budget) // answers_per_example, 10)
        pair_hits, gain_hits, disc_hits, diffs = np.zeros(3), np.zeros(3), np.zeros(3), []
        for _ in range(sims):
            pick = np.repeat(rng.integers(0, len(examples), n_examples), answers_per_example)
            answers = _canonical(true_a[pick], true_b[pick], model, rng, model.workers)
            detected, diff = _pair_detected(all_a[pick], all_b[pick], answers, cols, boot, rng)
            pair_hits += detected
            diffs.append(diff)
            ind = _indicators_all(all_a[pick], all_b[pick], answers)
            table = anova_table(bias_frame.assign(b1=ind[:, 0], b2=ind[:, 1], b3=ind[:, 2]))
            for k_i, name in enumerate(("b1", "b2", "b3")):
                t = table[table.indicator == name].set_index("term")
                gain_hits[k_i] += float(t.loc["gain", "p"] < alpha) if "gain" in t.index else 0
                disc_hits[k_i] += float(t.loc["discount", "p"] < alpha) if "discount" in t.index else 0
            bar.update(1)
        mean_diff = np.mean(diffs, axis=0)
        row = {"answers": n_examples * answers_per_example, "examples": n_examples,
               "answers_per_example": answers_per_example}
        for k_i, name in enumerate(("b1", "b2", "b3")):
            row[f"diff_{name}"] = mean_diff[k_i]
            row[f"power_pair_{name}"] = pair_hits[k_i] / sims
            row[f"power_gain_{name}"] = gain_hits[k_i] / sims
            row[f"power_discount_{name}"] = disc_hits[k_i] / sims
        rows.append(row)
    bar.close()
    return PowerResult(pd.DataFrame(rows), tuple(pair))
