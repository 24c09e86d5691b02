"""Embedded data: the published answers of the ECIR 2015 study and its recovered judgments.

Urbano & Marrero, "How do Gain and Discount Functions Affect the Correlation between DCG and
User Satisfaction?", ECIR 2015. The data is licensed CC BY-SA 4.0; anything derived from it
(the recovered judgments included) carries the same licence and attribution.
"""
from __future__ import annotations

import hashlib
import itertools
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import SatcalError
from .answers import ANSWER_CODES, StudyData
from .judgments import Judgments, read_judgments
from .measures import (ECIR_DISCOUNT_CODES, ECIR_GAIN_CODES, score_lists, study_formulations)

__all__ = [
    "ECIR2015_CITATION",
    "ECIR2015_LICENSE",
    "ecir2015_file",
    "load_ecir2015_crowd",
    "published_scores",
    "recover_patterns",
    "recover_judgments",
    "load_ecir2015",
    "StudyData",
    "ANSWER_CODES",
]

ECIR2015_CITATION = ("J. Urbano and M. Marrero, \"How do Gain and Discount Functions Affect the "
                     "Correlation between DCG and User Satisfaction?\", ECIR 2015, pp. 197-202.")
ECIR2015_LICENSE = "Creative Commons Attribution-ShareAlike 4.0 International (CC BY-SA 4.0)"
ECIR2015_NOTICE = f"Data: {ECIR2015_CITATION} Licence: {ECIR2015_LICENSE}."
CROWD_SHA256 = "17e6edad3a8c3e6b9cca0c60cc375df40d9c76168153e71f60ebdf822934db4a"

_ECIR_ANSWERS = {"a": "a_better", "b": "b_better", "good": "both_good", "bad": "both_bad"}
K = 5


def ecir2015_file(name: str) -> Path:
    """Path of a file of the embedded dataset.

    Parameters
    ----------
    name : str
        ``crowd.csv``, ``judgments.tsv``, ...

    Returns
    -------
    pathlib.Path
    """
    return Path(str(resources.files("satcal") / "data" / "ecir2015" / name))


def load_ecir2015_crowd() -> pd.DataFrame:
    """The published ``crowd.csv`` of Urbano and Marrero (ECIR 2015), as is.

    Returns
    -------
    pandas.DataFrame
    """
    return pd.read_csv(ecir2015_file("crowd.csv"), dtype={"query": str, "comments": str},
                       keep_default_na=False, na_values=[])


def _ecir_column(gain_id: str, discount_id: str, side: str) -> str:
    g = {v: k for k, v in ECIR_GAIN_CODES.items()}[gain_id]
    d = {v: k for k, v in ECIR_DISCOUNT_CODES.items()}[discount_id]
    return f"DCG{g}{d}{side}"


def published_scores(crowd: pd.DataFrame, side: str, formulations=None) -> np.ndarray:
    """The published (3-decimal) scores of one list of every example.

    Parameters
    ----------
    crowd : pandas.DataFrame
        :func:`load_ecir2015_crowd`.
    side : {"A", "B"}
    formulations : list, optional
        Default: the 36 study formulations, in their order.

    Returns
    -------
    numpy.ndarray of float, shape (n, F)
    """
    forms = formulations or study_formulations()
    cols = [_ecir_column(f.gain.id, f.discount.id, side) for f in forms]
    return np.array(crowd[cols].to_numpy(dtype=float), copy=True)


