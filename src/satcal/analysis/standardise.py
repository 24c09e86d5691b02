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
   w_g = exp(l_g - max l) / sum exp(l - max l) (every joint model has the same parameters, 8
   for the shared-effect model the analysis fits, so this is the log-likelihood; with thousands
   of answers the weight sits on the best-fitting formulation). A shared-effect model's s_g is
   its population-averaged curve, and in a reference pair both lists share the effect (the
   answer process integrated over v, as the model has it);
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
   same weights), the quadratic logit of it on |dphi_f| over the pairs f *orders*
   (|dphi_f| >= ``TIE_TOLERANCE``) is the standardised preference curve P*_f(d), and b3_std
   the mean of 1 - P*_f (the paper's b3 of an infinitely large study of the reference pairs f
   orders, answered as the model says). A pair f ties is no verdict of f's for users to agree
   with, and a point mass of zeros at |dphi| = 0 is not something a smooth quadratic logit can
   describe: fitted with them, the curves of formulations that tie many pairs (lin-const ties
   a fifth of the ECIR 2015 reference pairs) turned down. How often f ties is reported apart,
   as ``ties_std`` (:func:`reference_ties`), a property of f and the judgments alone. (The
   paper's own b3 keeps its convention, ties counting as no agreement.)

Two designs on the same judgments share the reference population, so they estimate the same
numbers; only the fit of S differs between them. The estimand is defined relative to the
reference population (recorded in ``calibration.json``): another population, e.g. lists real
systems produce, weighs the patterns otherwise and can rank formulations otherwise.
"""
from __future__ import annotations

import numpy as np
from scipy.special import expit

from .._threads import one_blas_thread
from ..measures import score_lists
from .core import GRID, bias_indicators, design, fit_logit_batch

__all__ = ["reference_lists", "reference_scores", "REFERENCE_RULE", "akaike_weights",
           "reference_ties", "standardised_curves", "standardised_indicators", "standardised_targets"]

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
    """exp(l - max l) / sum exp(l - max l) over the formulations' joint models (the last axis:
    (F,), or (B, F) for each bootstrap replicate's own log-likelihoods).

    Parameters
    ----------
    loglik : array_like
        Log-likelihood of each formulation's joint model; a non-finite one gets weight 0.

    Returns
    -------
    numpy.ndarray
        Weights summing to 1 along the last axis (all 0 where none is finite).
    """
    ll = np.asarray(loglik, float)
    ok = np.isfinite(ll)
    top = np.max(np.where(ok, ll, -np.inf), axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", over="ignore"):
        w = np.where(ok, np.exp(ll - np.where(np.isfinite(top), top, 0.0)), 0.0)
    total = w.sum(axis=-1, keepdims=True)
    return np.divide(w, total, out=np.zeros_like(w), where=total > 0)


#: Scores at which the shared-effect model's averaged curve is computed exactly before a cubic
#: spline gives it at every reference list (:func:`_s`).
SPLINE_POINTS = 257


def _s(theta_b, phi):
    """s(phi) = expit(b0 + b1 phi + b2 phi^2); ``theta_b`` (..., 3+), ``phi`` (N,) -> (..., N).
    With 8 parameters (the shared-effect model) the population-averaged E_v expit(... + v),
    v ~ N(0, tau^2) (:func:`satcal.analysis.joint.shared_moments`)."""
    theta_b = np.asarray(theta_b)
    b = theta_b[..., :3, None]
    eta = b[..., 0, :] + b[..., 1, :] * phi + b[..., 2, :] * phi ** 2
    if theta_b.shape[-1] < 8 or not np.any(theta_b[..., 7]):
        return expit(eta)
    from scipy.interpolate import CubicSpline
    from .joint import shared_curve
    # the averaged curve is smooth in phi: exact on SPLINE_POINTS scores, a cubic spline between
    # (within 1e-7 of the exact values in the tests), so the quadrature's cost does not grow
    # with the reference population
    phi = np.asarray(phi, float)
    ok = np.isfinite(phi)
    lo, hi = (float(phi[ok].min()), float(phi[ok].max())) if ok.any() else (0.0, 1.0)
    if ok.sum() <= SPLINE_POINTS or hi <= lo:
        return shared_curve(theta_b.reshape(-1, theta_b.shape[-1]), phi).reshape(eta.shape)
    x = np.linspace(lo, hi, SPLINE_POINTS)
    flat = theta_b.reshape(-1, theta_b.shape[-1])
    good = np.isfinite(flat).all(axis=1)                 # a failed replicate stays NaN
    out = np.full((flat.shape[0], phi.size), np.nan)
    if good.any():
        out[good] = CubicSpline(x, shared_curve(flat[good], x), axis=1)(phi)
    return out.reshape(eta.shape)


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


class _Layout:
    """The grouped rows of every formulation's standardised fit, laid end to end.

    Formulation f's rows are the distinct values of its rounded scores (:data:`DECIMALS`),
    rows ``starts[f]`` to ``starts[f + 1]``; each row carries its value, its count of lists and
    the formulation it belongs to. ``averaging(coef)`` is the sparse (N, R) matrix whose product
    with a (B, N) array of per-list outcomes gives each row's mean outcome (``coef[f, n]``
    multiplies list n's outcome in formulation f's fit: 1 for the curves, the side an answer
    would take for the preference curves).

    ``include`` (F, N), optional, leaves entries out of formulation f's fit: an excluded entry
    belongs to no row (not counted, zero in the averaging matrix). The preference curves leave
    out the pairs f ties, which f does not order. A formulation with no entry left keeps one
    row of count 0 (so every formulation has rows), and its fit is undefined (NaN).
    """

    def __init__(self, x: np.ndarray, include: np.ndarray | None = None):
        x = np.round(np.nan_to_num(np.asarray(x, float), nan=0.0), DECIMALS)   # (F, N)
        include = (np.ones(x.shape, bool) if include is None
                   else np.broadcast_to(np.asarray(include, bool), x.shape))
        values, counts, index, starts = [], [], [], [0]
        for row, inc in zip(x, include):
            u, inv, c = np.unique(row[inc], return_inverse=True, return_counts=True)
            if u.size == 0:          # nothing to fit: one empty row keeps the segments apart
                u, c = np.zeros(1), np.zeros(1, int)
            full = np.zeros(row.size, int)   # excluded entries point at the segment's first row,
            full[inc] = inv.ravel()          # with weight 0 (see ``averaging``)
            index.append(starts[-1] + full)
            values.append(u)
            counts.append(c)
            starts.append(starts[-1] + u.size)
        self.F, self.N = x.shape
        self.include = np.array(include)
        self.values, self.counts = np.concatenate(values), np.concatenate(counts).astype(float)
        self.starts = np.asarray(starts[:-1])
        self.seg = np.repeat(np.arange(self.F), np.diff(starts))
        self.index = np.stack(index)                                             # (F, N)
        self.X = design(self.values)                                             # (R, 3)

    def averaging(self, coef=None):
        """The (R, N) CSR matrix of the group means (transposed, for ``M @ Y.T``); excluded
        entries carry 0."""
        from scipy.sparse import csr_matrix
        data = np.ones((self.F, self.N)) if coef is None else np.asarray(coef, float)
        counts = self.counts[self.index]
        data = np.divide(data, counts, out=np.zeros((self.F, self.N)),
                         where=self.include & (counts > 0))
        cols = np.broadcast_to(np.arange(self.N), (self.F, self.N))
        keep = data != 0
        return csr_matrix((data[keep], (self.index[keep], cols[keep])),
                          shape=(self.values.size, self.N))

    def means(self, M, Y: np.ndarray) -> np.ndarray:
        """Group means (B, R) of per-list outcomes ``Y`` (B, N) through ``M`` (:meth:`averaging`)."""
        return np.ascontiguousarray((M @ np.ascontiguousarray(Y.T)).T)

    def start(self, Yg: np.ndarray) -> np.ndarray:
        """Every fit's intercept-only estimate, (B, F, 3)."""
        w = self.counts
        total = np.add.reduceat(w, self.starts)
        ybar = np.divide(np.add.reduceat(Yg * w, self.starts, axis=1), total,
                         out=np.full(Yg.shape[:1] + (self.F,), 0.5), where=total > 0)
        ybar = np.clip(ybar, 1e-6, 1 - 1e-6)
        beta = np.zeros(Yg.shape[:1] + (self.F, 3))
        beta[..., 0] = np.log(ybar / (1 - ybar))
        return beta

    def fit(self, Yg: np.ndarray, beta: np.ndarray, max_iter: int = 50, tol: float = 1e-10):
        """Quadratic logits of the group means ``Yg`` (B, R), case weights the counts: Newton
        with step-halving from ``beta`` (B, F, 3), every replicate and formulation at once
        (segment sums over the rows), each fit frozen once it meets the convergence rule of
        :func:`satcal.analysis.fits.fit_logit_batch`. Returns (B, F, 3), NaN for a
        formulation with no rows of positive count."""
        X, w, seg, starts = self.X, self.counts, self.seg, self.starts
        pairs = [(0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)]
        XX = np.stack([X[:, i] * X[:, j] for i, j in pairs])                 # (6, R)
        beta = np.array(beta, float)
        empty = np.add.reduceat(w, starts) == 0                              # (F,)
        beta[:, empty] = 0.0   # held there (zero weight, zero step), reported as NaN

        x1, x2 = X[:, 1], X[:, 2]

        def eta_of(b):
            """Linear predictors (B, R) at coefficients ``b`` (B, F, 3)."""
            return b[:, seg, 0] + b[:, seg, 1] * x1 + b[:, seg, 2] * x2

        def loglik(eta):
            """Each fit's log-likelihood (B, F)."""
            return np.add.reduceat(w * (Yg * eta - np.logaddexp(0.0, eta)), starts, axis=1)

        eta = eta_of(beta)
        ll = loglik(eta)
        active = np.ones(beta.shape[:2], bool)
        active[:, empty] = False
        for _ in range(max_iter):
            if not active.any():
                break
            mu = expit(eta)
            r, v = w * (Yg - mu), w * mu * (1 - mu)
            grad = np.stack([np.add.reduceat(r * X[:, k], starts, axis=1) for k in range(3)], -1)
            h = [np.add.reduceat(v * XX[i], starts, axis=1) for i in range(6)]
            hess = np.stack([np.stack([h[0], h[1], h[2]], -1), np.stack([h[1], h[3], h[4]], -1),
                             np.stack([h[2], h[4], h[5]], -1)], -2)             # (B, F, 3, 3)
            try:
                step = np.linalg.solve(hess + 1e-12 * np.eye(3), grad[..., None])[..., 0]
            except np.linalg.LinAlgError:   # a formulation whose scores all coincide
                step = (np.linalg.pinv(hess) @ grad[..., None])[..., 0]
            step[~active] = 0.0
            new = beta + step
            new_eta = eta_of(new)
            new_ll = loglik(new_eta)
            for _half in range(30):
                # a step that lowers the log-likelihood beyond its rounding error is halved
                worse = new_ll < ll - 1e-13 * (1 + np.abs(ll))
                if not worse.any():
                    break
                step[worse] /= 2
                new[worse] = beta[worse] + step[worse]
                new_eta = eta_of(new)
                new_ll = np.where(worse, loglik(new_eta), new_ll)
            done = np.abs(step).max(-1) < tol * (1 + np.abs(new).max(-1))
            done |= np.abs(new_ll - ll) < tol * 1e-3 * (1 + np.abs(new_ll))
            beta, ll, eta = new, new_ll, new_eta   # inactive fits took a zero step
            active &= ~done
        beta[:, empty] = np.nan
        return beta


