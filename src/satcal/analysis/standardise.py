"""The standardised per-list estimand: indicators over a reference population of lists.

The per-list s_f(phi) of one formulation f is the satisfaction of a list *averaged over the lists
that share the score phi under f*. For a formulation users do not follow, lists with the same
phi_f differ in what users see, so s_f depends on which lists the design holds: two designs on
the same users rank formulations differently (Spearman 0.92 on the ECIR 2015 judgments). Direct
standardisation (as epidemiology standardises rates to a reference population; Keiding and
Clayton 2014, "Standardization and control for confounding in observational studies: a
historical perspective", Statistical Science 29(4)) removes that dependence:

1. a *satisfaction model of lists* is fitted from all answers: S(list) = sum_g w_g s_g(phi_g(list)),
   the per-list curves s_g of the joint model mixed with Akaike weights
   w_g = exp(l_g - max l) / sum exp(l - max l) (every joint model has the same 7 parameters, so
   this is the log-likelihood; with thousands of answers the weight sits on the best-fitting
   formulation);
2. a *reference population* of lists is drawn from the judgments alone (:func:`reference_lists`):
   for each query, lists whose level at each rank is drawn uniformly among the levels the
   query's pool still holds (then a document of that level, without replacement), so every
   query contributes equally and phi spans its reachable range;
3. for each formulation f, the standardised curve s*_f(phi) is the quadratic logit fitted to
   S over the reference lists' phi_f (a fractional-response logit: Papke and Wooldridge 1996,
   "Econometric methods for fractional response variables", Journal of Applied Econometrics
   11(6)), and b1_std, b2_std its b1 and b2;
4. reference *pairs* are the reference lists paired at random within their query; each pair's
   probability of an answer preferring its higher-phi_f list comes from the fitted answer
   process (the joint model of :mod:`satcal.analysis.joint`: S of both lists, and pi, delta, lambda of the joint models, mixed with the
   same weights), the quadratic logit of it on |dphi_f| is the standardised preference curve
   P*_f(d), and b3_std the mean of 1 - P*_f (the paper's b3 of an infinitely large study of the
   reference pairs answered as the model says; ties count as no agreement, as in the paper).

Two designs on the same judgments share the reference population, so they estimate the same
numbers; only the fit of S differs between them. The estimand is defined relative to the
reference population (recorded in ``calibration.json``): another population, e.g. lists real
systems produce, weighs the patterns otherwise and can rank formulations otherwise.
"""
from __future__ import annotations

import numpy as np
from scipy.special import expit

from ..measures import score_lists
from .core import GRID, bias_indicators, design, fit_logit_batch

__all__ = ["reference_lists", "reference_scores", "REFERENCE_RULE", "akaike_weights",
           "standardised_curves", "standardised_indicators"]

#: The reference population's definition, in the words calibration.json records.
REFERENCE_RULE = ("for each judged query, lists of k documents whose level at each rank is drawn "
                  "uniformly among the levels the query's pool still holds, then a document of that "
                  "level without replacement (empty ranks when the pool runs out)")
#: Reference lists drawn in all (spread evenly over the queries, at least 10 per query).
REFERENCE_SIZE = 10000
#: Logit rows fitted at once in the bootstrap (replicates x formulations x distinct lists).
BLOCK_ROWS = 4_000_000


