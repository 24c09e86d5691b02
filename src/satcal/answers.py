"""The vocabulary of answers, shared by every stage that meets them: the four canonical answer
codes (always in the example's own A/B orientation), the spellings accepted on input, and
:class:`StudyData`, the answered examples with both lists' levels that an analysis consumes
(SPEC sections 1 and 6).
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

    ``examples`` has ``example_id, query, a1..a<k>, b1..b<k>, ra1..ra<k>, rb1..rb<k>,
    answer`` and optionally ``worker_id``; ``k`` and ``n_levels`` describe the scale.
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
        """(n, k) levels of list ``side`` ('a' or 'b')."""
        return self.examples[[f"r{side}{i}" for i in range(1, self.k + 1)]].to_numpy(dtype=float)

    @property
    def answers(self) -> np.ndarray:
        return self.examples["answer"].to_numpy()


def normalise_answers(values: pd.Series, path, column: str = "answer", first_line: int = 2) -> pd.Series:
    """Map answer spellings to the canonical codes; an unknown one is a one-line error."""
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