def _active(weights):
    """The models the mixture uses and their weights renormalised, (K,) and (1, K), or (B, K)
    for per-replicate weights (B, F): those of weight at least 1e-12 of the largest (in some
    replicate); the rest move S by under 1e-11, and skipping them keeps the cost at the models
    the data support."""
    w = np.atleast_2d(np.asarray(weights, float))
    big = w > 1e-12 * np.max(w, axis=1, keepdims=True)
    keep = np.flatnonzero(big.any(axis=0) & (w > 0).any(axis=0))
    kept = w[:, keep]
    return keep, kept / kept.sum(axis=1, keepdims=True)


def _s_rows(theta_g, phi):
    """:func:`_s` of every row of ``theta_g`` (B, P), the rows equal to the first computed once:
    a batch that perturbs one model at a time (the criterion's ``std_gradients``) repeats the
    unperturbed parameters in most rows of every other model. Each row's values are those of
    :func:`_s` (it works row by row)."""
    same = (theta_g == theta_g[:1]).all(axis=1)
    if same.sum() <= 1:
        return _s(theta_g, phi)
    rows = np.flatnonzero(~same)
    part = _s(np.concatenate([theta_g[:1], theta_g[rows]]), phi)
    out = np.empty((theta_g.shape[0],) + part.shape[1:])
    out[same] = part[0]
    out[rows] = part[1:]
    return out


