"""The model check: cross-validated log loss and Brier score of the quadratic logit against a
linear logit and isotonic regression, on stratified folds equal to scikit-learn's.
"""
from __future__ import annotations

import threading

import numpy as np
import pandas as pd
from scipy.special import expit

from .fits import design, distinct_pairs, fit_logit_batch



def model_check(x, y, folds: int = 5, seed: int = 0, obs=None) -> list[dict]:
    """Cross-validated log loss and Brier score of quadratic vs linear logit vs isotonic.

    ``x`` and ``y`` are rows; ``obs`` (optional) lists the row of every observation, so that
    rows with counts (:class:`CurveData`) are checked as if each observation were its own row.
    The folds are stratified and drawn over observations; each fold's fits and losses run on
    the distinct (x, y) rows weighted by how many of the fold's observations they hold.

    Parameters
    ----------
    x, y : array-like
        Rows: scores and 0/1 outcomes.
    folds : int, default 5
    seed : int, default 0
    obs : array-like of int, optional

    Returns
    -------
    list of dict
        One per model (``quadratic_logit``, ``linear_logit``, ``isotonic``): ``log_loss``,
        ``brier``, ``folds``; empty when no stratified split exists.
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    obs = np.arange(x.size) if obs is None else np.asarray(obs, np.intp)
    xd, yd, inv = distinct_pairs(x, y)
    row_of = inv[obs]  # the distinct (x, y) row of every observation
    fold_of = stratified_folds(yd[row_of], folds, seed)
    if fold_of is None:
        return []
    # (folds, rows): how many of each fold's test observations each distinct row holds
    w_test_all = np.bincount(fold_of * xd.size + row_of, minlength=folds * xd.size)
    w_test_all = w_test_all.reshape(folds, xd.size).astype(float)
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
    n_obs = row_of.size
    return [{"model": model, "log_loss": ll / n_obs, "brier": br / n_obs, "folds": folds}
            for model, (ll, br) in losses.items()]


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
    ends = np.cumsum(counts)
    starts = ends - counts
    i = np.arange(folds)[:, None]
    # round robin over the sorted labels: fold i holds positions i, i + folds, ...
    allocation = (np.maximum(ends[None] - i, 0) + folds - 1) // folds \
        - (np.maximum(starts[None] - i, 0) + folds - 1) // folds   # (folds, classes)
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