def reference_lists(judgments, k: int, size: int = REFERENCE_SIZE, seed: int = 0):
    """The reference population's lists, drawn from the judgments alone (:data:`REFERENCE_RULE`).

    Parameters
    ----------
    judgments : Judgments
    k : int
        Positions of a list.
    size : int
        Lists in all; each query gets ceil(size / queries), at least 10.
    seed : int

    Returns
    -------
    levels : (N, k) float array (NaN at an empty rank), query_index : (N,) int, pools : list
        of each query's judged levels (for pool-normalised formulations).
    """
    rng = np.random.default_rng(seed)
    pools = judgments.pools()
    names = list(pools)
    per_query = max(10, -(-size // max(len(names), 1)))
    per_query += per_query % 2   # lists 2i and 2i + 1 of a query form a reference pair
    blocks, index = [], []
    for q, name in enumerate(names):
        pool = np.asarray(pools[name])
        values, counts = np.unique(pool, return_counts=True)
        left = np.tile(counts, (per_query, 1))
        out = np.full((per_query, k), np.nan)
        for rank in range(k):
            # a uniform choice among the levels with documents left: argmax of uniform keys
            keys = rng.random(left.shape) * (left > 0)
            pick = np.argmax(keys, axis=1)
            has = keys.max(axis=1) > 0
            out[has, rank] = values[pick[has]]
            left[np.flatnonzero(has), pick[has]] -= 1
        blocks.append(out)
        index.append(np.full(per_query, q))
    if not blocks:
        return np.zeros((0, k)), np.zeros(0, int), []
    return np.concatenate(blocks), np.concatenate(index), [np.asarray(pools[n]) for n in names]


def reference_scores(judgments, forms, k: int, n_levels: int, size: int = REFERENCE_SIZE,
                     seed: int = 0) -> np.ndarray:
    """phi of the reference lists under each formulation, (N, F), scored as the study's lists
    are (pool-normalised formulations against the query's pool).

    Parameters
    ----------
    judgments : satcal.judgments.Judgments
        The judgments the reference lists are drawn from.
    forms : list of Formulation
        The formulations.
    k : int
        List length.
    n_levels : int
        Levels of the scale.
    size : int, optional
        Reference lists (default ``REFERENCE_SIZE``).
    seed : int, optional
        Seed of the draw (default 0).

    Returns
    -------
    numpy.ndarray
        (N, F).
    """
    levels, qi, pools = reference_lists(judgments, k, size, seed)
    kwargs = {"n_levels": n_levels}
    if any(getattr(f, "uses_pool", False) for f in forms):
        kwargs.update(pools=pools, query_index=qi)
    return score_lists(levels, forms, **kwargs)


def akaike_weights(loglik) -> np.ndarray:
    """exp(l - max l) / sum exp(l - max l) over the formulations' joint models.

    Parameters
    ----------
    loglik : array_like
        Log-likelihood of each formulation's joint model; a non-finite one gets weight 0.

    Returns
    -------
    numpy.ndarray
        Weights summing to 1 (all 0 when none is finite).
    """
    ll = np.asarray(loglik, float)
    ok = np.isfinite(ll)
    w = np.zeros_like(ll)
    if ok.any():
        w[ok] = np.exp(ll[ok] - ll[ok].max())
        w /= w.sum()
    return w


def _s(theta_b, phi):
    """s(phi) = expit(b0 + b1 phi + b2 phi^2); ``theta_b`` (..., 3+), ``phi`` (N,) -> (..., N)."""
    b = np.asarray(theta_b)[..., :3, None]
    return expit(b[..., 0, :] + b[..., 1, :] * phi + b[..., 2, :] * phi ** 2)


#: Scores are grouped to this many decimals before the standardised fits: the fractional
#: logit's likelihood is linear in the outcome, so lists sharing a score enter as one row with
#: their mean S and count (exact for equal scores; a 5e-4 shift of phi at most otherwise), and a
#: fit costs at most 1,001 rows whatever the reference population's size.
DECIMALS = 3


def _groups(x: np.ndarray):
    """Per formulation (rows of ``x``, (F, N)), its distinct rounded scores: padded values
    (F, M), counts (F, M) (0 = padding) and the (M, N) averaging matrix of each formulation."""
    from scipy.sparse import csr_matrix
    x = np.round(np.nan_to_num(np.asarray(x, float), nan=0.0), DECIMALS)
    parts = [np.unique(row, return_inverse=True, return_counts=True) for row in x]
    m = max(len(u) for u, _, _ in parts)
    values, counts, mats = np.zeros((x.shape[0], m)), np.zeros((x.shape[0], m)), []
    for f, (u, inv, c) in enumerate(parts):
        values[f, :u.size], counts[f, :u.size] = u, c
        inv = inv.ravel()
        mats.append(csr_matrix((1.0 / c[inv], (inv, np.arange(inv.size))), shape=(m, inv.size)))
    return values, counts, mats


def _fit_grouped(groups, Y) -> np.ndarray:
    """Quadratic logits of Y (..., F, N) on the grouped scores: (..., F, 3)."""
    values, counts, mats = groups
    F, m = values.shape
    lead = Y.shape[:-2]
    flat = Y.reshape(-1, F, Y.shape[-1])
    Yg = np.stack([(mats[f] @ flat[:, f, :].T).T for f in range(F)], axis=1)   # (L, F, M)
    X = np.broadcast_to(design(values), (flat.shape[0], F, m, 3)).reshape(-1, m, 3)
    W = np.broadcast_to(counts, (flat.shape[0], F, m)).reshape(-1, m)
    beta, _ = fit_logit_batch(X, Yg.reshape(-1, m), W)
    return beta.reshape(tuple(lead) + (F, 3))


def standardised_curves(thetas, ref_phi, weights, grid=GRID, groups=None):
    """s*_f on ``grid`` for every formulation, (F, G) or (B, F, G) for (B, F, 7) replicates,
    and the coefficients (..., F, 3). S of a reference list is the weighted mixture of the
    joint models' s_g (models of zero weight are skipped).

    Parameters
    ----------
    thetas : array_like
        Joint-model parameters, (F, 7), or (B, F, 7) replicates.
    ref_phi : numpy.ndarray
        Reference lists' scores, (N, F).
    weights : array_like
        Model weights, (F,) (:func:`akaike_weights`).
    grid : numpy.ndarray, optional
        Where the curves are evaluated (default ``GRID``).
    groups : tuple or None, optional
        The reference scores' groups (what ``_groups`` returns for them), when computed
        already; None computes them.

    Returns
    -------
    tuple of (numpy.ndarray, numpy.ndarray)
        The curves and the coefficients.
    """
    thetas = np.asarray(thetas, float)
    F, lead = ref_phi.shape[1], thetas.shape[:-2]
    S = 0.0
    for g in np.flatnonzero(np.asarray(weights) > 0):
        S = S + weights[g] * _s(thetas[..., g, :], ref_phi[:, g])   # (..., N)
    S = S / np.sum(np.asarray(weights)[np.asarray(weights) > 0])
    Y = np.broadcast_to(np.asarray(S)[..., None, :], tuple(lead) + (F, ref_phi.shape[0]))
    beta = _fit_grouped(groups or _groups(ref_phi.T), Y)
    return expit(beta @ design(grid).T), beta


def _agreement(thetas, x, y, weights) -> np.ndarray:
    """For each formulation f and reference pair (x, y: (P, F) scores of its two lists), the
    model's probability that an answer prefers the pair's higher-phi_f list (0 at a tie):
    (..., F, P) for thetas (..., F, 7).

    Under joint model g (weight w_g, its own s_g, pi_g, delta_g, lambda_g, scores phi_g):
    P(prefer X) = S_X (1 - S_Y)(1 - lambda) + S_Y (1 - S_X) lambda
    + [S_X S_Y + (1 - S_X)(1 - S_Y)] pi(|dphi_g|) t_X, with t_X = delta, 1 - delta or 1/2 as
    phi_g(X) is above, below or equal to phi_g(Y).
    """
    from .core import TIE_TOLERANCE
    d_f = np.where(np.abs(x - y) < TIE_TOLERANCE, 0.0, x - y).T   # (F, P)
    out, total = 0.0, 0.0
    for g in np.flatnonzero(np.asarray(weights) > 0):
        th = thetas[..., g, :]                                     # (..., 7)
        s_x, s_y = _s(th, x[:, g]), _s(th, y[:, g])                # (..., P)
        d_g = d_f[g]
        col = lambda i: th[..., i, None]
        delta, lapse = expit(col(5)), 0.5 * expit(col(6))
        same = s_x * s_y + (1 - s_x) * (1 - s_y)
        pi = expit(col(3) + col(4) * np.abs(d_g))
        to_x = np.where(d_g > 0, delta, np.where(d_g < 0, 1 - delta, 0.5))
        pref_x = s_x * (1 - s_y) * (1 - lapse) + s_y * (1 - s_x) * lapse + same * pi * to_x
        pref_y = s_y * (1 - s_x) * (1 - lapse) + s_x * (1 - s_y) * lapse + same * pi * (1 - to_x)
        out = out + weights[g] * np.where(d_f > 0, pref_x[..., None, :],
                                          np.where(d_f < 0, pref_y[..., None, :], 0.0))
        total += weights[g]
    return out / total


def standardised_preference(thetas, ref_phi, weights, grid=GRID, groups=None) -> np.ndarray:
    """P*_f on ``grid`` for every formulation, (F, G) or (B, F, G): the quadratic logit of the
    model's agreement (:func:`_agreement`) over the reference pairs' |dphi_f| (lists 2i and
    2i + 1 of the reference population).

    Parameters
    ----------
    thetas : array_like
        Joint-model parameters, (F, 7), or (B, F, 7) replicates.
    ref_phi : numpy.ndarray
        Reference lists' scores, (N, F).
    weights : array_like
        Model weights, (F,) (:func:`akaike_weights`).
    grid : numpy.ndarray, optional
        Where the curves are evaluated (default ``GRID``).
    groups : tuple or None, optional
        The reference scores' groups (what ``_groups`` returns for them), when computed
        already; None computes them.

    Returns
    -------
    numpy.ndarray
    """
    thetas = np.asarray(thetas, float)
    x, y = ref_phi[0::2], ref_phi[1::2]
    agree = _agreement(thetas, x, y, weights)
    beta = _fit_grouped(groups or _groups(np.abs(x - y).T), agree)
    return expit(beta @ design(grid).T)


def standardised_indicators(thetas, ref_phi, weights, sat_range=None, pref_range=None,
                            block: int | None = None) -> dict:
    """b1_std, b2_std, b3_std of every formulation: arrays (F,) from the joint models'
    parameters (F, 7) on the fitting scale, or (B, F) from (B, F, 7) bootstrap replicates
    (``block`` replicates at a time, to bound memory; default: :data:`BLOCK_ROWS` logit rows).
    The weights stay those of the full sample.

    Parameters
    ----------
    thetas : array_like
        Joint-model parameters, (F, 7), or (B, F, 7) replicates.
    ref_phi : numpy.ndarray
        Reference lists' scores, (N, F).
    weights : array_like
        Model weights, (F,).
    sat_range, pref_range : optional
        Ranges of phi and |dphi| the indicators average over
        (:func:`satcal.analysis.core.bias_indicators`).
    block : int or None, optional
        Replicates at a time.

    Returns
    -------
    dict
        ``b1_std``, ``b2_std``, ``b3_std``.
    """
    thetas = np.asarray(thetas, float)
    groups = (_groups(ref_phi.T), _groups(np.abs(ref_phi[0::2] - ref_phi[1::2]).T))
    if block is None:
        block = max(1, BLOCK_ROWS // max(ref_phi.shape[0] * ref_phi.shape[1], 1))
    if thetas.ndim == 3 and thetas.shape[0] > block:
        parts = [_indicators(thetas[i:i + block], ref_phi, weights, sat_range, pref_range, groups)
                 for i in range(0, thetas.shape[0], block)]
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    return _indicators(thetas, ref_phi, weights, sat_range, pref_range, groups)


def _indicators(thetas, ref_phi, weights, sat_range, pref_range, groups) -> dict:
    curves, _ = standardised_curves(thetas, ref_phi, weights, groups=groups[0])
    pref = standardised_preference(thetas, ref_phi, weights, groups=groups[1])
    ind = bias_indicators(curves, pref, sat_range=sat_range, pref_range=pref_range)
    return {"b1_std": ind["b1"], "b2_std": ind["b2"], "b3_std": ind["b3"]}