def _mixture_s(thetas, ref_phi, weights) -> np.ndarray:
    """S of every reference list, (B, N): the weighted mixture of the joint models' s_g."""
    S = 0.0
    keep, w = _active(weights)
    for k, g in enumerate(keep):
        S = S + w[:, k, None] * _s_rows(thetas[:, g, :], ref_phi[:, g])
    return np.broadcast_to(S, (thetas.shape[0], ref_phi.shape[0]))


def _pair_sides(thetas, x, y, weights):
    """The mixture's probabilities (B, P) that an answer prefers the first list of each
    reference pair and that it prefers the second (:func:`_agreement` before it is read per
    formulation: which list is the higher-phi_f one is all that depends on f)."""
    from .core import TIE_TOLERANCE
    from .joint import shared_moments
    to_x_all, to_y_all = 0.0, 0.0
    keep, w = _active(weights)
    for k, g in enumerate(keep):
        wg = w[:, k, None]
        th = thetas[:, g, :]
        d_g = np.where(np.abs(x[:, g] - y[:, g]) < TIE_TOLERANCE, 0.0, x[:, g] - y[:, g])
        col = lambda i: th[:, i, None]
        # E s_X, E s_Y and E s_X s_Y over the shared effect (both lists at the same v; the
        # products themselves for the independent model): the answer process is linear in them
        eta = lambda p: col(0) + col(1) * p + col(2) * p ** 2
        tau = th[:, 7] if th.shape[-1] > 7 else np.zeros(th.shape[0])
        if np.any(tau):
            # the quadrature on the distinct (phi_X, phi_Y) pairs only (many pairs repeat one)
            pairs, inverse = np.unique(np.c_[x[:, g], y[:, g]], axis=0, return_inverse=True)
            inverse = inverse.ravel()
            m = {k: v[:, inverse] for k, v in shared_moments(eta(pairs[:, 0]), eta(pairs[:, 1]), tau).items()}
        else:
            m = shared_moments(eta(x[:, g]), eta(y[:, g]), tau)
        only_x, only_y = m["m_a"] - m["m_ab"], m["m_b"] - m["m_ab"]
        delta, lapse = expit(col(5)), 0.5 * expit(col(6))
        same = 1 - m["m_a"] - m["m_b"] + 2 * m["m_ab"]
        pi = expit(col(3) + col(4) * np.abs(d_g))
        to_x = np.where(d_g > 0, delta, np.where(d_g < 0, 1 - delta, 0.5))
        to_x_all = to_x_all + wg * (only_x * (1 - lapse) + only_y * lapse + same * pi * to_x)
        to_y_all = to_y_all + wg * (only_y * (1 - lapse) + only_x * lapse + same * pi * (1 - to_x))
    return to_x_all, to_y_all


