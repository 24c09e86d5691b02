"""The vocabulary of answers, shared by every stage that meets them: the four canonical answer
codes (always in the example's own A/B orientation), the spellings accepted on input, and
:class:`StudyData`, the answered examples with both lists' levels that an analysis consumes.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .errors import InputFileError
from .judgments import Judgments

__all__ = ["ANSWER_CODES", "ANSWER_ALIASES", "StudyData", "normalise_answers"]

#: Canonical answer codes, in the example's own A/B orientation.
ANSWER_CODES = ("a_better", "b_better", "both_good", "both_bad")
#: Spellings accepted on input (case-insensitive) for each code.
ANSWER_ALIASES = {
    **{c: c for c in ANSWER_CODES},
    "a": "a_better", "b": "b_better", "good": "both_good", "bad": "both_bad",
    "a better": "a_better", "b better": "b_better", "both good": "both_good", "both bad": "both_bad",
}


@dataclass(repr=False)
class StudyData:
    """Answers to examples, with the levels of both lists: what an analysis needs.

    Parameters
    ----------
    examples : pandas.DataFrame
        ``example_id, query, a1..a<k>, b1..b<k>, ra1..ra<k>, rb1..rb<k>, answer`` and optionally
        ``worker_id``: one row per answer, documents and levels of lists A and B.
    k : int
        Documents per list.
    n_levels : int
        L: levels 0..L-1 of the scale.
    judgments : Judgments, optional
        The pools, for pool-based normalisations.
    notice : str
        Licence and citation of the data, when they come with one.
    name : str
        The study's name in messages.
    """

    examples: pd.DataFrame
    k: int
    n_levels: int
    judgments: Judgments | None = None
    notice: str = ""
    name: str = ""

    def __repr__(self) -> str:
        workers = self.examples["worker_id"].nunique() if "worker_id" in self.examples.columns else None
        return (f"<StudyData {self.name or 'study'}: {len(self.examples)} answers, k = {self.k}, "
                f"L = {self.n_levels}{f', {workers} workers' if workers is not None else ''}>")

    def levels(self, side: str) -> np.ndarray:
        """(n, k) levels of one list of every answer.

        Parameters
        ----------
        side : {"a", "b"}

        Returns
        -------
        numpy.ndarray of float, shape (n, k)
        """
        return self.examples[[f"r{side}{i}" for i in range(1, self.k + 1)]].to_numpy(dtype=float)

    @property
    def answers(self) -> np.ndarray:
        """The answer codes, one per row of ``examples``."""
        return self.examples["answer"].to_numpy()


def normalise_answers(values: pd.Series, path, column: str = "answer", first_line: int = 2) -> pd.Series:
    """Map answer spellings to the canonical codes; an unknown one is a one-line error.

    Parameters
    ----------
    values : pandas.Series
        The answers as given.
    path : path-like
        The file they come from (named in the error).
    column : str, default ``"answer"``
    first_line : int, default 2
        The file line of the first value (after a header).

    Returns
    -------
    pandas.Series
        Canonical codes (``a_better``, ``b_better``, ``both_good``, ``both_bad``).

    Raises
    ------
    InputFileError
        At the first unknown spelling, naming its line and column.
    """
    codes, distinct = pd.factorize(values.to_numpy(), use_na_sentinel=False)  # one lookup per spelling
    key = pd.Series(distinct, dtype=object).astype(str).str.strip().str.lower().str.replace("-", "_")
    known = key.map(lambda v: ANSWER_ALIASES.get(v, ANSWER_ALIASES.get(v.replace("_", " ")))).to_numpy(dtype=object)
    mapped = pd.Series(known[codes], index=values.index, dtype=object)
    bad = mapped.isna().to_numpy()
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputFileError(path, f"answer {values.iloc[i]!r} is not one of {', '.join(ANSWER_CODES)}",
                             first_line + i, column)
    return mapped
