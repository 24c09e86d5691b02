"""System-side reliability of every formulation (Kanoulas and Aslam, CIKM 2009; Urbano, Marrero and
Martín, SIGIR 2013).

For a set of runs and judgments, per formulation: the system x topic score matrix, then

- **G-study** (two-way crossed, one observation per cell; Brennan 2001): from the ANOVA mean
  squares MS_s, MS_t, MS_e,
  sigma2_e = MS_e, sigma2_s = (MS_s - MS_e) / n_t, sigma2_t = (MS_t - MS_e) / n_s,
  negative estimates set to 0;
- **D-study** at n' topics: E rho^2 = s2_s / (s2_s + s2_e / n'),
  Phi = s2_s / (s2_s + (s2_t + s2_e) / n'); topics needed for a target; intervals by Feldt
  (1965) for E rho^2 and Arteaga, Jeyaratnam & Franklin (1982) for Phi (Brennan 2001, 6.1);
- **discriminative power**: Sakai's paired bootstrap test (Sakai 2006) over every pair of
  systems, ASL per pair (B = 1000), the share of pairs with ASL < alpha, and ASL curves;
- **Buckley-Voorhees error rate** (2000) across topic-set sizes, fuzziness 5 %;
- **Kendall tau** between the system rankings of the formulations;
- **optimal gains / discounts** (Kanoulas and Aslam, CIKM 2009): maximise Phi at one topic over gain values (or
  discount factors) on the probability simplex, monotone, non-relevant gain 0, with SLSQP.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import optimize, stats

from ._results import ResultTables
from .errors import SatcalError, check_seed
from .fileio import gain_colour, new_figure, panel_axes
from .judgments import Judgments, require_judgments
from .measures import Discount, Formulation, Gain, resolve_formulations, score_lists
from .runs import Runs, level_cube

__all__ = ["score_matrix", "GStudy", "g_study", "d_study", "discriminative_power",
           "buckley_voorhees", "kendall_matrix", "optimal_gains", "optimal_discounts",
           "simulate_runs", "reliability_report", "ReliabilityResult"]


# --------------------------------------------------------------------------------------------
# Scores
# --------------------------------------------------------------------------------------------
def score_matrix(runs: Runs, judgments: Judgments, formulations, k: int = 10,
                 top_level: int | None = None) -> tuple[np.ndarray, list[str], list[str]]:
    """(F, S, Q) scores of every formulation, system and judged query.

    Pool-based normalisations (``ideal``, ``minmax``, ``ul1``, ``ul2``) use each query's
    judged pool; unjudged retrieved documents count as level 0; a run without documents for a
    query scores its empty list.

    Parameters
    ----------
    runs : Runs
    judgments : Judgments
    formulations : list of str or Formulation
    k : int, default 10
    top_level : int, optional
        Default: the judgments' top level.

    Returns
    -------
    scores : numpy.ndarray, shape (F, S, Q)
    systems : list of str
    queries : list of str
    """
    forms = resolve_formulations(formulations)
    cube, systems, queries = level_cube(runs, judgments, k)
    s, q = len(systems), len(queries)
    pools = judgments.pools()
    pool_list = [pools[x] for x in queries]
    qi = np.tile(np.arange(q), s)
    top = judgments.top_level if top_level is None else top_level
    scores = score_lists(cube.reshape(s * q, k), forms, top_level=top, pools=pool_list, query_index=qi)
    return scores.T.reshape(len(forms), s, q), systems, queries


# --------------------------------------------------------------------------------------------
# Generalizability theory
# --------------------------------------------------------------------------------------------
@dataclass
class GStudy:
    """Variance components and mean squares of a system x topic matrix.

    Attributes
    ----------
    n_systems, n_topics : int
        The matrix's systems n_s and topics n_t.
    ms_system : float
        MS_s = n_t sum_s (mean_s - mean)^2 / (n_s - 1).
    ms_topic : float
        MS_t = n_s sum_t (mean_t - mean)^2 / (n_t - 1).
    ms_residual : float
        MS_e: the interaction-plus-error mean square, on (n_s - 1)(n_t - 1) degrees of freedom.
    var_system : float
        sigma2_s = (MS_s - MS_e) / n_t, or 0 when negative.
    var_topic : float
        sigma2_t = (MS_t - MS_e) / n_s, or 0 when negative.
    var_residual : float
        sigma2_e = MS_e.
    """

    n_systems: int
    n_topics: int
    ms_system: float
    ms_topic: float
    ms_residual: float
    var_system: float
    var_topic: float
    var_residual: float


def g_study(scores: np.ndarray) -> GStudy:
    """Two-way crossed G-study of a (systems, topics) matrix; negative components set to 0.

    sigma2_e = MS_e, sigma2_s = (MS_s - MS_e) / n_t, sigma2_t = (MS_t - MS_e) / n_s.

    Parameters
    ----------
    scores : numpy.ndarray, shape (S, T)
        One score per system and topic.

    Returns
    -------
    GStudy
        Mean squares, variance components and the design's sizes.

    References
    ----------
    Brennan, R. L. (2001). Generalizability Theory. Springer.

    Urbano, J., Marrero, M. and Martín, D. (2013). On the measurement of test collection
    reliability. SIGIR 2013.
    """
    x = np.asarray(scores, float)
    ns, nt = x.shape
    if ns < 2 or nt < 2:
        raise SatcalError(f"a G-study needs at least 2 systems and 2 topics, got {ns} x {nt}")
    grand = x.mean()
    sm, tm = x.mean(axis=1), x.mean(axis=0)
    ms_s = nt * ((sm - grand) ** 2).sum() / (ns - 1)
    ms_t = ns * ((tm - grand) ** 2).sum() / (nt - 1)
    resid = x - sm[:, None] - tm[None, :] + grand
    ms_e = (resid ** 2).sum() / ((ns - 1) * (nt - 1))
    return GStudy(ns, nt, ms_s, ms_t, ms_e, max((ms_s - ms_e) / nt, 0.0), max((ms_t - ms_e) / ns, 0.0),
                  max(ms_e, 0.0))


def d_study(g: GStudy, topics: Sequence[int] | int | None = None, target: float = 0.95,
            alpha: float = 0.05) -> pd.DataFrame:
    """E rho^2 and Phi at n' topics, with intervals, and the topics needed to reach a target.

    E rho^2 = s2_s / (s2_s + s2_e / n'), Phi = s2_s / (s2_s + (s2_t + s2_e) / n'); intervals by
    Feldt (1965) for E rho^2 and Arteaga, Jeyaratnam and Franklin (1982) for Phi.

    Parameters
    ----------
    g : GStudy
    topics : int or sequence of int, optional
        Default: the G-study's number of topics.
    target : float, default 0.95
        The E rho^2 and Phi to reach.
    alpha : float, default 0.05
        Two-sided (1 - alpha) intervals, alpha / 2 in each tail (gt4ireval's ``alpha`` is per
        tail, so its 0.025 is this function's 0.05).

    Returns
    -------
    pandas.DataFrame
        One row per number of topics: ``erho2``, ``phi``, their interval bounds, and the topics
        needed for ``target``.

    References
    ----------
    Brennan, R. L. (2001). Generalizability Theory. Springer, section 6.1.

    Urbano, J., Marrero, M. and Martín, D. (2013). On the measurement of test collection
    reliability. SIGIR 2013.
    """
    topics = np.atleast_1d(g.n_topics if topics is None else topics).astype(float)
    s, t, e = g.var_system, g.var_topic, g.var_residual
    with np.errstate(divide="ignore", invalid="ignore"):
        erho = s / (s + e / topics)
        phi = s / (s + (t + e) / topics)
        # (the 1e-9 keeps an exact integer from rounding up through floating-point noise)
        need_erho = np.ceil(target * e / (s * (1 - target)) - 1e-9) if s > 0 else np.inf
        need_phi = np.ceil(target * (t + e) / (s * (1 - target)) - 1e-9) if s > 0 else np.inf
    df_s, df_t = g.n_systems - 1, g.n_topics - 1
    df_e = df_s * df_t
    a = alpha / 2

    def feldt(q):
        """Feldt's bound on E rho^2 at quantile ``q``: (its value for ``topics`` topics, the per-topic ratio).

        Parameters
        ----------
        q : float
            The F quantile.
        """
        # Feldt (1965): F_obs (1 - rho2) ~ F(df_s, df_e); per-topic ratio, then n' topics.
        with np.errstate(divide="ignore", invalid="ignore"):
            r = g.ms_system / (g.ms_residual * stats.f.ppf(q, df_s, df_e))
            r = (r - 1) / g.n_topics
            return topics * r / (1 + topics * r), r

    def arteaga(q):
        """Arteaga et al.'s bound at quantile ``q``: (Phi for ``topics`` topics, Phi for one topic).

        Parameters
        ----------
        q : float
            The F quantile.
        """
        # Arteaga, Jeyaratnam & Franklin (1982), as given by Brennan (2001, p. 190).
        # F(df_s, infinity) is chi2(df_s) / df_s
        f_inf = stats.chi2.ppf(q, df_s) / df_s
        f_e, f_t = stats.f.ppf(q, df_s, df_e), stats.f.ppf(q, df_s, df_t)
        ms_s, ms_t, ms_e = g.ms_system, g.ms_topic, g.ms_residual
        with np.errstate(divide="ignore", invalid="ignore"):
            num = ms_s ** 2 - f_inf * ms_s * ms_e + (f_inf - f_e) * f_e * ms_e ** 2
            den = (g.n_systems - 1) * f_inf * ms_s * ms_e + f_t * ms_s * ms_t
            r = num / den
            r = g.n_systems * r / (g.n_systems * r + g.n_topics)   # Phi for one topic
            return topics * r / (1 + (topics - 1) * r), r

    erho_lo, erho1_lo = feldt(1 - a)
    erho_hi, erho1_hi = feldt(a)
    phi_lo, phi1_lo = arteaga(1 - a)
    phi_hi, phi1_hi = arteaga(a)
    return pd.DataFrame({"topics": topics.astype(int), "erho2": erho, "erho2_lo": erho_lo, "erho2_hi": erho_hi,
                         "phi": phi, "phi_lo": phi_lo, "phi_hi": phi_hi,
                         "topics_for_erho2": need_erho, "topics_for_phi": need_phi})


# --------------------------------------------------------------------------------------------
# Discriminative power and stability
# --------------------------------------------------------------------------------------------
def discriminative_power(scores: np.ndarray, systems: Sequence[str], replicates: int = 1000,
                         alpha: float = 0.05, seed: int = 0) -> pd.DataFrame:
    """Sakai's paired bootstrap test for every pair of systems: ASL per pair.

    z = per-topic differences, t0 = mean(z) / (sd(z)/sqrt(n)); the bootstrap resamples the
    centred differences w = z - mean(z) (the same resampled topics for all pairs) and
    ASL = share of replicates with |t*| >= |t0|. A pair that differs by the same non-zero amount
    on every topic (zero variance) has ASL 0; a pair equal on every topic, ASL 1.

    Parameters
    ----------
    scores : numpy.ndarray, shape (S, T)
    systems : sequence of str
        The names of the S systems.
    replicates : int, default 1000
    alpha : float, default 0.05
        The significance level the pairs are counted at.
    seed : int, default 0

    Returns
    -------
    pandas.DataFrame
        One row per pair of systems with its ASL.

    References
    ----------
    Sakai, T. (2006). Evaluating evaluation metrics based on the bootstrap. SIGIR 2006.
    """
    x = np.asarray(scores, float)
    n = x.shape[1]
    pairs = list(combinations(range(len(systems)), 2))
    if not pairs:
        return pd.DataFrame(columns=["system_1", "system_2", "diff", "t", "asl", "significant"])
    z = np.stack([x[i] - x[j] for i, j in pairs])                      # (P, n)
    mean, sd = z.mean(1), z.std(1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t0 = np.where(sd > 0, mean / (sd / np.sqrt(n)), 0.0)
    w = z - mean[:, None]
    idx = np.random.default_rng(seed).integers(0, n, size=(replicates, n))
    exceed = np.zeros(len(pairs))
    for chunk in np.array_split(np.arange(replicates), max(1, replicates // 100)):
        ws = w[:, idx[chunk]]                                         # (P, b, n)
        m, s = ws.mean(2), ws.std(2, ddof=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(s > 0, m / (s / np.sqrt(n)), 0.0)
        exceed += (np.abs(t) >= np.abs(t0)[:, None]).sum(1)
    # Zero variance: identical differences on every topic. Equal systems (mean 0) give no
    # evidence (ASL 1); a constant non-zero difference is the strongest evidence there is, and
    # every centred replicate is 0, so ASL is 0 (reported as such, below any 1/B).
    asl = np.where(sd > 0, exceed / replicates, np.where(mean != 0, 0.0, 1.0))
    return pd.DataFrame({"system_1": [systems[i] for i, _ in pairs], "system_2": [systems[j] for _, j in pairs],
                         "diff": mean, "t": t0, "asl": asl, "significant": asl < alpha})


def buckley_voorhees(scores: np.ndarray, sizes: Sequence[int] | None = None, trials: int = 100,
                     fuzziness: float = 0.05, seed: int = 0) -> pd.DataFrame:
    """Buckley and Voorhees' error rate across topic-set sizes.

    For each size c and each of ``trials`` random topic subsets, every pair of systems is
    A > B, A < B, or tied (|mean_A - mean_B| <= fuzziness * max(|mean_A|, |mean_B|)). The
    error rate is sum over pairs of min(#A>B, #A<B) over sum of all outcomes; the tie rate is
    the share of ties.

    Parameters
    ----------
    scores : numpy.ndarray, shape (S, T)
    sizes : sequence of int, optional
        Topic-set sizes; default T/10, 2T/10, ..., T (at least 2).
    trials : int, default 100
    fuzziness : float, default 0.05
    seed : int, default 0

    Returns
    -------
    pandas.DataFrame
        One row per size: error rate and tie rate.

    References
    ----------
    Buckley, C. and Voorhees, E. M. (2000). Evaluating evaluation measure stability.
    SIGIR 2000.
    """
    x = np.asarray(scores, float)
    ns, nt = x.shape
    sizes = list(sizes) if sizes is not None else sorted({max(2, nt * f // 10) for f in range(1, 11)})
    rng = np.random.default_rng(seed)
    i_idx, j_idx = np.triu_indices(ns, 1)
    rows = []
    for c in sizes:
        c = min(int(c), nt)
        gt = np.zeros(i_idx.size)
        lt = np.zeros(i_idx.size)
        eq = np.zeros(i_idx.size)
        for _ in range(trials):
            sub = rng.choice(nt, size=c, replace=False)
            m = x[:, sub].mean(1)
            a, b = m[i_idx], m[j_idx]
            tie = np.abs(a - b) <= fuzziness * np.maximum(np.abs(a), np.abs(b))
            gt += (a > b) & ~tie
            lt += (a < b) & ~tie
            eq += tie
        total = (gt + lt + eq).sum()
        rows.append({"topics": c, "error_rate": np.minimum(gt, lt).sum() / total if total else np.nan,
                     "tie_rate": eq.sum() / total if total else np.nan})
    return pd.DataFrame(rows)


def kendall_matrix(means: dict[str, np.ndarray]) -> pd.DataFrame:
    """Kendall tau (tau-b) between the system rankings by mean score of every two formulations.

    Parameters
    ----------
    means : dict of str to numpy.ndarray
        Each formulation's mean score per system (systems in one order).

    Returns
    -------
    pandas.DataFrame
        Formulations x formulations.
    """
    rows = []
    for a, b in combinations(list(means), 2):
        tau, p = stats.kendalltau(means[a], means[b])
        rows.append({"formulation_1": a, "formulation_2": b, "tau": tau, "p": p})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------
# Optimal gains and discounts (Kanoulas and Aslam, CIKM 2009)
# --------------------------------------------------------------------------------------------
def _phi_one_topic(scores: np.ndarray) -> float:
    g = g_study(scores)
    total = g.var_system + g.var_topic + g.var_residual
    return g.var_system / total if total > 0 else 0.0


def optimal_gains(runs: Runs, judgments: Judgments, discount="log2", k: int = 10,
                  normalization: str = "ideal", seed: int = 0):
    """Gain values maximising Phi at one topic.

    Levels 0 < l_1 < ... < l_m of the judgments (negative levels count as 0): g(0) = 0 fixed,
    the others on the simplex (sum 1, each >= 0) and non-decreasing, by SLSQP.

    Parameters
    ----------
    runs : Runs
    judgments : Judgments
    discount : str or Discount, default ``"log2"``
    k : int, default 10
    normalization : str, default ``"ideal"``
    seed : int, default 0

    Returns
    -------
    gain : Gain
        The custom gain found.
    phi : float
        The Phi at one topic it reaches.
    phi_start : float
        The Phi of the starting point.

    References
    ----------
    Kanoulas, E. and Aslam, J. A. (2009). Empirical justification of the gain and discount
    function for nDCG. CIKM 2009.
    """
    levels = [lv for lv in sorted(set(judgments.table["level"].tolist())) if lv > 0]
    if len(levels) < 1:
        raise SatcalError("optimal gains need at least one relevant level in the judgments")
    cube, systems, queries = level_cube(runs, judgments, k)
    cube = np.where(cube < 0, 0, cube)
    pools = [np.maximum(p, 0) for p in (judgments.pools()[q] for q in queries)]
    from .measures import get_discount
    disc = get_discount(discount)
    s, q = len(systems), len(queries)

    def phi_of(values):
        """Phi for one topic of the gain with ``values`` at the positive levels (0 at level 0).

        Parameters
        ----------
        values : array_like
            One gain value per level of ``levels``.
        """
        gain = Gain.from_mapping({0: 0.0, **{lv: float(v) for lv, v in zip(levels, values)}}, "optimal")
        f = Formulation(gain, disc, normalization)
        sc = score_lists(cube.reshape(s * q, k), [f], pools=pools, query_index=np.tile(np.arange(q), s),
                         top_level=max(levels))[:, 0].reshape(s, q)
        return _phi_one_topic(sc)

    m = len(levels)
    cons = [{"type": "eq", "fun": lambda v: v.sum() - 1.0}]
    cons += [{"type": "ineq", "fun": (lambda v, i=i: v[i + 1] - v[i])} for i in range(m - 1)]
    start = np.arange(1, m + 1, dtype=float)
    start /= start.sum()
    res = optimize.minimize(lambda v: -phi_of(v), start, method="SLSQP", bounds=[(0, 1)] * m,
                            constraints=cons, options={"maxiter": 200, "ftol": 1e-10})
    values = np.clip(res.x, 0, None)
    values /= values.sum()
    gain = Gain.from_mapping({0: 0.0, **{lv: float(v) for lv, v in zip(levels, values)}}, "optimal")
    return gain, phi_of(values), phi_of(start)


def optimal_discounts(runs: Runs, judgments: Judgments, gain="lin", k: int = 10,
                      normalization: str = "ideal"):
    """Discount factors d(1..k) maximising Phi at one topic: on the simplex and
    non-increasing, by SLSQP.

    Parameters
    ----------
    runs : Runs
    judgments : Judgments
    gain : str or Gain, default ``"lin"``
    k : int, default 10
    normalization : str, default ``"ideal"``

    Returns
    -------
    discount : Discount
        The custom discount found.
    phi : float
        The Phi at one topic it reaches.
    phi_start : float
        The Phi of the starting point.

    References
    ----------
    Kanoulas, E. and Aslam, J. A. (2009). Empirical justification of the gain and discount
    function for nDCG. CIKM 2009.
    """
    from .measures import get_gain
    g = get_gain(gain)
    cube, systems, queries = level_cube(runs, judgments, k)
    pools = [judgments.pools()[q] for q in queries]
    s, q = len(systems), len(queries)

    def phi_of(values):
        """Phi for one topic of the discount with factors ``values``.

        Parameters
        ----------
        values : array_like
            One factor per rank, k of them.
        """
        f = Formulation(g, Discount.from_factors(values, "optimal"), normalization)
        sc = score_lists(cube.reshape(s * q, k), [f], pools=pools, query_index=np.tile(np.arange(q), s),
                         top_level=judgments.top_level)[:, 0].reshape(s, q)
        return _phi_one_topic(sc)

    cons = [{"type": "eq", "fun": lambda v: v.sum() - 1.0}]
    cons += [{"type": "ineq", "fun": (lambda v, i=i: v[i] - v[i + 1])} for i in range(k - 1)]
    start = 1 / np.log2(np.arange(2, k + 2))
    start /= start.sum()
    res = optimize.minimize(lambda v: -phi_of(v), start, method="SLSQP", bounds=[(0, 1)] * k,
                            constraints=cons, options={"maxiter": 200, "ftol": 1e-10})
    values = np.clip(res.x, 0, None)
    values /= values.sum()
    return Discount.from_factors(values, "optimal"), phi_of(values), phi_of(start)


# --------------------------------------------------------------------------------------------
# Simulated runs (demo data only)
# --------------------------------------------------------------------------------------------
#: The run tag prefix of :func:`simulate_runs`' systems, by which results know they are simulated.
SIMULATED_TAG = "simulated-sys"


def simulate_runs(judgments: Judgments, n_systems: int = 12, depth: int = 50, seed: int = 0,
                  out_dir: Path | None = None) -> Runs:
    """SIMULATED runs: systems of graded quality ranking each query's judged documents.

    System s has quality q_s spread over [0.2, 2]; a document's score is q_s * level + noise
    (standard normal) with a per (system, query) shift, so better systems put relevant documents
    higher, and some queries are harder. Clearly labelled: tags ``simulated-sysNN``.

    Parameters
    ----------
    judgments : Judgments
    n_systems : int, default 12
    depth : int, default 50
        Documents retrieved per query (at most those judged).
    seed : int, default 0
    out_dir : path-like, optional
        Where to write the runs as TREC files too.

    Returns
    -------
    Runs
    """
    rng = np.random.default_rng(check_seed(seed))
    t = judgments.table
    quality = np.linspace(0.2, 2.0, n_systems)
    frames = []
    for s, qs in enumerate(quality):
        difficulty = dict(zip(judgments.queries, rng.normal(0, 0.5, len(judgments.queries))))
        noise = rng.normal(0, 1, len(t))
        score = qs * np.maximum(t["level"].to_numpy(), 0) * (1 + t["query"].map(difficulty).to_numpy()) + noise
        f = pd.DataFrame({"system": f"{SIMULATED_TAG}{s + 1:02d}", "query": t["query"], "doc": t["doc"], "score": score})
        f = f.sort_values(["query", "score"], ascending=[True, False]).groupby("query").head(depth)
        frames.append(f)
    runs = Runs(pd.concat(frames, ignore_index=True))
    if out_dir is not None:
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, g in runs.table.groupby("system", sort=True):
            g = g.assign(rank=g.groupby("query").cumcount() + 1)
            lines = (g["query"] + " Q0 " + g["doc"] + " " + g["rank"].astype(str) + " " +
                     g["score"].map(lambda v: f"{v:.6f}") + " " + name)
            (out_dir / f"{name}.run").write_text("\n".join(lines) + "\n")
    return runs


# --------------------------------------------------------------------------------------------
# The whole report
# --------------------------------------------------------------------------------------------
@dataclass(repr=False)
class ReliabilityResult(ResultTables):
    """System-side reliability of every formulation.

    Attributes
    ----------
    gstudy, dstudy : pandas.DataFrame
        Variance components per formulation, and dependability against the number of topics.
    discrimination, asl : pandas.DataFrame
        Discriminative power and the achieved significance level of every pair of systems.
    bv, kendall : pandas.DataFrame
        Buckley and Voorhees' error rate, and Kendall's tau between the formulations' rankings.
    combined : pandas.DataFrame, optional
        Reliability beside the calibration's bias indicators (``user_vs_system``): the
        paper's b1-b3 and those of the estimator the calibration's ranking leads with.
    notice : str
        Licence and citation of the runs, when they come with one.
    estimator : str, optional
        The estimator the calibration's ranking leads with (``standardised``, ``per_list`` or
        ``paper``, :func:`satcal.analysis.ranking.lead_estimator` of its bias table): its
        indicators are the ones :attr:`combined`'s figure and :meth:`summary` show.
    """

    gstudy: pd.DataFrame
    dstudy: pd.DataFrame
    discrimination: pd.DataFrame
    asl: pd.DataFrame
    bv: pd.DataFrame
    kendall: pd.DataFrame
    combined: pd.DataFrame | None = None
    notice: str = ""
    estimator: str | None = None

    def tables(self) -> dict[str, pd.DataFrame]:
        """Every table of the report (``bv_error`` is :attr:`bv`, ``user_vs_system``
        :attr:`combined`).

        Returns
        -------
        dict of str to pandas.DataFrame
        """
        out = {"gstudy": self.gstudy, "dstudy": self.dstudy, "discrimination": self.discrimination,
               "asl": self.asl, "bv_error": self.bv, "kendall": self.kendall}
        if self.combined is not None:
            out["user_vs_system"] = self.combined
        return out

    def beside(self, calibration_bias: pd.DataFrame) -> "ReliabilityResult":
        """This result with a calibration's bias beside its reliability (:attr:`combined`);
        the reliability itself does not depend on the calibration, so it can be computed while
        the calibration runs (``satcal demo`` does).

        Parameters
        ----------
        calibration_bias : pandas.DataFrame
            A calibration's ``bias`` table (``CalibrationResult.bias`` or its ``bias.csv``): the
            paper's ``b1``, ``b2``, ``b3`` are kept, and the indicators of the estimator its
            ranking leads with (``b1_std``-``b3_std`` when the study had judgments), which the
            figure and the summary show.

        Returns
        -------
        ReliabilityResult
        """
        from dataclasses import replace
        from .analysis.ranking import estimator_columns, lead_estimator
        # the calibration's own choice (CalibrationResult.estimator is lead_estimator of its
        # bias), so the figure ranks by what ranking.csv and the report rank by
        estimator = lead_estimator(calibration_bias)
        wanted = ("formulation", "b1", "b2", "b3", *estimator_columns(calibration_bias, estimator))
        keep = [c for c in calibration_bias.columns if c in wanted]
        combined = self.gstudy[["formulation", "phi", "erho2", "topics_for_phi", "topics_for_erho2"]].merge(
            self.discrimination, on="formulation").merge(calibration_bias[keep], on="formulation", how="left")
        return replace(self, combined=combined, estimator=estimator)

    @property
    def bias_columns(self) -> list[str]:
        """The bias indicators the figure and the summary show: b1-b3 of the calibration's
        lead estimator (:attr:`estimator`); empty without a calibration beside."""
        from .analysis.ranking import estimator_columns
        if self.combined is None:
            return []
        return estimator_columns(self.combined, self.estimator or "paper")

    def save_beside(self, out_dir) -> dict:
        """Write what the calibration's bias adds (the ``user_vs_system`` table and figure) into
        ``out_dir``, where :meth:`save` wrote the rest before the bias was beside it.

        Parameters
        ----------
        out_dir : str or os.PathLike
            The directory :meth:`save` wrote.

        Returns
        -------
        dict of str to str
            The figure's PNG under ``user_vs_system`` (as :meth:`save` gives it).

        Raises
        ------
        SatcalError
            There is no bias beside (see :meth:`beside`).
        """
        from ._results import write_table
        from .fileio import save_figure
        if self.combined is None:
            raise SatcalError("no calibration bias beside this reliability: call beside(bias) first")
        out = Path(out_dir)
        write_table(self.combined, out / self.table_file("user_vs_system"))
        return {"user_vs_system": str(save_figure(self._fig_combined(), out / self._file_stem("user_vs_system"))[0])}

    @property
    def simulated(self) -> bool:
        """Whether every system is a simulated run (:func:`simulate_runs`' tags
        ``simulated-sysNN``): the figures' titles and the summary then say so."""
        systems = pd.concat([self.asl[c] for c in ("system_1", "system_2") if c in self.asl.columns])
        return bool(len(systems)) and bool(systems.astype(str).str.startswith(SIMULATED_TAG).all())

    def _title(self, text: str) -> str:
        return f"{text}\n(SIMULATED runs: for trying the analysis, not a finding)" if self.simulated else text

    def figures(self) -> dict:
        """Dependability against topics, the ASL curves and, with a calibration, reliability
        against bias.

        Returns
        -------
        dict of str to matplotlib.figure.Figure
        """
        figs = {"phi_vs_topics": self._fig_phi(), "asl_curves": self._fig_asl()}
        if self.combined is not None:
            figs["user_vs_system"] = self._fig_combined()
        return figs

    def summary(self) -> str:
        """The ten most dependable formulations (with their bias when calibrated), as text.

        Returns
        -------
        str
        """
        shown = self.combined if self.combined is not None else self.gstudy
        cols = [c for c in ("formulation", *self.bias_columns, "phi", "erho2", "topics_for_phi") if c in shown.columns]
        on = ", on SIMULATED runs" if self.simulated else ""
        return (f"<ReliabilityResult: {len(self.gstudy)} formulations{on}>\n\n"
                + shown[cols].sort_values("phi", ascending=False).head(10)
                .to_string(index=False, float_format=lambda v: f"{v:.4f}"))


    def plot(self, ax=None):
        """Dependability Phi against the number of topics (D-study), one panel per discount,
        one line per gain.

        Parameters
        ----------
        ax : array of matplotlib Axes, optional
            One per discount (and one for the measures beyond DCG); a new figure when omitted.

        Returns
        -------
        matplotlib.figure.Figure
        """
        return self._fig_phi(ax)

    def _fig_phi(self, ax=None):
        return self._by_discount(
            self.dstudy, lambda d: (d["topics"].to_numpy(), d["phi"].to_numpy()),
            self._title("Dependability Phi against topic-set size (D-study)"), "topics (log scale)", "Phi", ylim=(0, 1),
            xlog=True, ax=ax)

    def _fig_asl(self):
        return self._by_discount(
            self.asl, lambda d: (np.arange(1, len(d) + 1), np.sort(d["asl"].to_numpy())),
            self._title("ASL curves (Sakai's paired bootstrap): the lower, the more pairs told apart"),
            "system pairs sorted by ASL", "achieved significance level", ylim=(0, 1), level=0.05)

    def _by_discount(self, table, xy, title, xlabel, ylabel, ylim=None, level=None, xlog=False, ax=None):
        """Small multiples: one panel per discount, one line per gain in the gain's colour
        (as in the calibration figures), the measures beyond DCG in a last panel; 36 lines in
        one panel cannot be told apart."""
        kinds = self.gstudy.set_index("formulation")[["gain", "discount"]]
        discounts = list(dict.fromkeys(kinds["discount"]))
        ncol = min(3, len(discounts))
        nrow = int(np.ceil(len(discounts) / ncol))
        fig, axes, new = panel_axes(ax, len(discounts), nrow, ncol, figsize=(4.4 * ncol, 3.4 * nrow + 0.8),
                                    sharex=True, sharey=True)
        gains = list(dict.fromkeys(kinds["gain"]))
        for i, (panel, disc) in enumerate(zip(axes.flat, discounts)):
            for f, d in table.groupby("formulation", sort=False):
                if kinds.loc[f, "discount"] != disc:
                    continue
                gain = kinds.loc[f, "gain"]
                x, y = xy(d)
                panel.plot(x, y, lw=1.4, color=gain_colour(gain, gains.index(gain)),
                           label=gain if disc else f)
            if level is not None:
                panel.axhline(level, color="0.5", ls=":", lw=1)
            panel.set_title(f"discount: {disc}" if disc else "other measures", fontsize=10)
            panel.grid(alpha=0.3)
            if xlog:
                panel.set_xscale("log")
            if ylim:
                panel.set_ylim(*ylim)
            if i >= len(discounts) - ncol:
                panel.set_xlabel(xlabel)
            if i % ncol == 0:
                panel.set_ylabel(ylabel)
            if not disc:
                panel.legend(fontsize=7, frameon=False)
        for panel in axes.flat[len(discounts):]:
            panel.set_visible(False)
        if not new:  # a caller's axes: the gains are named in the first panel instead
            axes.flat[0].legend(fontsize=7, frameon=False, title="gain")
            return fig
        named = next((p for p, d in zip(axes.flat, discounts) if d), axes.flat[0])
        handles, labels = named.get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=max(len(labels), 1), frameon=False, title="gain")
        fig.suptitle(title, fontsize=12)
        fig.tight_layout(rect=(0, 0.1, 1, 0.92 if "\n" in title else 0.95))
        return fig

    def _fig_combined(self):
        c = self.combined.merge(self.gstudy[["formulation", "gain", "discount"]], on="formulation")
        gains, discounts = list(dict.fromkeys(c["gain"])), list(dict.fromkeys(c["discount"]))
        markers = "os^vDPX*<>"
        fig, axes = new_figure(1, 3, figsize=(15, 4.8), sharey=True)
        from .analysis.ranking import ESTIMATOR_NAMES
        for ax, ind in zip(axes, self.bias_columns):
            for gi, g in enumerate(gains):
                for di, d in enumerate(discounts):
                    sel = c[(c["gain"] == g) & (c["discount"] == d)]
                    ax.scatter(sel[ind], sel["phi"], color=gain_colour(g, gi), marker=markers[di % len(markers)], s=30)
            best = c.nsmallest(3, ind)   # name the least biased only: the cloud stays readable
            for rank, r in enumerate(best.itertuples(), start=1):
                # a fixed list in the corner with leader lines: labels never overlap each other,
                # however close their points are
                ax.annotate(f"{rank}. {r.formulation}", (getattr(r, ind), r.phi), fontsize=7,
                            xytext=(0.03, 0.05 + 0.07 * (3 - rank)), textcoords="axes fraction",
                            bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "0.8", "alpha": 0.9},
                            arrowprops={"arrowstyle": "-", "color": "0.5", "lw": 0.6})
            ax.text(0.03, 0.27, "least biased", transform=ax.transAxes, fontsize=7, color="0.3")
            ax.set_xlabel(f"user-side bias {ind} (lower is better)")
            ax.grid(alpha=0.3)
        axes[0].set_ylabel("system-side Phi (higher is better)")
        from matplotlib.lines import Line2D
        handles = ([Line2D([], [], color=gain_colour(g, i), marker="o", ls="", label=f"gain {g}") for i, g in enumerate(gains)]
                   + [Line2D([], [], color="0.3", marker=markers[i % len(markers)], ls="", label=f"discount {d}")
                      for i, d in enumerate(discounts)])
        fig.legend(handles=handles, loc="center right", fontsize=8, frameon=False)
        # name the estimator: the calibration's ranking leads with it, and b1 and b1_std can
        # order the formulations differently
        fig.suptitle(self._title("User-side bias beside system-side dependability, per formulation\n"
                                 f"bias by the {ESTIMATOR_NAMES[self.estimator or 'paper']} "
                                 "(the calibration's ranking)"))
        fig.tight_layout(rect=(0, 0, 0.88, 0.86 if self.simulated else 0.9))
        return fig