def _agreement(thetas, x, y, weights) -> np.ndarray:
    """For each formulation f and reference pair (x, y: (P, F) scores of its two lists), the
    model's probability that an answer prefers the pair's higher-phi_f list (0 at a tie):
    (..., F, P) for thetas (..., F, 7).

    Under joint model g (weight w_g, its own s_g, pi_g, delta_g, lambda_g, scores phi_g):
    P(prefer X) = S_X (1 - S_Y)(1 - lambda) + S_Y (1 - S_X) lambda
    + [S_X S_Y + (1 - S_X)(1 - S_Y)] pi(|dphi_g|) t_X, with t_X = delta, 1 - delta or 1/2 as
    phi_g(X) is above, below or equal to phi_g(Y).
    """
    thetas = np.asarray(thetas, float)
    lead = thetas.shape[:-2]
    th = thetas.reshape((-1,) + thetas.shape[-2:])
    to_x, to_y = _pair_sides(th, x, y, weights)
    d_f = _signs(x, y)                                                     # (F, P)
    out = np.where(d_f > 0, to_x[:, None, :], np.where(d_f < 0, to_y[:, None, :], 0.0))
    return out.reshape(tuple(lead) + out.shape[1:])


def _signs(x, y) -> np.ndarray:
    """+1, -1 or 0 (a tie, or a missing score) as the pair's first list scores above, below or
    level with the second under each formulation: (F, P)."""
    from .core import TIE_TOLERANCE
    d = (x - y).T
    return np.where(np.abs(d) < TIE_TOLERANCE, 0.0, np.sign(np.nan_to_num(d, nan=0.0)))