def recover_patterns(scores: np.ndarray, k: int = K, n_levels: int = 3,
                     formulations=None, tolerance: float = 5e-4):
    """Recover each list's relevance pattern from its published scores.

    All n_levels^k patterns are scored under the formulations; each list takes the pattern
    whose scores are nearest in max-abs distance. A list is recovered when that distance is
    within ``tolerance`` (the published rounding is 5e-4) and no other pattern is.

    Parameters
    ----------
    scores : numpy.ndarray, shape (n, F)
        Published scores of n lists.
    k : int, default 5
    n_levels : int, default 3
    formulations : list, optional
        The formulations of the columns of ``scores`` (default: the 36 study formulations).
    tolerance : float, default 5e-4

    Returns
    -------
    patterns : ndarray (n, k) of int
    distance : ndarray (n,), the max-abs error of the chosen pattern
    """
    forms = formulations or study_formulations()
    candidates = np.array(list(itertools.product(range(n_levels), repeat=k)), dtype=float)
    cand_scores = score_lists(candidates, forms, n_levels=n_levels)          # (P, F)
    dist = np.abs(scores[:, None, :] - cand_scores[None, :, :]).max(axis=2)  # (n, P)
    order = np.argsort(dist, axis=1)
    best, second = order[:, 0], order[:, 1]
    rows = np.arange(len(scores))
    d_best, d_second = dist[rows, best], dist[rows, second]
    bad = np.flatnonzero((d_best > tolerance) | (d_second <= tolerance))
    if bad.size:
        raise SatcalError(f"{bad.size} lists have no unique relevance pattern within "
                          f"{tolerance} (first: row {bad[0] + 1})")
    return candidates[best].astype(int), d_best


def recover_judgments(crowd: pd.DataFrame | None = None) -> Judgments:
    """The study's judgments, recovered from the published per-list scores.

    Each list's 36 scores pin down its relevance pattern; each (query, document) then gets the
    level of its positions. A document seen with two different levels is an error.

    Parameters
    ----------
    crowd : pandas.DataFrame, optional
        Default: :func:`load_ecir2015_crowd`.

    Returns
    -------
    Judgments
    """
    crowd = load_ecir2015_crowd() if crowd is None else crowd
    frames = []
    for side in ("A", "B"):
        patterns, _ = recover_patterns(published_scores(crowd, side))
        docs = crowd[[f"d{i}{side}" for i in range(1, K + 1)]].to_numpy()
        frames.append(pd.DataFrame({"query": np.repeat(crowd["query"].to_numpy(), K),
                                    "doc": docs.reshape(-1), "level": patterns.reshape(-1)}))
    pairs = pd.concat(frames, ignore_index=True).drop_duplicates()
    conflicts = pairs.duplicated(["query", "doc"], keep=False)
    if conflicts.any():
        first = pairs[conflicts].iloc[0]
        raise SatcalError(f"document {first['doc']} of query {first['query']} is recovered with "
                          f"{conflicts.sum()} conflicting levels")
    pairs = pairs.sort_values(["query", "doc"]).reset_index(drop=True)
    return Judgments(pairs, (0, 1, 2), "ecir2015 (recovered from crowd.csv)")


def load_ecir2015(verify: bool = True) -> StudyData:
    """The published ECIR 2015 answers with levels from the embedded recovered judgments.

    Parameters
    ----------
    verify : bool, default True
        Check that the embedded judgments give back every published score (to its 3 decimals).

    Returns
    -------
    StudyData
        The answers with both lists' levels (k = 5, levels 0..2), with the data's licence and
        citation in ``notice``.

    References
    ----------
    Urbano, J. and Marrero, M. (2015). How do gain and discount functions affect the
    correlation between DCG and user satisfaction? ECIR 2015, LNCS 9022, 197-202.
    """
    path = ecir2015_file("crowd.csv")
    if verify:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != CROWD_SHA256:
            raise SatcalError(f"{path}: checksum {digest[:12]}... differs from the published file")
    crowd = load_ecir2015_crowd()
    judgments = read_judgments(ecir2015_file("judgments.tsv"), levels=3)
    ex = pd.DataFrame({"example_id": crowd["id"].astype(str), "query": crowd["query"]})
    for side, col in (("a", "A"), ("b", "B")):
        for i in range(1, K + 1):
            ex[f"{side}{i}"] = crowd[f"d{i}{col}"]
    for side in ("a", "b"):
        levels = judgments.lookup(ex["query"], ex[[f"{side}{i}" for i in range(1, K + 1)]].to_numpy())
        for i in range(K):
            ex[f"r{side}{i + 1}"] = levels[:, i].astype(int)
    ex["answer"] = crowd["answer"].map(_ECIR_ANSWERS)
    return StudyData(ex, K, 3, judgments, ECIR2015_NOTICE, "ecir2015")
