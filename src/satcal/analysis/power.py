"""Power of a design, by simulation: how many answers tell formulations apart?

For each budget (examples x answers per example), ``sims`` studies are simulated and each is
analysed with the tests the report reads, so power is the chance that the report shows the
difference:

- answers come from ``satcal simulate``'s user model (:class:`satcal.simulate.UserModel`,
  through :func:`satcal.simulate.honest_answers`): a fixed crowd of honest workers with
  per-worker offsets u_w ~ N(0, heterogeneity^2) (a new crowd per simulated study), the joint
  model's undecided preferences, preference accuracy and lapses, and position bias towards the
  list shown first (each example shown swapped with probability 1/2, as the export does). The
  spammers are assumed removed by the traps: the budget counts the honest answers, and the
  crowd is ``workers - round(spammers * workers)`` workers. Each example's answers come from
  different workers drawn at random (the export's pages are not simulated);
- each study is analysed as ``satcal analyze --bootstrap`` analyses one: indicators over the
  score range the data support, and ``boot`` replicates resampling what the report's bootstrap
  resamples given the worker and example ids (workers when each example has one answer,
  workers and examples crossed otherwise: :func:`~satcal.analysis.bootstrap.resampling_clusters`);
- a difference between the two formulations of ``pair`` is detected when its Holm-adjusted p
  is below ``alpha``: p from the bootstrap standard error with a normal approximation, Holm's
  adjustment over all pairs of the formulations analysed, per indicator (as
  ``BootstrapResult.pairwise``'s ``p_holm``, computed by :func:`holm_p`);
- the gain and the discount effects are detected when the bootstrap Wald test of
  :mod:`satcal.analysis.effects` (the ``p`` of ``anova.csv``) is below ``alpha``.

Power is the share of simulated studies with a detection; ``*_se`` columns hold its
Monte-Carlo standard error sqrt(p (1 - p) / sims).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._results import ResultTables
from .._threads import one_blas_thread
from ..errors import SatcalError, check_seed
from ..measures import formulation as parse_formulation
from ..measures import score_lists
from ..simulate import UserModel, honest_answers
from .effects import effects_table

__all__ = ["power_analysis", "PowerResult", "holm_p", "simulated_answers"]

INDICATORS = ("b1", "b2", "b3")


@dataclass(repr=False)
class PowerResult(ResultTables):
    """Power of a design by simulation, per budget.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per budget (``answers``): the share of simulated studies in which the pair's
        difference (``power_pair_<b>``) and the gain and discount effects
        (``power_gain_<b>``, ``power_discount_<b>``) are detected, each with its Monte-Carlo
        standard error (``_se``).
    pair : tuple of str
        The two formulations compared.
    """

    table: pd.DataFrame
    pair: tuple[str, str]

    def tables(self) -> dict[str, pd.DataFrame]:
        """The power table (``power.csv`` in :meth:`save`).

        Returns
        -------
        dict of str to pandas.DataFrame
        """
        return {"table": self.table}

    def figures(self) -> dict:
        """The figures :meth:`save` writes.

        Returns
        -------
        dict of str to matplotlib.figure.Figure
        """
        return {"figure": self.figure()}

    def _file_stem(self, name: str) -> str:
        return "power"

    def summary(self) -> str:
        """The pair and the power at each budget, as text.

        Returns
        -------
        str
        """
        cols = ["answers"] + [c for c in self.table.columns if c.startswith("power_") and not c.endswith("_se")]
        return (f"<PowerResult: {self.pair[0]} vs {self.pair[1]}, {len(self.table)} budgets>\n\n"
                + self.table[cols].to_string(index=False, float_format=lambda v: f"{v:.3f}"))

    def figure(self):
        """:meth:`plot` on a new figure."""
        return self.plot()

    def plot(self, ax=None):
        """Power against the budget: the pair's difference (left) and the gain and discount
        effects (right).

        Parameters
        ----------
        ax : sequence of two matplotlib Axes, optional
            Where to draw; a new figure when omitted.

        Returns
        -------
        matplotlib.figure.Figure
        """
        from ..fileio import panel_axes
        fig, axes, new = panel_axes(ax, 2, 1, 2, figsize=(11, 4), sharey=True)
        t = self.table
        for ind in INDICATORS:
            axes[0].errorbar(t["answers"], t[f"power_pair_{ind}"], yerr=t[f"power_pair_{ind}_se"],
                             marker="o", capsize=3, label=ind)
            axes[1].errorbar(t["answers"], t[f"power_gain_{ind}"], yerr=t[f"power_gain_{ind}_se"],
                             marker="o", capsize=3, label=f"gain, {ind}")
            axes[1].errorbar(t["answers"], t[f"power_discount_{ind}"], yerr=t[f"power_discount_{ind}_se"],
                             marker="s", ls="--", capsize=3, label=f"discount, {ind}")
        axes[0].set_title(f"{self.pair[0]} vs {self.pair[1]}: Holm-adjusted p < alpha")
        axes[1].set_title("Gain / discount effect: bootstrap Wald p < alpha")
        for ax in axes:
            ax.axhline(0.8, color="0.6", ls=":")
            ax.set_xlabel("budget (answers)")
            ax.set_ylim(0, 1.02)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        axes[0].set_ylabel("power (bars: Monte-Carlo SE)")
        if new:
            fig.tight_layout()
        return fig


def simulated_answers(phi_a: np.ndarray, phi_b: np.ndarray, model: UserModel, rng: np.random.Generator,
                      answers_per_example: int = 1, return_workers: bool = False):
    """Honest answers to examples (canonical orientation), ``answers_per_example`` each.

    ``phi_a``, ``phi_b`` (n,) are the examples' scores under the truth formulation; the result
    (n * answers_per_example,) lists each example's answers together (with
    ``return_workers``, also the index of the worker who gave each). See the module docstring
    for the crowd; the answer process is :func:`satcal.simulate.honest_answers`.

    Parameters
    ----------
    phi_a, phi_b : numpy.ndarray, shape (n,)
    model : UserModel
    rng : numpy.random.Generator
    answers_per_example : int, default 1
    return_workers : bool, default False

    Returns
    -------
    answers : numpy.ndarray of str, shape (n * answers_per_example,)
    workers : numpy.ndarray of int
        With ``return_workers``.
    """
    from ..platforms import swap_answer
    honest = max(model.workers - int(round(model.spammers * model.workers)), 1)
    per = min(answers_per_example, honest)
    n = np.size(phi_a)
    offsets = rng.normal(0, model.heterogeneity, honest)
    # distinct workers per example: the first ``per`` of a random order of the crowd
    who = np.argsort(rng.random((n, honest)), axis=1)[:, :per] if per > 1 else rng.integers(0, honest, (n, 1))
    who = np.concatenate([who, rng.integers(0, honest, (n, answers_per_example - per))], axis=1).ravel()
    swapped = rng.random(who.size) < 0.5
    shown, _, _ = honest_answers(np.repeat(phi_a, answers_per_example), np.repeat(phi_b, answers_per_example),
                                 offsets[who], swapped, model, rng, joint_rng=rng)
    answers = np.array([swap_answer(a) if s else a for a, s in zip(shown, swapped)], dtype=object)
    return (answers, who) if return_workers else answers


def holm_p(estimates: np.ndarray, replicates: np.ndarray) -> np.ndarray:
    """Holm-adjusted p of every difference between formulations: an (F, F) symmetric matrix.

    ``estimates`` (F,) and ``replicates`` (B, F) of one indicator. As
    ``BootstrapResult.pairwise``: per pair, d = replicate differences (non-finite ones left out),
    p = 2 (1 - Phi(|diff| / se(d))) with se the normalised interquartile range of d
    (:func:`satcal.analysis.bootstrap.robust_se`; ``float(diff == 0)`` when it is 0), pairs with fewer than
    2 finite differences left out (NaN); Holm's step-down adjustment (Holm 1979, Scand. J.
    Statist.) over the remaining pairs (the pairwise table's
    :func:`satcal.analysis.bootstrap.holm_adjusted`). Diagonal NaN.

    Parameters
    ----------
    estimates : numpy.ndarray, shape (F,)
    replicates : numpy.ndarray, shape (B, F)

    Returns
    -------
    numpy.ndarray, shape (F, F)

    References
    ----------
    Holm, S. (1979). A simple sequentially rejective multiple test procedure. Scandinavian
    Journal of Statistics 6(2), 65-70.
    """
    from scipy.stats import norm
    from .bootstrap import holm_adjusted, robust_se
    f = estimates.size
    a, b = np.triu_indices(f, k=1)
    d = replicates[:, a] - replicates[:, b]                     # (B, pairs)
    ok = np.isfinite(d)
    count = ok.sum(axis=0)
    sd = robust_se(d, axis=0)                                    # as the pairwise table's se
    diff = estimates[a] - estimates[b]
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(sd > 0, 2 * norm.sf(np.abs(diff) / sd), (diff == 0).astype(float))
    p = np.where(np.isfinite(p), p, 1.0)   # a failed full-sample fit: no evidence of a difference
    keep = count >= 2
    adjusted = np.full(p.size, np.nan)
    if keep.any():
        adjusted[keep] = holm_adjusted(p[keep])
    out = np.full((f, f), np.nan)
    out[a, b] = out[b, a] = adjusted
    return out


@one_blas_thread
def power_analysis(examples: pd.DataFrame, k: int, top_level: int, model: UserModel, formulations,
                   pair: tuple[str, str] = ("lin-const", "exp2-log2"), budgets=(250, 500, 1000, 2000),
                   answers_per_example: int = 1, sims: int = 50, boot: int = 100, alpha: float = 0.05,
                   seed: int = 0, progress: bool = False) -> PowerResult:
    """Power against budget (see module docstring).

    Parameters
    ----------
    examples : DataFrame
        A generated design (``examples.csv`` with levels ``ra1..``, ``rb1..``); each simulated
        study draws its examples from it with replacement.
    k : int
        Documents per list: the level columns read are ``ra1..ra<k>`` and ``rb1..rb<k>``.
    top_level : int
        The top relevance level, L - 1 of the ``max`` normalisation.
    model : UserModel
        The simulated crowd (``satcal simulate``'s, from ``[simulation]`` in study.toml).
    formulations : list
        The formulations analysed (Holm's adjustment runs over all their pairs).
    pair : tuple of str, default ("lin-const", "exp2-log2")
        The two formulation ids whose difference is tested; both must be in ``formulations``.
    budgets : sequence of int, default (250, 500, 1000, 2000)
        Honest answers per simulated study; each study has ``budget // answers_per_example``
        examples (at least 10).
    answers_per_example : int, default 1
        Answers to each example, from different workers (at least 1).
    sims : int, default 50
        Simulated studies per budget (at least 2); the Monte-Carlo standard error of a power
        p is sqrt(p (1 - p) / sims).
    boot : int
        Bootstrap replicates inside each simulated study (at least 10).
    alpha : float, default 0.05
        Level of the tests: a detection is a p (Holm-adjusted for the pair) below ``alpha``.
    seed : int, default 0
        Seed of the whole simulation (examples drawn, crowds, answers and each study's
        bootstrap seed): the same inputs and seed give the same table.
    progress : bool, default False
        Show a progress bar (tqdm) over the simulated studies.

    Returns
    -------
    PowerResult
        One row per budget: ``power_pair_<b>``, ``power_gain_<b>``, ``power_discount_<b>`` and
        their Monte-Carlo standard errors ``..._se``; ``diff_<b>`` the mean estimated
        difference of the pair.
    """
    from tqdm.auto import tqdm
    from .bootstrap import bootstrap_calibration, resampling_clusters
    from .core import collapse_answers, preference_curves, satisfaction_curves, supported_range

    ids = [f.id for f in formulations]
    missing = [p for p in pair if p not in ids]
    if missing:
        raise SatcalError(f"power: formulation(s) {', '.join(missing)} are not among the study's")
    if sims < 2 or boot < 10 or answers_per_example < 1 or not budgets:
        raise SatcalError("power: sims >= 2, boot >= 10, answers_per_example >= 1 and at least one budget")
    check_seed(seed)
    truth = parse_formulation(model.formulation)
    la = examples[[f"ra{i}" for i in range(1, k + 1)]].to_numpy(float)
    lb = examples[[f"rb{i}" for i in range(1, k + 1)]].to_numpy(float)
    all_a, all_b = score_lists(la, formulations, top_level=top_level), score_lists(lb, formulations, top_level=top_level)
    true_a = score_lists(la, [truth], top_level=top_level)[:, 0]
    true_b = score_lists(lb, [truth], top_level=top_level)[:, 0]
    i, j = (ids.index(p) for p in pair)
    bias_frame = pd.DataFrame({"formulation": ids, "gain": [f.labels["gain"] for f in formulations],
                               "discount": [f.labels["discount"] for f in formulations],
                               "family": [f.labels["family"] for f in formulations]})
    rng = np.random.default_rng(seed)
    rows = []
    bar = tqdm(total=len(budgets) * sims, desc="power", disable=not progress)
    for budget in budgets:
        n_examples = max(int(budget) // answers_per_example, 10)
        hits = {f"{kind}_{b}": 0.0 for kind in ("pair", "gain", "discount") for b in INDICATORS}
        diffs = []
        for _ in range(sims):
            pick = rng.integers(0, len(examples), n_examples)
            answers, workers = simulated_answers(true_a[pick], true_b[pick], model, rng, answers_per_example,
                                                 return_workers=True)
            rows_of = np.repeat(pick, answers_per_example)
            # as calibrate: resampling from the worker and example ids, indicators over the
            # score range the data support
            resampling, clusters = resampling_clusters(answers.size, workers,
                                                       np.repeat(np.arange(n_examples), answers_per_example))
            types = collapse_answers(all_a[rows_of], all_b[rows_of], answers)
            support = {"sat": np.array([supported_range(c.x, c.w) for c in satisfaction_curves(types)]),
                       "pref": np.array([supported_range(c.x, c.w) for c in preference_curves(types)])}
            boot_result = bootstrap_calibration(None, None, answers, formulations, replicates=boot,
                                                seed=int(rng.integers(2 ** 32)), types=types,
                                                clusters=clusters, resampling=resampling, support=support)
            est, reps = boot_result.estimates, boot_result.indicators
            table = effects_table(bias_frame.assign(**{b: est[:, n] for n, b in enumerate(INDICATORS)}),
                                  list(INDICATORS), bootstrap=boot_result).set_index(["indicator", "term"])
            for n, b in enumerate(INDICATORS):
                hits[f"pair_{b}"] += holm_p(est[:, n], reps[:, :, n])[i, j] < alpha
                for term in ("gain", "discount"):
                    if (b, term) in table.index:
                        hits[f"{term}_{b}"] += table.loc[(b, term), "p"] < alpha
            diffs.append(est[i] - est[j])
            bar.update(1)
        mean_diff = np.mean(diffs, axis=0)
        row = {"answers": n_examples * answers_per_example, "examples": n_examples,
               "answers_per_example": answers_per_example}
        for n, b in enumerate(INDICATORS):
            row[f"diff_{b}"] = mean_diff[n]
        for key, h in hits.items():
            p = h / sims
            row[f"power_{key}"] = p
            row[f"power_{key}_se"] = float(np.sqrt(p * (1 - p) / sims))
        rows.append(row)
    bar.close()
    return PowerResult(pd.DataFrame(rows), tuple(pair))