def reference_ties(ref_phi) -> np.ndarray:
    """ties_std: for each formulation f, the share of the reference pairs (lists 2i, 2i + 1)
    that f does not order, |phi_f(2i) - phi_f(2i + 1)| < ``TIE_TOLERANCE`` (or a score is
    missing). P*_f is fitted to the other pairs.

    It depends on the formulation and the judgments (through the reference population) only,
    not on the answers: a constant given the population, so it has no bootstrap interval.

    Parameters
    ----------
    ref_phi : numpy.ndarray
        Reference lists' scores, (N, F).

    Returns
    -------
    numpy.ndarray
        (F,) shares in [0, 1].
    """
    ref = np.asarray(ref_phi, float)
    n = ref.shape[0] // 2
    return (_signs(ref[0:2 * n:2], ref[1:2 * n:2]) == 0).mean(axis=1)


class _Standardiser:
    """The fixed parts of the standardised fits of one reference population: both layouts and
    their averaging matrices, built once and reused by every replicate."""

    def __init__(self, ref_phi: np.ndarray):
        self.ref = np.asarray(ref_phi, float)
        self.x, self.y = self.ref[0::2], self.ref[1::2]
        self.sat = _Layout(self.ref.T)
        sign = _signs(self.x, self.y)
        # P*_f describes the pairs f orders: a tie (or a missing score) is no verdict of f's to
        # agree with, so it enters no row of f's fit (its share is :func:`reference_ties`)
        self.pref = _Layout(np.abs(self.x - self.y).T, include=sign != 0)
        self.m_sat = self.sat.averaging()
        self.m_x, self.m_y = self.pref.averaging(sign > 0), self.pref.averaging(sign < 0)

    def targets(self, thetas, weights):
        """The group means the fits are fitted to: (B, R_sat) and (B, R_pref)."""
        S = _mixture_s(thetas, self.ref, weights)
        to_x, to_y = _pair_sides(thetas, self.x, self.y, weights)
        return (self.sat.means(self.m_sat, S),
                self.pref.means(self.m_x, to_x) + self.pref.means(self.m_y, to_y))

    def coefficients(self, thetas, weights, start=None):
        """Coefficients (B, F, 3) of s*_f and of P*_f for (B, F, 7) parameters; the Newton
        starts from ``start`` (a pair of (F, 3) arrays) or from the intercept-only fits."""
        ys, yp = self.targets(thetas, weights)
        b0s, b0p = (self.sat.start(ys), self.pref.start(yp)) if start is None else (
            np.broadcast_to(start[0], (len(ys),) + start[0].shape),
            np.broadcast_to(start[1], (len(yp),) + start[1].shape))
        return self.sat.fit(ys, b0s), self.pref.fit(yp, b0p)


def _as_replicates(thetas):
    """(B, F, 7) and whether the input was one (F, 7) set."""
    thetas = np.asarray(thetas, float)
    return (thetas[None], True) if thetas.ndim == 2 else (thetas, False)


