"""The data of the paper's curves: rows of P(Sat|phi) and P(Pref|dphi) from the answers.

- Satisfaction data: each ``both_good`` (sat = 1) or ``both_bad`` (sat = 0) answer gives two
  rows, (phi_A, sat) and (phi_B, sat).
- Preference data: x = |dphi|; agree = 1 when the answer prefers the list with the higher phi.
  Population ``all`` keeps every answer (ties and both_* answers count as 0; this is how the
  published figures and bias scores were computed); ``preferences_only`` keeps a_better /
  b_better answers with dphi != 0.
- :class:`AnswerTypes`: the answers collapsed to their distinct (phi_A, phi_B, answer) rows,
  and :class:`CurveData`, each curve's rows with counts, so fits cost what distinct rows cost.

References
----------
Urbano, J. and Marrero, M. (2015). How do gain and discount functions affect the correlation
between DCG and user satisfaction? ECIR 2015, section 4.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from ..answers import ANSWER_CODES, StudyData
from ..errors import SatcalError
from ..measures import Formulation, score_lists

POPULATIONS = ("all", "preferences_only")
CURVES = ("sat", "pref")
#: Differences of phi below this are ties: sums in another order differ by rounding only.
TIE_TOLERANCE = 1e-9

def satisfaction_data(phi_a: np.ndarray, phi_b: np.ndarray, answers: Sequence[str]):
    """Rows (phi, sat) from both_good / both_bad answers, two per answer.

    Parameters
    ----------
    phi_a, phi_b : numpy.ndarray, shape (n, F)
        Scores of lists A and B under F formulations.
    answers : sequence of str, length n
        Canonical answer codes.

    Returns
    -------
    x : numpy.ndarray, shape (2m, F)
        The A rows first, then the B rows (m answers both_good or both_bad).
    y : numpy.ndarray, shape (2m,)
        1 for both_good, 0 for both_bad.

    References
    ----------
    Urbano, J. and Marrero, M. (2015). How do gain and discount functions affect the
    correlation between DCG and user satisfaction? ECIR 2015.
    """
    answers = np.asarray(answers)
    keep = np.isin(answers, ("both_good", "both_bad"))
    sat = (answers[keep] == "both_good").astype(float)
    x = np.concatenate([np.atleast_2d(phi_a)[keep], np.atleast_2d(phi_b)[keep]], axis=0)
    return x, np.concatenate([sat, sat])


def preference_data(phi_a: np.ndarray, phi_b: np.ndarray, answers: Sequence[str],
                    population: str = "all", _masks: bool = False):
    """Per formulation, (x = |dphi|, agree) of the preference curve.

    Parameters
    ----------
    phi_a, phi_b : numpy.ndarray, shape (n, F)
    answers : sequence of str, length n
    population : {"all", "preferences_only"}
        ``all`` (the paper's) keeps every answer, ties and both_* answers counting as 0;
        ``preferences_only`` keeps a_better / b_better answers with dphi != 0.

    Returns
    -------
    list of (x, y)
        One pair per formulation column (with ``_masks``, a triple whose third item is the
        boolean mask of kept rows, or None when every row is kept).

    References
    ----------
    Urbano, J. and Marrero, M. (2015). How do gain and discount functions affect the
    correlation between DCG and user satisfaction? ECIR 2015.
    """
    if population not in POPULATIONS:
        raise SatcalError(f"population must be one of {POPULATIONS}, got {population!r}")
    answers = np.asarray(answers)
    dphi = np.atleast_2d(phi_a) - np.atleast_2d(phi_b)
    # Lists with equal scores in exact arithmetic can differ by rounding (sums in another
    # order): such differences are ties, not preferences.
    dphi = np.where(np.abs(dphi) < TIE_TOLERANCE, 0.0, dphi)
    a_pref = (answers == "a_better")[:, None]
    b_pref = (answers == "b_better")[:, None]
    agree = ((a_pref & (dphi > 0)) | (b_pref & (dphi < 0))).astype(float)
    x = np.abs(dphi)
    if population == "all":
        return [(x[:, j], agree[:, j]) + ((None,) if _masks else ()) for j in range(x.shape[1])]
    out = []
    for j in range(x.shape[1]):
        keep = (a_pref[:, 0] | b_pref[:, 0]) & (dphi[:, j] != 0)
        out.append((x[keep, j], agree[keep, j]) + ((keep,) if _masks else ()))
    return out


@dataclass(frozen=True)
class AnswerTypes:
    """Distinct answered examples: the sufficient statistics of a calibration.

    Two answers with the same scores under every formulation and the same answer code carry
    the same information, so an analysis needs only each distinct (phi_A, phi_B, answer) row
    and how often it occurs. A study with k = 5 and 3 levels has at most a few thousand such
    rows however many answers it collects, and every fit, point and bootstrap replicate costs
    what the distinct rows cost (the binomial likelihood with counts is exactly the likelihood
    of the rows it replaces).

    Attributes
    ----------
    phi_a, phi_b : (T, F) scores of each distinct row
    answers : (T,) answer codes
    counts : (T,) how many answers each row stands for
    inverse : (n,) the row of each input answer, in input order (for folds and resampling)
    """

    phi_a: np.ndarray
    phi_b: np.ndarray
    answers: np.ndarray
    counts: np.ndarray
    inverse: np.ndarray

    @property
    def n_answers(self) -> int:
        """The number of answers collapsed."""
        return int(self.inverse.size)


def _answer_codes(answers: np.ndarray) -> np.ndarray:
    """Index of each answer in ANSWER_CODES; an unknown code is an error."""
    code = np.full(len(answers), -1.0)
    for i, c in enumerate(ANSWER_CODES):
        code[answers == c] = i
    if (code < 0).any():
        bad = sorted(set(answers[code < 0].tolist()), key=str)
        raise SatcalError(f"unknown answer code(s) {bad}; expected {', '.join(ANSWER_CODES)}")
    return code


def _unique_rows(blocks: Sequence[np.ndarray]):
    """Distinct rows of float columns side by side: (first index, inverse, counts).

    The rows are hashed to integer ids column by column in O(n); only the distinct rows are
    then sorted, by their bytes, so the order is the one ``np.unique`` of the rows' bytes
    gives (-0.0 and 0.0 are one value).

    Parameters
    ----------
    blocks : sequence of numpy.ndarray, each shape (n, c)

    Returns
    -------
    first : numpy.ndarray of int
        The first row of each distinct row, in sorted order.
    inverse : numpy.ndarray of int
        Each row's distinct row.
    counts : numpy.ndarray of float
    """
    blocks = [np.asarray(b, dtype=float) for b in blocks]
    if not len(blocks[0]):
        return np.zeros(0, np.intp), np.zeros(0, np.intp), np.zeros(0)
    ids, size = np.zeros(len(blocks[0]), dtype=np.int64), 1
    for col in (b[:, j] for b in blocks for j in range(b.shape[1])):
        codes, card = _column_codes(col)
        if size * card >= 2 ** 62:  # mixed radix would overflow: renumber the ids so far first
            ids, size = _first_appearance(ids)
        ids, size = ids * card + codes, size * card
    ids, size = _first_appearance(ids)
    first = np.flatnonzero(np.diff(np.maximum.accumulate(ids), prepend=-1) > 0)  # ids rise by 1
    rows = np.concatenate([b[first] for b in blocks], axis=1) + 0.0   # + 0.0 turns -0.0 into 0.0
    _, order = np.unique(rows.view(np.dtype((np.void, 8 * rows.shape[1])))[:, 0], return_index=True)
    rank = np.empty(size, dtype=np.intp)
    rank[order] = np.arange(size)
    return first[order], rank[ids], np.bincount(ids, minlength=size)[order].astype(float)


def _column_codes(col: np.ndarray) -> tuple[np.ndarray, int]:
    """Integer codes of one float column and how many there can be.

    Integer levels in a short range (the usual relevance levels and answer codes) are their
    offset from the minimum, by arithmetic; any other column is hashed.
    """
    lo, hi = col.min(), col.max()  # NaN in either: hashed
    if np.isfinite(lo) and np.isfinite(hi) and hi - lo < 2 ** 20:
        codes = (col - lo).astype(np.int64)
        if np.array_equal(codes + lo, col):
            return codes, int(hi - lo) + 1
    codes, uniques = pd.factorize(col + 0.0, use_na_sentinel=False)
    return codes.astype(np.int64), max(uniques.size, 1)


def _first_appearance(ids: np.ndarray) -> tuple[np.ndarray, int]:
    """Renumber integer ids 0, 1, ... in order of first appearance (hashing, no sort)."""
    codes, uniques = pd.factorize(ids)
    return codes.astype(np.int64), uniques.size


def collapse_answers(phi_a, phi_b, answers) -> AnswerTypes:
    """Group answers by (phi_A row, phi_B row, answer code); see :class:`AnswerTypes`.

    Parameters
    ----------
    phi_a, phi_b : numpy.ndarray, shape (n, F)
    answers : sequence of str, length n

    Returns
    -------
    AnswerTypes
    """
    phi_a, phi_b = np.atleast_2d(np.asarray(phi_a, float)), np.atleast_2d(np.asarray(phi_b, float))
    answers = np.asarray(answers, dtype=object)
    code = _answer_codes(answers)
    first, inverse, counts = _unique_rows([phi_a, phi_b, code[:, None]])
    return AnswerTypes(phi_a[first], phi_b[first], answers[first], counts, inverse)


def collapse_study(study: StudyData, forms: list[Formulation]) -> AnswerTypes:
    """:func:`collapse_answers` of a study, grouped by relevance patterns before scoring.

    Lists with the same levels have the same phi under every ``max``-normalised formulation,
    so the key is the two patterns and the answer (2k + 1 numbers instead of 2F + 1), and only
    the distinct rows are scored. When a formulation normalises by the query's pool (``ideal``,
    ``minmax``, ``ul1``, ``ul2``, AP), the query is part of the key and each list is scored
    against its query's judged pool.

    Parameters
    ----------
    study : StudyData
    forms : list of Formulation or ListMeasure

    Returns
    -------
    AnswerTypes
    """
    la, lb = study.levels("a"), study.levels("b")
    # the answer codes checked and numbered once per distinct spelling, spread by integer codes
    which, spellings = pd.factorize(study.examples["answer"], use_na_sentinel=False)
    spellings = np.asarray(spellings, dtype=object)
    code = _answer_codes(spellings)[which]
    pooled = [f.id for f in forms if f.uses_pool]
    columns = [la, lb, code[:, None]]
    if pooled:
        if study.judgments is None:
            raise SatcalError(f"{', '.join(pooled)}: these need each query's judged pool, and this "
                              "study has no judgments attached")
        qcode, qnames = pd.factorize(study.examples["query"].astype(str))
        columns.append(qcode[:, None].astype(float))
    first, inverse, counts = _unique_rows(columns)
    kwargs: dict = {"n_levels": study.n_levels}
    if pooled:
        pools = study.judgments.pools()
        empty = np.zeros(0)
        kwargs.update(pools=[pools.get(q, empty) for q in qnames], query_index=qcode[first])
    phi_a = score_lists(la[first], forms, **kwargs)
    phi_b = score_lists(lb[first], forms, **kwargs)
    return AnswerTypes(phi_a, phi_b, spellings[which[first]], counts, inverse)


@dataclass(frozen=True)
class CurveData:
    """The rows of one curve of one formulation, with counts.

    Attributes
    ----------
    x : numpy.ndarray
        Each row's score: phi (satisfaction curve) or |dphi| (preference curve).
    y : numpy.ndarray
        Each row's outcome: 1 when satisfied (a both_good answer, not both_bad) or when the
        answer prefers the higher-scored list, else 0.
    w : numpy.ndarray
        Each row's count: how many answers it stands for (the model check's folds are drawn
        over these observations, as if nothing had been collapsed).
    types : numpy.ndarray or None
        The :class:`AnswerTypes` row behind each row (None: the rows are the types, in order),
        so a bootstrap replicate's counts per type give its counts per row.
    """

    x: np.ndarray
    y: np.ndarray
    w: np.ndarray
    types: np.ndarray | None = None

    @property
    def n(self) -> int:
        """The number of observations (rows before collapsing)."""
        return int(round(float(self.w.sum())))


def satisfaction_curves(types: AnswerTypes) -> list[CurveData]:
    """Per formulation, the P(Sat|phi) data: both_good / both_bad rows, A side then B side.

    Parameters
    ----------
    types : AnswerTypes

    Returns
    -------
    list of CurveData
    """
    keep = np.isin(types.answers, ("both_good", "both_bad"))
    sat = (types.answers[keep] == "both_good").astype(float)
    w = np.concatenate([types.counts[keep], types.counts[keep]])
    y = np.concatenate([sat, sat])
    x = np.concatenate([types.phi_a[keep], types.phi_b[keep]], axis=0)
    rows = np.tile(np.flatnonzero(keep), 2)
    return [CurveData(x[:, j], y, w, rows) for j in range(x.shape[1])]


def preference_curves(types: AnswerTypes, population: str = "all") -> list[CurveData]:
    """Per formulation, the P(Pref||dphi|) data of the chosen population.

    Parameters
    ----------
    types : AnswerTypes
    population : {"all", "preferences_only"}

    Returns
    -------
    list of CurveData
    """
    pairs = preference_data(types.phi_a, types.phi_b, types.answers, population, _masks=True)
    out = []
    for x, y, keep in pairs:
        if keep is None:
            out.append(CurveData(x, y, types.counts))
            continue
        out.append(CurveData(x, y, types.counts[keep], np.flatnonzero(keep)))
    return out