def reliability_report(runs: Runs, judgments: Judgments, formulations, k: int = 10,
                       replicates: int = 1000, alpha: float = 0.05, target: float = 0.95,
                       seed: int = 0, calibration_bias: pd.DataFrame | None = None,
                       progress: bool = False) -> ReliabilityResult:
    """Every system-side indicator for every formulation, optionally beside user-side bias.

    Parameters
    ----------
    runs : Runs
    judgments : Judgments
    formulations : list of str or Formulation
    k : int, default 10
    replicates : int, default 1000
        Bootstrap replicates of the discriminative power.
    alpha : float, default 0.05
    target : float, default 0.95
        The dependability the D-study asks the topics for.
    seed : int, default 0
    calibration_bias : pandas.DataFrame, optional
        A calibration's ``bias`` table, shown beside reliability (``user_vs_system``).
    progress : bool, default False

    Returns
    -------
    ReliabilityResult

    Raises
    ------
    SatcalError
        ``runs`` is not a Runs or ``judgments`` not a Judgments (paths, say).
    """
    from tqdm.auto import tqdm
    if not isinstance(runs, Runs):
        raise SatcalError(f"runs must be a Runs: read the run files with satcal.read_runs(paths), "
                          f"got {type(runs).__name__}")
    require_judgments(judgments)
    check_seed(seed)   # before the scoring, not in NumPy at the first resample
    forms = resolve_formulations(formulations)
    scores, systems, queries = score_matrix(runs, judgments, forms, k)
    g_rows, d_frames, disc_rows, asl_frames, bv_frames, means = [], [], [], [], [], {}
    n_topics = len(queries)
    grid = np.unique(np.linspace(1, max(2 * n_topics, 10), 40).astype(int))
    for f, x in tqdm(list(zip(forms, scores)), desc="reliability", disable=not progress):
        g = g_study(x)
        d = d_study(g, target=target, alpha=alpha).iloc[0]
        g_rows.append({"formulation": f.id, "gain": f.labels["gain"], "discount": f.labels["discount"],
                       "normalization": f.normalization, "negatives": f.negatives,
                       "systems": g.n_systems, "topics": g.n_topics, "var_system": g.var_system,
                       "var_topic": g.var_topic, "var_residual": g.var_residual,
                       **{c: d[c] for c in ("erho2", "erho2_lo", "erho2_hi", "phi", "phi_lo", "phi_hi",
                                            "topics_for_erho2", "topics_for_phi")}})
        d_frames.append(d_study(g, grid, target, alpha).assign(formulation=f.id))
        asl = discriminative_power(x, systems, replicates, alpha, seed)
        asl_frames.append(asl.assign(formulation=f.id))
        disc_rows.append({"formulation": f.id, "pairs": len(asl),
                          "discriminative_power": float(asl["significant"].mean()) if len(asl) else np.nan})
        bv_frames.append(buckley_voorhees(x, seed=seed).assign(formulation=f.id))
        means[f.id] = x.mean(axis=1)
    result = ReliabilityResult(pd.DataFrame(g_rows), pd.concat(d_frames, ignore_index=True),
                               pd.DataFrame(disc_rows), pd.concat(asl_frames, ignore_index=True),
                               pd.concat(bv_frames, ignore_index=True), kendall_matrix(means))
    return result if calibration_bias is None else result.beside(calibration_bias)