def standardised_curves(thetas, ref_phi, weights, grid=GRID, groups=None):
    """s*_f on ``grid`` for every formulation, (F, G) or (B, F, G) for (B, F, 7) replicates,
    and the coefficients (..., F, 3). S of a reference list is the weighted mixture of the
    joint models' s_g (models of weight under 1e-12 of the largest are skipped).

    Parameters
    ----------
    thetas : array_like
        Joint-model parameters, (F, 7), or (B, F, 7) replicates (8: the shared-effect model).
    ref_phi : numpy.ndarray
        Reference lists' scores, (N, F).
    weights : array_like
        Model weights, (F,) (:func:`akaike_weights`).
    grid : numpy.ndarray, optional
        Where the curves are evaluated (default ``GRID``).
    groups : None, optional
        Unused (kept for callers that passed the reference scores' groups).

    Returns
    -------
    tuple of (numpy.ndarray, numpy.ndarray)
        The curves and the coefficients.
    """
    th, single = _as_replicates(thetas)
    lay = _Layout(np.asarray(ref_phi, float).T)
    ys = lay.means(lay.averaging(), _mixture_s(th, np.asarray(ref_phi, float), weights))
    beta = lay.fit(ys, lay.start(ys))
    beta = beta[0] if single else beta
    return expit(beta @ design(grid).T), beta


def standardised_preference(thetas, ref_phi, weights, grid=GRID, groups=None) -> np.ndarray:
    """P*_f on ``grid`` for every formulation, (F, G) or (B, F, G): the quadratic logit of the
    model's agreement (:func:`_agreement`) over the reference pairs' |dphi_f| (lists 2i and
    2i + 1 of the reference population), the pairs f orders only (NaN if it orders none).

    Parameters
    ----------
    thetas : array_like
        Joint-model parameters, (F, 7), or (B, F, 7) replicates (8: the shared-effect model).
    ref_phi : numpy.ndarray
        Reference lists' scores, (N, F).
    weights : array_like
        Model weights, (F,) (:func:`akaike_weights`).
    grid : numpy.ndarray, optional
        Where the curves are evaluated (default ``GRID``).
    groups : None, optional
        Unused (kept for callers that passed the reference scores' groups).

    Returns
    -------
    numpy.ndarray
    """
    th, single = _as_replicates(thetas)
    std = _Standardiser(ref_phi)
    _, yp = std.targets(th, weights)
    beta = std.pref.fit(yp, std.pref.start(yp))
    beta = beta[0] if single else beta
    return expit(beta @ design(grid).T)


