"""The model check: cross-validated log loss and Brier score of the quadratic logit against a
linear logit and isotonic regression, on stratified folds drawn on the distinct rows' counts
(:func:`fold_counts`: scikit-learn's fold sizes, the same distribution as its shuffled folds);
:func:`stratified_folds` gives scikit-learn's own per-observation draw.
"""
from __future__ import annotations

import threading

import numpy as np
import pandas as pd
from scipy.special import expit

from .fits import design, distinct_pairs, fit_logit_batch



def model_check(x, y, folds: int = 5, seed: int = 0, obs=None, weights=None) -> list[dict]:
    """Cross-validated log loss and Brier score of quadratic vs linear logit vs isotonic.

    ``x`` and ``y`` are rows; each row stands for ``weights`` observations (one each when
    neither ``weights`` nor ``obs`` is given), so rows with counts (:class:`CurveData`) are
    checked as if each observation were its own row, and the same observations give the same
    result whether they come one per row or collapsed. The folds are stratified and drawn
    over observations by :func:`fold_counts`, on the distinct (x, y) rows' counts; each fold's
    fits and losses run on the distinct rows weighted by how many of the fold's observations
    they hold, so the check costs what distinct rows cost, not what observations cost.

    Parameters
    ----------
    x, y : array-like
        Rows: scores and 0/1 outcomes.
    folds : int, default 5
    seed : int, default 0
    obs : array-like of int, optional
        The row of every observation (an alternative to ``weights``: its counts per row).
    weights : array-like, optional
        Each row's count of observations (whole numbers).

    Returns
    -------
    list of dict
        One per model (``quadratic_logit``, ``linear_logit``, ``isotonic``): ``log_loss``,
        ``brier``, ``folds``; empty when no stratified split exists.
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    if weights is None:
        weights = (np.ones(x.size) if obs is None
                   else np.bincount(np.asarray(obs, np.intp), minlength=x.size))
    xd, yd, inv = distinct_pairs(x, y)
    counts = np.bincount(inv, weights=np.asarray(weights, float), minlength=xd.size)
    if not np.array_equal(counts, np.round(counts)) or (counts < 0).any():
        raise ValueError("model_check: weights must be counts (whole numbers >= 0)")
    # (folds, rows): how many of each fold's test observations each distinct row holds
    w_test_all = fold_counts(yd, counts.astype(np.int64), folds, seed)
    if w_test_all is None:
        return []
    w_test_all = w_test_all.astype(float)
    total = w_test_all.sum(0)
    losses = {m: [0.0, 0.0] for m in ("quadratic_logit", "linear_logit", "isotonic")}
    for w_test in w_test_all:
        w_train = total - w_test
        preds = {}
        for model, degree in (("quadratic_logit", 2), ("linear_logit", 1)):
            beta, _ = fit_logit_batch(design(xd, degree)[None], yd[None], w_train[None])
            preds[model] = expit(design(xd, degree) @ beta[0])
        preds["isotonic"] = _isotonic_fit(xd, yd, w_train).predict(xd)
        for model, p in preds.items():
            pc = np.clip(p, 1e-4, 1 - 1e-4)  # the same floor for all, so isotonic 0/1 stays finite
            losses[model][0] += float(w_test @ -(yd * np.log(pc) + (1 - yd) * np.log(1 - pc)))
            losses[model][1] += float(w_test @ (p - yd) ** 2)
    n_obs = float(total.sum())
    return [{"model": model, "log_loss": ll / n_obs, "brier": br / n_obs, "folds": folds}
            for model, (ll, br) in losses.items()]


def fold_counts(y, counts, folds: int, seed: int) -> np.ndarray | None:
    """Stratified folds drawn on counts: how many of each row's observations each fold tests.

    Row r stands for ``counts[r]`` observations of class ``y[r]``. Each class's observations
    are split over the folds in the sizes of scikit-learn's stratified scheme (``StratifiedKFold``:
    fold i takes the round-robin share of each class over the labels), with the labels in
    sorted order; scikit-learn orders them by first appearance in ``y``, which collapsed rows
    do not keep, so which fold takes a class's odd observation can differ from its split,
    and which observations go to which fold is a uniformly random assignment with those sizes,
    as ``StratifiedKFold(shuffle=True)``'s shuffle of each class's fold labels makes it. Under
    that assignment the table of counts (fold x row) within a class is a random contingency
    table with fixed margins (the fold sizes and the rows' counts); it is drawn fold by fold,
    each fold's counts a multivariate hypergeometric draw from what the earlier folds left
    (``numpy.random.Generator.multivariate_hypergeometric``, its ``marginals`` method), so the
    cost is folds x classes draws over the distinct rows, whatever the number of observations.
    The table has the same distribution as per-observation stratified folds give; it is not
    the same draw as scikit-learn's for a seed (:func:`stratified_folds` is).

    Parameters
    ----------
    y : array-like
        Each row's class label.
    counts : array-like of int
        Each row's number of observations.
    folds : int
    seed : int
        Seeds ``numpy.random.default_rng``: the same rows, counts and seed give the same table.

    Returns
    -------
    numpy.ndarray of int64, shape (folds, rows), or None
        None when a class has fewer observations than folds (no stratified split exists).
    """
    y, counts = np.asarray(y), np.asarray(counts, np.int64)
    classes, cls = np.unique(y, return_inverse=True)
    per_class = np.bincount(cls, weights=counts, minlength=classes.size).astype(np.int64)
    if classes.size < 2 or per_class.min() < folds:
        return None
    allocation = _allocation(per_class, folds)  # (folds, classes)
    rng = np.random.default_rng(seed)
    table = np.zeros((folds, y.size), dtype=np.int64)
    for c in range(classes.size):
        rows = np.flatnonzero(cls == c)
        left = counts[rows].copy()
        for k in range(folds - 1):
            draw = rng.multivariate_hypergeometric(left, int(allocation[k, c]), method="marginals")
            table[k, rows] = draw
            left -= draw
        table[folds - 1, rows] = left
    return table


def _allocation(counts: np.ndarray, folds: int) -> np.ndarray:
    """(folds, classes): fold i's share of each class, round robin over the sorted labels
    (fold i holds positions i, i + folds, ...), as ``StratifiedKFold`` allocates them."""
    ends = np.cumsum(counts)
    starts = ends - counts
    i = np.arange(folds)[:, None]
    return (np.maximum(ends[None] - i, 0) + folds - 1) // folds \
        - (np.maximum(starts[None] - i, 0) + folds - 1) // folds


def stratified_folds(y, folds: int, seed: int) -> np.ndarray | None:
    """The test fold of each observation, as scikit-learn's ``StratifiedKFold(folds,
    shuffle=True, random_state=seed)`` assigns them, computed from class counts in O(n).

    Classes are numbered by first appearance; fold i takes the round-robin share of each class
    over the sorted labels; each class's fold labels are shuffled by one ``RandomState(seed)``
    in class order (sklearn's algorithm; a test checks the two agree). None when a class has
    fewer observations than folds (no stratified split exists).

    Parameters
    ----------
    y : array-like
        Class labels.
    folds : int
    seed : int

    Returns
    -------
    numpy.ndarray of int or None
    """
    y = np.asarray(y)
    # calibrate alternates a formulation's satisfaction curve, whose outcomes every formulation
    # shares, with its preference curve: comparing the labels with the last two calls' costs a
    # fraction of assigning the folds again
    with _RECENT_LOCK:
        for i, (labels, key, small) in enumerate(_RECENT_FOLDS):
            if key == (folds, seed) and labels.dtype == y.dtype and np.array_equal(labels, y):
                _RECENT_FOLDS.insert(0, _RECENT_FOLDS.pop(i))
                return None if small is None else small.astype(np.intp)
    fold_of = _stratified_folds(y, folds, seed)
    small = None if fold_of is None else fold_of.astype(np.int8 if folds <= 127 else np.intp)
    with _RECENT_LOCK:
        _RECENT_FOLDS.insert(0, (y.copy(), (folds, seed), small))
        del _RECENT_FOLDS[2:]
    return fold_of


_RECENT_FOLDS: list = []  # the last two calls of stratified_folds: labels, (folds, seed), folds
_RECENT_LOCK = threading.Lock()


def _stratified_folds(y: np.ndarray, folds: int, seed: int) -> np.ndarray | None:
    """:func:`stratified_folds` computed afresh."""
    encoded, n_classes = _class_codes(y)
    counts = np.bincount(encoded, minlength=n_classes)
    if n_classes < 2 or counts.min() < folds:
        return None
    fold_of = np.empty(encoded.size, dtype=np.intp)
    # the observations of class 0, then class 1, ... each in data order, get the class's labels
    fold_of[_class_order(encoded, n_classes)] = _shuffled_fold_labels(counts, folds, seed)
    return fold_of


def _class_codes(y: np.ndarray) -> tuple[np.ndarray, int]:
    """Class codes by first appearance, and the number of classes.

    Two-valued numeric labels (the 0/1 outcomes of every curve) take two comparisons; any
    other labels are hashed (no sort of n values either way).
    """
    if y.ndim == 1 and y.size and y.dtype.kind in "biuf":
        differs = y != y[0]
        if not differs.any():
            return np.zeros(y.size, dtype=np.int8), 1
        # differs[0] only for a NaN label, and a NaN second class fails the comparison: hash those
        if not differs[0] and np.array_equal(differs, y == y[differs.argmax()]):
            return differs.view(np.int8), 2
    encoded, classes = pd.factorize(y, sort=False)
    return encoded, classes.size


def _class_order(encoded: np.ndarray, n_classes: int) -> np.ndarray:
    """Observations grouped by class, data order kept within a class (a radix sort of small codes)."""
    small = np.uint8 if n_classes <= 256 else np.uint16 if n_classes <= 65536 else np.intp
    return np.argsort(encoded.astype(small, copy=False), kind="stable")


def _shuffled_fold_labels(counts: np.ndarray, folds: int, seed: int) -> np.ndarray:
    """Each class's fold labels, shuffled by one ``RandomState(seed)``, classes one after another."""
    allocation = _allocation(counts, folds)  # (folds, classes)
    rng = np.random.RandomState(seed)
    # the draws depend only on the length, not the dtype: small labels shuffle faster
    labels = np.arange(folds, dtype=np.int8 if folds <= 127 else np.intp)
    parts = []
    for c in range(counts.size):
        part = labels.repeat(allocation[:, c])
        rng.shuffle(part)
        parts.append(part)
    return np.concatenate(parts)


def _isotonic_fit(x, y, w):
    """Isotonic regression on weighted rows (rows of weight 0 left out)."""
    from sklearn.isotonic import IsotonicRegression
    keep = w > 0
    return IsotonicRegression(out_of_bounds="clip", y_min=0, y_max=1).fit(
        x[keep], y[keep], sample_weight=w[keep])
