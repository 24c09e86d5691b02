"""Tests of the gain and discount effects that respect the shared answers.

The 36 bias estimates of a study are computed from one set of answers, so they are strongly
correlated: an ordinary ANOVA F test over them (value ~ gain + discount, as if the 36 values
were independent observations) takes the residual mean square as the noise of the gain means,
which it is not, and rejects an exact null almost always (98% in our simulation,
docs/benchmarks.md). The test here uses the bootstrap replicates instead.

For an effect with levels g = 1..G (gain: G = 6), theta is the vector of the formulations'
point estimates, m_g the mean of theta over the formulations at level g, and C the G x F
matrix that maps theta to the deviations m_g - mean_g(m_g) (G - 1 independent contrasts).
With Sigma the covariance of the bootstrap replicates of theta (resampling the answers, so it
holds every correlation between formulations), estimated by the rule every bootstrap standard
error follows (:func:`~satcal.analysis.bootstrap.robust_cov`: the orthogonalised
Gnanadesikan-Kettenring covariance with the replicates' normalised IQR as scale, Maronna and
Zamar 2002; for one contrast it is robust_se^2, the pairwise table's), so that a few wild
k-step replicates do not inflate it and the tests agree with the standard errors beside them,

    W = (C theta)' (C Sigma C')^+ (C theta)  ~  chi2(q),  q = rank(C Sigma C'),  under "no effect",

a Wald test with a bootstrap covariance (Wald 1943; Cameron and Trivedi 2005, Microeconometrics,
Cambridge University Press, sec. 11.2.4, "bootstrap estimate of the variance in a Wald test").
``W`` is computed in the orthonormal basis of the contrasts that ``effect_contrasts`` gives,
where C Sigma C' is invertible. The robust covariance is not equivariant under a change of basis,
so W is defined for that fixed basis (random rotations of the same contrasts gave 2.24-2.46 where
this basis gives one of them; with np.cov every basis would agree). Sigma is itself estimated from B
replicates; Hotelling's T^2 distribution accounts for that Monte-Carlo error (Hotelling 1931,
Ann. Math. Statist.): the p-value is P(F(q, B - q) > F) with

    F = W (B - q) / ((B - 1) q),

which tends to the chi2(q) test as B grows (at B = 1000 and q = 5 they differ by < 1% in F;
at B = 50 the chi2 test would reject a true null about 9% of the time instead of 5%).

Sigma is also estimated from only G independent units however large B is: the G workers (or
examples) the bootstrap resamples. With few clusters a cluster-robust Wald statistic is
referred to an F distribution with G - 1 denominator degrees of freedom (Cameron and Miller
2015, "A practitioner's guide to cluster-robust inference", Journal of Human Resources 50(2),
sec. VI.D; Bell and McCaffrey 2002). Both limits are applied through one Hotelling form with
nu = min(B, G) - 1:

    F = W (nu + 1 - q) / (nu q)  ~  F(q, nu + 1 - q).

Under an exact null with 51 workers (``benchmarks/bench_effects_null.py``) the uncorrected
test rejected b3's null 9% of the time at 5%.

The table keeps the descriptive sums of squares of the additive model (sequential, as
statsmodels' ``anova_lm(typ=1)``) and eta squared = SS_term / SS_total, with a percentile
interval from the same sums recomputed on every replicate.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy.linalg import null_space
from scipy.stats import f as f_dist

from .bootstrap import robust_cov

__all__ = ["COLUMNS", "TEST_NAME", "NO_BOOTSTRAP_NOTE", "effects_table", "wald_test",
           "effect_contrasts", "sequential_sums_of_squares", "bootstrap_replicates"]

#: Columns of ``anova.csv``: the paper's eight, then the interval, the test and a note.
COLUMNS = ["indicator", "term", "df", "sum_sq", "mean_sq", "F", "p", "eta_sq", "eta_sq_lo",
           "eta_sq_hi", "wald", "test", "note"]
TEST_NAME = "bootstrap Wald (Hotelling F)"
NO_BOOTSTRAP_NOTE = ("no test without bootstrap replicates: the estimates share their answers, so "
                     "an F test over them is invalid; run with --bootstrap")
LEVEL = 0.95


def effect_contrasts(levels: Sequence) -> np.ndarray:
    """Orthonormal contrasts of the level means: (G - 1, n) matrix C.

    Row space = {x : x = K A}, where A (G x n) averages the rows at each level and K spans the
    vectors orthogonal to (1, ..., 1) in R^G: C theta = 0 exactly when every level mean equals
    the grand mean of the level means.

    Parameters
    ----------
    levels : sequence
        The factor's level of each of the n estimates (e.g. each formulation's gain).

    Returns
    -------
    numpy.ndarray, shape (G - 1, n)
    """
    codes, uniques = pd.factorize(pd.Series(list(levels)), sort=True)
    g = len(uniques)
    onehot = np.zeros((g, codes.size))
    onehot[codes, np.arange(codes.size)] = 1.0
    means = onehot / onehot.sum(axis=1, keepdims=True)            # A: the level means
    basis = null_space(np.ones((1, g))).T                          # K: (G - 1, G), orthonormal
    return basis @ means


def wald_test(estimate: np.ndarray, replicates: np.ndarray, contrasts: np.ndarray,
              clusters: int | None = None):
    """Wald test of C theta = 0 with the replicates' robust covariance (module docstring).

    Parameters
    ----------
    estimate : (F,) point estimates theta.
    replicates : (B, F) bootstrap replicates of theta; rows with a missing value are dropped.
    contrasts : (q, F) contrast matrix C.
    clusters : int, optional
        The independent units the bootstrap resampled (G); None: only B limits the
        covariance's precision.

    Returns
    -------
    wald, f, df, b, p : float, float, int, int, float
        W; the F statistic W (nu + 1 - df) / (nu df) with nu = min(b, G) - 1; ``df`` the rank
        of C Sigma C' (q when the contrasts are independent); ``b`` the complete replicates
        used; p = P(F(df, nu + 1 - df) > f). NaN (and df 0) when fewer than q + 2 complete
        replicates, or clusters, exist.

    References
    ----------
    Wald, A. (1943). Tests of statistical hypotheses concerning several parameters when the
    number of observations is large. Transactions of the American Mathematical Society 54(3),
    426-482.

    Hotelling, H. (1931). The generalization of Student's ratio. Annals of Mathematical
    Statistics 2(3), 360-378.

    Cameron, A. C. and Trivedi, P. K. (2005). Microeconometrics: Methods and Applications.
    Cambridge University Press, section 11.2.4 (the bootstrap covariance in a Wald test).

    Cameron, A. C. and Miller, D. L. (2015). A practitioner's guide to cluster-robust
    inference. Journal of Human Resources 50(2), 317-372, section VI.D (few clusters).

    Bell, R. M. and McCaffrey, D. F. (2002). Bias reduction in standard errors for linear
    regression with multi-stage samples. Survey Methodology 28(2), 169-181.
    """
    reps = np.asarray(replicates, float)
    reps = reps[np.isfinite(reps).all(axis=1)]
    c = np.asarray(contrasts, float)
    b = reps.shape[0]
    units = b if clusters is None else min(b, int(clusters))
    if units < c.shape[0] + 2:
        return np.nan, np.nan, 0, b, np.nan
    ct = c @ np.asarray(estimate, float)
    v = robust_cov(reps @ c.T)   # stands for C Sigma C' in this basis (module docstring)
    vals, vecs = np.linalg.eigh(v)
    keep = vals > vals.max() * 1e-10 if vals.max() > 0 else np.zeros(vals.size, bool)
    df = int(keep.sum())
    if df == 0:
        return np.nan, np.nan, 0, b, np.nan
    z = vecs[:, keep].T @ ct
    w = float(np.sum(z ** 2 / vals[keep]))
    f = w * (units - df) / ((units - 1) * df)
    return w, f, df, b, float(f_dist.sf(f, df, units - df))


def sequential_sums_of_squares(y: np.ndarray, factors: Mapping[str, Sequence]) -> dict:
    """Sequential (type I) sums of squares of y ~ factor_1 + factor_2 + ..., for many y at once.

    SS_term = ||(H_k - H_{k-1}) y||^2 with H_k the hat matrix of the intercept and the first k
    factors (dummy coded), the residual ||(I - H_K) y||^2: the numbers of statsmodels'
    ``anova_lm(typ=1)`` for any design.

    Parameters
    ----------
    y : numpy.ndarray, shape (n,) or (B, n)
    factors : mapping of str to sequence
        Each factor's level per observation, in the order they enter.

    Returns
    -------
    dict of str to (ss, df)
        ``Residual`` last; ``ss`` has y's leading shape.
    """
    y = np.atleast_2d(np.asarray(y, float))
    n = y.shape[1]
    columns = [np.ones((n, 1))]
    fitted_prev = y.mean(axis=1, keepdims=True) * np.ones((1, n))
    rank_prev = 1
    out = {}
    for name, levels in factors.items():
        codes = pd.factorize(pd.Series(list(levels)), sort=True)[0]
        columns.append(np.eye(codes.max() + 1)[codes][:, 1:])
        u, sv, _ = np.linalg.svd(np.concatenate(columns, axis=1), full_matrices=False)
        rank = int((sv > sv.max() * 1e-10).sum())
        q = u[:, :rank]                                    # orthonormal basis of the model space
        fitted = (y @ q) @ q.T
        out[name] = (((fitted - fitted_prev) ** 2).sum(axis=1), rank - rank_prev)
        fitted_prev, rank_prev = fitted, rank
    out["Residual"] = (((y - fitted_prev) ** 2).sum(axis=1), n - rank_prev)
    return out


def bootstrap_replicates(boot) -> tuple[list[str], dict[str, np.ndarray]]:
    """The formulations and the (B, F) replicates of every indicator a bootstrap holds.

    Parameters
    ----------
    boot : BootstrapResult
        b1, b2, b3 from ``indicators`` (B, F, 3) and the joint model's ``b1_joint, b2_joint``
        (and ``b3_joint`` when present) from ``joint["indicators"]``.

    Returns
    -------
    formulations : list of str
    replicates : dict of str to numpy.ndarray, shape (B, F)
    """
    reps = {name: boot.indicators[:, :, k] for k, name in enumerate(("b1", "b2", "b3"))}
    joint = getattr(boot, "joint", None)
    if joint is not None and joint.get("indicators") is not None:
        ind = joint["indicators"]
        names = joint.get("names") or ["b1_joint", "b2_joint", "b3_joint"][:ind.shape[2]]
        reps.update({name: ind[:, :, k] for k, name in enumerate(names)})
        if joint.get("std_indicators") is not None:
            reps.update({name: joint["std_indicators"][:, :, k]
                         for k, name in enumerate(("b1_std", "b2_std", "b3_std"))})
    return list(boot.formulations), reps


def effects_table(bias: pd.DataFrame, indicators: Sequence[str] | None = None, bootstrap=None,
                  formulations: Sequence[str] | None = None,
                  replicates: Mapping[str, np.ndarray] | None = None,
                  clusters: int | None = None) -> pd.DataFrame:
    """Sums of squares, eta squared and the bootstrap Wald test of the gain and discount effects.

    Parameters
    ----------
    bias : DataFrame
        One row per formulation with ``formulation, gain, discount`` and the indicators; the
        rows of a complete gain x discount grid are used (as the crossed design).
    indicators : list of str, optional
        Default: b1, b2, b3 and whichever of b1_joint, b2_joint, b3_joint, b1_std, b2_std,
        b3_std ``bias`` holds.
    bootstrap : BootstrapResult, optional
        Its replicates give the test (:func:`bootstrap_replicates`). Alternatively pass
        ``formulations`` (the order of the replicates' columns) and ``replicates``
        (indicator -> (B, F)).
    formulations : sequence of str, optional
        Without ``bootstrap``: the formulation id of each column of ``replicates``; every
        formulation of the crossed grid must be among them, else no test is made.
    replicates : mapping of str to numpy.ndarray, shape (B, F), optional
        Without ``bootstrap``: the bootstrap replicates of each indicator, one column per
        entry of ``formulations``; replicates with a non-finite value are dropped, and fewer
        than 2 left means no test for that indicator.
    clusters : int, optional
        The independent units the replicates resampled (default: the bootstrap's own count);
        the test's denominator degrees of freedom are min(B, clusters) - q.

    Returns
    -------
    DataFrame with :data:`COLUMNS`. Per indicator one row per term and a ``Residual`` row.
    ``wald`` = W, ``F`` = W (B - df) / ((B - 1) df) and ``p`` = P(F(df, B - df) > F) (the
    test of the module docstring; ``F`` is *not* the OLS F ratio, which is not a valid test
    here). ``eta_sq_lo, eta_sq_hi``: 95% percentile interval of eta squared over the
    replicates. Without replicates ``F``, ``wald``, ``p``, ``test`` and ``note`` are empty (why is
    :data:`NO_BOOTSTRAP_NOTE`, which the report says once).
    The ``Residual`` row holds df, sum_sq, mean_sq and eta_sq (the share no main effect
    explains, with its interval) and no test.

    References
    ----------
    Wald, A. (1943). Tests of statistical hypotheses concerning several parameters when the
    number of observations is large. Transactions of the American Mathematical Society 54(3),
    426-482 (the test; :func:`wald_test` lists the corrections' sources).
    """

    if bootstrap is not None:
        formulations, replicates = bootstrap_replicates(bootstrap)
        clusters = clusters if clusters is not None else getattr(bootstrap, "clusters", None)
    if indicators is None:
        indicators = ["b1", "b2", "b3"] + [c for c in ("b1_joint", "b2_joint", "b3_joint", "b1_std",
                                                        "b2_std", "b3_std") if c in bias.columns]
    grid = crossed_design(bias)
    terms = [t for t in ("gain", "discount") if grid[t].nunique() > 1]
    if not terms or len(grid) <= sum(grid[t].nunique() - 1 for t in terms) + 1:
        return pd.DataFrame(columns=COLUMNS)
    factors = {t: grid[t].tolist() for t in terms}
    cols = None
    if replicates is not None and formulations is not None:
        where = {f: i for i, f in enumerate(formulations)}
        if all(f in where for f in grid["formulation"]):
            cols = np.array([where[f] for f in grid["formulation"]])
    rows = []
    for ind in indicators:
        if ind not in grid.columns:
            continue
        y = grid[ind].to_numpy(float)
        ss = sequential_sums_of_squares(y, factors)
        total = sum(v[0][0] for v in ss.values())
        reps = None
        if cols is not None and replicates.get(ind) is not None:
            reps = np.asarray(replicates[ind], float)[:, cols]
            reps = reps[np.isfinite(reps).all(axis=1)]
            if reps.shape[0] < 2:
                reps = None
        if reps is not None:
            ss_b = sequential_sums_of_squares(reps, factors)
            total_b = sum(v[0] for v in ss_b.values())
        for term, (s, df) in ss.items():
            row = {"indicator": ind, "term": term, "df": int(df), "sum_sq": float(s[0]),
                   "mean_sq": float(s[0] / df) if df > 0 else np.nan, "F": np.nan, "p": np.nan,
                   "eta_sq": float(s[0] / total) if total > 0 else np.nan, "eta_sq_lo": np.nan,
                   "eta_sq_hi": np.nan, "wald": np.nan, "test": "", "note": ""}
            if reps is not None:
                with np.errstate(invalid="ignore", divide="ignore"):
                    eta_b = ss_b[term][0] / total_b
                eta_b = eta_b[np.isfinite(eta_b)]
                if eta_b.size:
                    row["eta_sq_lo"], row["eta_sq_hi"] = np.percentile(
                        eta_b, [(1 - LEVEL) / 2 * 100, (1 + LEVEL) / 2 * 100])
            # without replicates p stays NaN and the note is left empty: it would be the same
            # sentence on every row (the report says NO_BOOTSTRAP_NOTE once)
            if term != "Residual" and reps is None and replicates is not None:
                row["note"] = "no test: fewer than 2 complete replicates, or they miss a formulation of the grid"
            if term != "Residual" and reps is not None:
                w, f, df_w, b, p = wald_test(y, reps, effect_contrasts(factors[term]), clusters)
                units = b if clusters is None else min(b, int(clusters))
                note = f"{b} replicates of {clusters if clusters is not None else b} units; F on ({df_w}, {units - df_w}) df"
                if df_w == 0:
                    note = f"{b} complete replicates, {units} units: too few, or no variation, for the test"
                elif df_w != df:
                    note += "; the contrasts' bootstrap covariance has a smaller rank"
                row.update(wald=w, F=f, p=p, test=TEST_NAME, note=note)
            rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


def anova_table(bias: pd.DataFrame, indicators: Sequence[str] | None = None,
                bootstrap=None) -> pd.DataFrame:
    """Effects of gain and discount per indicator: sums of squares, eta^2 and a valid test.

    Over the DCG family only: measures beyond DCG (ERR, RR, AP, P) have no gain x discount
    structure and are left out. The estimates share their answers, so ``p`` comes from the
    bootstrap Wald test of :mod:`satcal.analysis.effects` and is empty without ``bootstrap``
    (a :class:`~satcal.analysis.bootstrap.BootstrapResult`); ``indicators`` defaults to b1-b3
    and the joint model's indicators present in ``bias``.

    Parameters
    ----------
    bias : pandas.DataFrame
        The bias table of a calibration.
    indicators : sequence of str or None, optional
        Indicator columns; None takes the defaults above.
    bootstrap : satcal.analysis.bootstrap.BootstrapResult or None, optional
        For the p values.

    Returns
    -------
    pandas.DataFrame
    """
    return effects_table(bias, indicators, bootstrap=bootstrap)


def crossed_design(bias: pd.DataFrame) -> pd.DataFrame:
    """The rows of the largest complete gain x discount grid of the DCG family.

    An extra formulation outside the grid (``lin-geo0.8`` beside the 36) or a measure beyond
    DCG would unbalance the two-way design, so the ANOVA leaves them out.

    Parameters
    ----------
    bias : pandas.DataFrame
        The bias table, with ``gain`` and ``discount`` (and ``family`` when present).

    Returns
    -------
    pandas.DataFrame
    """
    if "family" in bias.columns:
        bias = bias[bias["family"] == "dcg"]
    per_discount = bias.groupby("discount")["gain"].nunique()
    discounts = per_discount.index[per_discount == per_discount.max()] if len(bias) else []
    bias = bias[bias["discount"].isin(discounts)]
    per_gain = bias.groupby("gain")["discount"].nunique()
    gains = per_gain.index[per_gain == len(discounts)] if len(bias) else []
    return bias[bias["gain"].isin(gains)]