def standardised_indicators(thetas, ref_phi, weights, sat_range=None, pref_range=None,
                            block: int | None = None, centre=None, coefficients: bool = False,
                            n_jobs: int = 1, backend: str = "loky") -> dict:
    """b1_std, b2_std, b3_std of every formulation: arrays (F,) from the joint models'
    parameters (F, 7) on the fitting scale, or (B, F) from (B, F, 7) bootstrap replicates
    (``block`` replicates at a time, to bound memory; default: :data:`BLOCK_ROWS` values per
    array), with the full sample's model weights or each replicate's own.

    Replicates start their Newton iterations from the fits at ``centre`` (the point estimate's
    parameters; default: the replicates' median), so each needs a few steps; every fit is
    iterated to the same convergence rule as the point estimate's, so a replicate's indicators
    do not depend on the start beyond that tolerance.

    Parameters
    ----------
    thetas : array_like
        Joint-model parameters, (F, 7), or (B, F, 7) replicates (8: the shared-effect model).
    ref_phi : numpy.ndarray
        Reference lists' scores, (N, F).
    weights : array_like
        Model weights, (F,), or (B, F): each replicate's own (:func:`akaike_weights` of the
        replicate's log-likelihoods).
    sat_range, pref_range : optional
        Ranges of phi and |dphi| the indicators average over
        (:func:`satcal.analysis.core.bias_indicators`).
    block : int or None, optional
        Replicates at a time.
    centre : array_like (F, 7), optional
        Where the replicates' fits start (see above).
    coefficients : bool, default False
        Also return the curves' coefficients: ``beta_sat`` (s*_f) and ``beta_pref`` (P*_f),
        (..., F, 3), quadratic logits in phi and |dphi|.
    n_jobs : int, default 1
        Processes the blocks of replicates are shared among
        (:func:`~satcal.analysis.bootstrap.parallel_map`); the blocks are the same whatever the
        number, so are the results, bit for bit.
    backend : str, default "loky"
        As for :func:`~satcal.analysis.bootstrap.parallel_map`.

    Returns
    -------
    dict
        ``b1_std``, ``b2_std``, ``b3_std`` (and ``beta_sat``, ``beta_pref`` with
        ``coefficients``).
    """
    th, single = _as_replicates(thetas)
    std = _Standardiser(ref_phi)
    weights = np.asarray(weights, float)
    per_replicate = weights.ndim == 2
    start = None
    if not single:
        mid = np.median(th, axis=0) if centre is None else np.asarray(centre, float)
        middle = np.nanmean(weights, axis=0) if per_replicate else weights
        start = tuple(b[0] for b in std.coefficients(mid[None], middle))
    if block is None:
        width = max(std.sat.N, std.pref.values.size, std.sat.F * GRID.size, 1)
        block = max(1, BLOCK_ROWS // width)
    starts = range(0, th.shape[0], block)
    if n_jobs == 1 or len(starts) == 1:
        parts = [_block_indicators(std, th[i:i + block], weights[i:i + block] if per_replicate else weights,
                                   start, sat_range, pref_range, coefficients) for i in starts]
    else:  # one task a block: which models a block's mixture keeps depends on its replicates
        from .bootstrap import parallel_map
        parts = parallel_map(_block_indicators, [
            (ref_phi, th[i:i + block], weights[i:i + block] if per_replicate else weights, start, sat_range,
             pref_range, coefficients) for i in starts], n_jobs, backend)
    out = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    return {k: v[0] for k, v in out.items()} if single else out


def standardised_targets(thetas, ref_phi, weights) -> dict:
    """What each formulation's standardised curves are fitted to, row by row: the reference
    lists' distinct (rounded, :data:`DECIMALS`) scores phi_f with their counts and mean S
    (``sat``), and the distinct |dphi_f| of the reference pairs f orders (ties left out) with
    their counts and mean probability that an answer prefers the higher-phi_f list (``pref``). The fractional logits
    of :func:`standardised_indicators` are fitted to exactly these rows (counts as weights), so
    binned, they are the points a figure draws beside s*_f and P*_f.

    Parameters
    ----------
    thetas : array_like
        Joint-model parameters, (F, 7).
    ref_phi : numpy.ndarray
        Reference lists' scores, (N, F).
    weights : array_like
        Model weights, (F,) (:func:`akaike_weights`).

    Returns
    -------
    dict
        ``sat`` and ``pref``: lists (one per formulation) of (values, counts, means) arrays.
    """
    std = _Standardiser(ref_phi)
    ys, yp = std.targets(np.asarray(thetas, float)[None], np.asarray(weights, float))
    out = {}
    for name, lay, y in (("sat", std.sat, ys[0]), ("pref", std.pref, yp[0])):
        ends = np.append(lay.starts, lay.values.size)
        out[name] = [(lay.values[a:b], lay.counts[a:b], y[a:b]) for a, b in zip(ends[:-1], ends[1:])]
    return out


@one_blas_thread
def _block_indicators(std, th, weights, start, sat_range, pref_range, coefficients) -> dict:
    """b1_std-b3_std (and the coefficients) of one block of replicates; ``std`` is a
    :class:`_Standardiser` or the reference scores to build it from (in a worker process)."""
    std = std if isinstance(std, _Standardiser) else _Standardiser(std)
    b_sat, b_pref = std.coefficients(th, weights, start)
    p_sat, p_pref = expit(b_sat @ design(GRID).T), expit(b_pref @ design(GRID).T)
    ind = bias_indicators(p_sat, p_pref, sat_range=sat_range, pref_range=pref_range)
    part = {"b1_std": ind["b1"], "b2_std": ind["b2"], "b3_std": ind["b3"]}
    if coefficients:
        part.update(beta_sat=b_sat, beta_pref=b_pref)
    return part
