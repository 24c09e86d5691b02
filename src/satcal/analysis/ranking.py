"""Which formulation is least biased, and how sure the answers are of it.

Three estimators of the bias indicators sit side by side in ``bias.csv``:

- **standardised** (``b1_std``, ``b2_std``, ``b3_std``, :mod:`satcal.analysis.standardise`):
  the per-list curves averaged over a fixed reference population of lists drawn from the
  judgments, so that formulations users do not follow are scored on the same lists whatever
  the design. With the same simulated users, the ECIR 2015 pairs and a generated design rank
  formulations alike at Spearman 0.985 by it (0.92 by the per-list one; docs/benchmarks.md).
  It is what the ranking leads with whenever it was computed (the joint model ran on a study
  with judgments, or with a reference population given);
- **per-list** (``b1_joint``, ``b2_joint``, ``b3_joint``): from s(phi), the probability that a
  list with score phi satisfies a user, of each formulation's own joint model over all four
  answers (:mod:`.joint`). It leads when the joint model ran without judgments to draw a
  reference population from (e.g. published scores); it depends on the design through the
  lists each phi_f collects when users do not follow formulation f;
- **paper** (``b1``, ``b2``, ``b3``): Urbano and Marrero's P(Sat|phi), fitted on both_good and
  both_bad answers only, i.e. the satisfaction of a list *given that its partner got the same
  verdict*. It reproduces the published numbers but depends on the design: read it on the
  paper's kind of design only. It leads only without the joint model.

A formulation's rank is its mean rank over the estimator's three indicators (1 = least biased).
With bootstrap replicates the ranking gets its uncertainty: each replicate is ranked the same
way, giving each formulation the probability of ranking first (``p_best``, ties shared) and a
95% percentile interval of its rank (``rank_lo``, ``rank_hi``). The formulations whose rank
interval reaches 1 are those the answers cannot tell apart from the top; a single formulation is
called the least biased only when it is the only one (Hall and Miller 2009, "Using the bootstrap
to quantify the authority of an empirical ranking", Annals of Statistics 37(6B)). These are
marginal intervals, one per formulation, not a simultaneous confidence set: the sentence built
from them says "cannot tell apart", never more.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._results import ResultTables

__all__ = ["ESTIMATORS", "lead_estimator", "estimator_columns", "rank_formulations",
           "rank_uncertainty", "RankingVerdict", "ranking_verdict", "share_text"]

#: The indicators of each estimator, in order b1, b2, b3.
ESTIMATORS = {"per_list": ("b1_joint", "b2_joint", "b3_joint"), "paper": ("b1", "b2", "b3"),
              "standardised": ("b1_std", "b2_std", "b3_std")}
#: What each estimator is, in the words the report and the CLI use.
ESTIMATOR_NAMES = {"per_list": "per-list s(phi) of the joint model",
                   "paper": "paper's P(Sat|phi) and P(Pref|dphi)",
                   "standardised": "per-list curves standardised to a reference population of lists"}
LEVEL = 0.95


def share_text(share: float, decimals: int = 0, percent: bool = True) -> str:
    """A share as text, rounded to ``decimals`` but never to "all" or "none" when it is
    neither: 0.996 of the replicates is "99.6%", not "100%" (and 0.0025 is "0.2%", not "0%").

    Parameters
    ----------
    share : float
        A share in [0, 1].
    decimals : int, default 0
        Decimals shown when they do not round the share to 0 or to 1 (of a percentage when
        ``percent``).
    percent : bool, default True
        Write it as a percentage ("99.6%") or as a share ("0.996").

    Returns
    -------
    str
        NaN as "nan"; a share that 12 decimals still round to 0 or 1 as a bound ("<0.000000000001%").

    Raises
    ------
    ValueError
        ``share`` is below 0 or above 1.

    Examples
    --------
    >>> share_text(0.996), share_text(0.42), share_text(1.0), share_text(0.0025)
    ('99.6%', '42%', '100%', '0.2%')
    >>> share_text(0.996, 2, percent=False), share_text(0.0, 2, percent=False)
    ('0.996', '0.00')
    """
    scale, sign = (100, "%") if percent else (1, "")
    share = float(share)
    if not 0 <= share <= 1 and not np.isnan(share):
        raise ValueError(f"a share is in [0, 1], not {share!r}")
    value = scale * share
    if not np.isfinite(value):
        return f"{value}{sign}"
    text = f"{value:.{decimals}f}"
    # more decimals only where rounding would claim every or no replicate
    while 0 < share < 1 and float(text) in (0, scale) and decimals < 12:
        decimals += 1
        text = f"{value:.{decimals}f}"
    if 0 < share < 1 and float(text) in (0, scale):  # beyond 12 decimals: a bound, never "none" or "all"
        step = f"{10.0 ** -decimals:.{decimals}f}"
        return (f"<{step}" if float(text) == 0 else f">{scale - float(step):.{decimals}f}") + sign
    return text + sign


def lead_estimator(bias: pd.DataFrame) -> str:
    """``standardised`` when ``b1_std`` is in ``bias``, else ``per_list`` when the joint model
    ran (``b1_joint``), else ``paper``.

    Parameters
    ----------
    bias : pandas.DataFrame

    Returns
    -------
    str
    """
    has = lambda c: c in bias.columns and bias[c].notna().any()
    return "standardised" if has("b1_std") else "per_list" if has("b1_joint") else "paper"


def estimator_columns(bias: pd.DataFrame, estimator: str) -> list[str]:
    """The bias columns an estimator ranks by. The per-list estimator falls back on the paper's
    b3 when the joint model's implied preference indicator is not there.

    Parameters
    ----------
    bias : pandas.DataFrame
    estimator : {"standardised", "per_list", "paper"}

    Returns
    -------
    list of str
    """
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {', '.join(ESTIMATORS)}, got {estimator!r}")
    cols = list(ESTIMATORS[estimator])
    if estimator == "per_list" and "b3_joint" not in bias.columns:
        cols[2] = "b3"
    return cols


def _mean_ranks(values: np.ndarray) -> np.ndarray:
    """Mean over the last axis of each indicator's rank among formulations (axis -2), 1 = lowest;
    ties get the lowest rank of their group, as ``pandas.Series.rank(method="min")``."""
    from scipy.stats import rankdata
    return rankdata(values, method="min", axis=-2).mean(axis=-1)


def rank_formulations(bias: pd.DataFrame, estimator: str | None = None) -> pd.DataFrame:
    """Formulations ordered by their mean rank over the estimator's b1, b2, b3 (1 = least biased).

    Parameters
    ----------
    bias : DataFrame
        ``bias.csv``: ``formulation, gain, discount, b1, b2, b3`` and, when the joint model ran,
        ``b1_joint, b2_joint`` (and ``b3_joint``).
    estimator : {"standardised", "per_list", "paper"}, optional
        Default: :func:`lead_estimator`.

    Returns
    -------
    DataFrame
        ``formulation, gain, discount, estimator``, the paper's b1-b3, the estimator's three
        indicators, ``rank_<indicator>``, ``mean_rank``, and beside them the other estimators'
        mean ranks: ``mean_rank_paper`` (the paper's ranking, for reproduction) whenever another
        estimator leads, and ``mean_rank_per_list`` (with ``b1_joint``-``b3_joint``) when the
        standardised one leads.
    """
    estimator = estimator or lead_estimator(bias)
    cols = estimator_columns(bias, estimator)
    others = estimator_columns(bias, "per_list") if estimator == "standardised" and lead_estimator(
        bias.drop(columns=list(ESTIMATORS["standardised"]), errors="ignore")) == "per_list" else []
    keep = ["formulation", "gain", "discount"] + list(dict.fromkeys(["b1", "b2", "b3"] + others + cols))
    out = bias[[c for c in keep if c in bias.columns]].copy()
    out.insert(3, "estimator", estimator)
    # an indicator that could not be computed (no bin with enough data) ranks last
    rank = lambda c: out[c].rank(method="min", na_option="bottom").astype(int)
    for c in cols:
        out[f"rank_{c}"] = rank(c)
    out["mean_rank"] = out[[f"rank_{c}" for c in cols]].mean(axis=1)
    if others:
        out["mean_rank_per_list"] = np.mean([rank(c) for c in others], axis=0)
    if estimator != "paper":
        out["mean_rank_paper"] = np.mean([rank(c) for c in ("b1", "b2", "b3")], axis=0)
    return out.sort_values(["mean_rank", cols[0]]).reset_index(drop=True)


def rank_uncertainty(replicates: np.ndarray, formulations: list[str]) -> pd.DataFrame:
    """Each formulation's rank over bootstrap replicates of its indicators.

    Parameters
    ----------
    replicates : (B, F, m) array
        Replicate values of the m indicators of the F formulations. An indicator missing from
        most replicates (no curve data for it) ranks last; otherwise a replicate with a missing
        value (a fit that failed) is left out.
    formulations : list of str

    Returns
    -------
    DataFrame
        ``formulation, p_best, rank_lo, rank_hi, rank_median, replicates_used``: the share of
        replicates in which the formulation ranks first by mean rank (shared equally among tied
        formulations), and the 2.5%, 97.5% and 50% points of its rank (1 = least biased).
    """
    reps = np.array(replicates, float)
    # an indicator missing from most replicates (no curve data for it) ranks last in all of them;
    # a replicate that misses one that the others have (a failed fit) is left out
    mostly_missing = np.isnan(reps).mean(axis=0) > 0.5
    reps[:, mostly_missing] = np.inf
    ok = ~np.isnan(reps).any(axis=(1, 2))
    reps = reps[ok]
    if reps.shape[0] == 0:
        nan = np.full(len(formulations), np.nan)
        return pd.DataFrame({"formulation": formulations, "p_best": nan, "rank_lo": nan, "rank_hi": nan,
                             "rank_median": nan, "replicates_used": 0})
    from scipy.stats import rankdata
    mean_rank = _mean_ranks(reps)                                  # (B, F)
    rank = rankdata(mean_rank, method="min", axis=1)               # rank of the mean rank
    first = rank == 1
    p_best = (first / first.sum(axis=1, keepdims=True)).mean(axis=0)
    q = [(1 - LEVEL) / 2 * 100, (1 + LEVEL) / 2 * 100, 50]
    lo = np.percentile(rank, q[0], axis=0, method="lower")
    hi = np.percentile(rank, q[1], axis=0, method="higher")
    med = np.percentile(rank, q[2], axis=0, method="lower")
    return pd.DataFrame({"formulation": formulations, "p_best": p_best, "rank_lo": lo.astype(int),
                         "rank_hi": hi.astype(int), "rank_median": med.astype(int),
                         "replicates_used": int(reps.shape[0])})


@dataclass(frozen=True)
class RankingVerdict(ResultTables):
    """What the ranking allows one to say.

    Attributes
    ----------
    estimator : str
        ``standardised``, ``per_list`` or ``paper``.
    top : str
        The formulation ranked first on the full sample.
    contenders : tuple of str
        The formulations the answers cannot tell apart from the top (rank interval reaching 1),
        the top included; empty without a bootstrap.
    p_best : dict
        Probability of ranking first, per contender.
    settled : bool
        True when a single formulation is the least biased at the stated level and nothing
        warns that the data are too thin to say so.
    reason : str
        Why it is not settled ('' when it is).
    """

    estimator: str
    top: str
    contenders: tuple
    p_best: dict
    settled: bool
    reason: str

    def tables(self) -> dict[str, pd.DataFrame]:
        """The verdict (one row) and each contender's probability of ranking first.

        Returns
        -------
        dict of str to pandas.DataFrame
        """
        verdict = pd.DataFrame({"estimator": [self.estimator], "top": [self.top],
                                "contenders": [len(self.contenders)], "settled": [self.settled],
                                "reason": [self.reason]})
        contenders = pd.DataFrame({"formulation": list(self.contenders),
                                   "p_best": [float(self.p_best.get(f, np.nan)) for f in self.contenders]})
        return {"verdict": verdict, "contenders": contenders}

    def summary(self) -> str:
        """:meth:`sentence`.

        Returns
        -------
        str
        """
        return self.sentence()

    def sentence(self) -> str:
        """One plain sentence, backed by the bootstrap (or saying that it is missing).

        Returns
        -------
        str
        """
        name = ESTIMATOR_NAMES[self.estimator]
        if not self.contenders:
            return (f"By the {name}, {self.top} ranks first, but {self.reason}: the ranking carries "
                    "no stated uncertainty, so no formulation is called the least biased.")
        if len(self.contenders) == 1 and not self.settled:
            return (f"By the {name}, {self.top} ranks first in {share_text(self.p_best[self.top])} of the "
                    f"bootstrap replicates, {self.reason}.")
        if self.settled:
            return (f"By the {name}, {self.top} is the least biased: it ranks first in "
                    f"{share_text(self.p_best[self.top])} of the bootstrap replicates and no other "
                    f"formulation's 95% rank interval reaches first place.")
        shown = ", ".join(f"{f} ({share_text(self.p_best.get(f, 0))})" for f in self.contenders[:8])
        more = f" and {len(self.contenders) - 8} more" if len(self.contenders) > 8 else ""
        return (f"By the {name}, the answers cannot tell apart {len(self.contenders)} formulations at "
                f"the top: {shown}{more} (the share of bootstrap replicates in which each ranks first); "
                f"{self.reason}.")


def ranking_verdict(ranking: pd.DataFrame, uncertainty: pd.DataFrame | None,
                    thin: bool = False) -> RankingVerdict:
    """Whether the answers single out one least-biased formulation (see the module docstring).

    ``ranking`` is :func:`rank_formulations`' table, ``uncertainty`` :func:`rank_uncertainty`'s
    (None without a bootstrap), ``thin`` whether the analysis warned that its data are thin.

    Parameters
    ----------
    ranking : pandas.DataFrame
    uncertainty : pandas.DataFrame or None
    thin : bool, default False

    Returns
    -------
    RankingVerdict
    """
    estimator = str(ranking["estimator"].iloc[0])
    top = str(ranking["formulation"].iloc[0])
    if uncertainty is None:
        return RankingVerdict(estimator, top, (), {}, False, "the analysis was not bootstrapped")
    if uncertainty["replicates_used"].max() == 0:
        return RankingVerdict(estimator, top, (), {}, False, "no bootstrap replicate could rank every "
                              "formulation")
    u = uncertainty.set_index("formulation")
    order = [f for f in ranking["formulation"] if f in u.index]
    contenders = tuple(f for f in order if u.loc[f, "rank_lo"] <= 1)
    if top not in contenders:  # the full-sample leader always stays in the set it leads
        contenders = (top,) + contenders
    p_best = {f: float(u.loc[f, "p_best"]) for f in contenders}
    if len(contenders) > 1:
        reason = "no single formulation is the least biased at 95%"
        return RankingVerdict(estimator, top, contenders, p_best, False, reason)
    if thin:
        return RankingVerdict(estimator, top, contenders, p_best, False,
                              "but the data are too thin to call it the least biased (see the warnings)")
    return RankingVerdict(estimator, top, contenders, p_best, True, "")
