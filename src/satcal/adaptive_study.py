"""Adaptive studies in the workspace: the candidate pool, the waves of file platforms, the
hosted study's page order, and the stopping rule's record.

With ``[design] adaptive = true`` in study.toml:

- ``satcal generate`` writes the candidate pool (``pool.csv``; ``examples.csv`` holds the same
  rows, as every answer resolves against it), made once with the study's seed so every wave
  is drawn from the same candidates;
- ``satcal export DIR --next-batch`` writes the next wave (a new batch with its own key) of
  ``wave_pages`` pages, chosen from the answers ingested so far (the first wave, with none,
  space-filling), and refuses once the study is settled or at its budget;
- ``satcal serve`` refits in the background and hands out the pages whose examples the
  criterion asks for first, and stops when settled or at the budget;
- ``satcal analyze`` writes the stopping rule's verdict into ``calibration.json``.

The statistics (candidate pool, design criterion, stopping rule) live in
``satcal.analysis.adaptive``; this module only feeds them the workspace's answers. Each
function takes the statistics it uses as optional arguments, so the plumbing can be driven by
any criterion (the tests pass their own).

A look of the stopping rule is counted by information, not by calls: look ``j`` is reached
once ``j`` waves' worth of answers are in (``ceil(n_answers / wave_answers)``), so analysing
twice, refitting every few seconds in ``satcal serve`` or exporting a wave count the same
look, and the planned number of looks is the budget in waves (Lan and DeMets 1983).

References
----------
Lan, K. K. G. and DeMets, D. L. (1983). Discrete sequential boundaries for clinical trials.
*Biometrika* 70(3), 659-663.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ._threads import one_blas_thread
from .errors import SatcalError

__all__ = ["AdaptiveSettings", "POOL_FILE", "Wave", "build_pool", "adopt_pool", "next_wave", "export_next", "settlement",
           "capped_page_order",
           "calibration_record", "serve_refit", "ProcessRefit", "attach", "answered_study"]

#: The candidate pool every wave is chosen from.
POOL_FILE = "pool.csv"
#: The fit the stopping rule reads between waves and in serve's refits: the joint model (its
#: b1 leads the ranking) with a bootstrap that resamples workers and examples, as the rule
#: needs replicates of the differences.
SETTLE_FIT = {"sat_model": "both", "bootstrap": 100}
#: Candidates in the pool per example of the coverage design, when design.pool_size is 0: the
#: criterion needs room to choose.
POOL_PER_DESIGN = 10
#: Looks planned when the study has no budget.
DEFAULT_LOOKS = 10


@dataclass(frozen=True)
class AdaptiveSettings:
    """study.toml's adaptive keys ([design] and [serve] refit_seconds).

    Attributes
    ----------
    adaptive : bool
        ``design.adaptive``: the study asks where the ranking is open and stops when settled.
    wave_pages : int
        ``design.wave_pages``: pages of one wave (``export --next-batch``; one look of the
        stopping rule).
    confidence : float
        ``design.confidence``: the confidence, in [0.5, 1), at which the study is settled.
    top_m : int
        ``design.top_m``: size of the least-biased set the study settles.
    margin : float
        ``design.margin``: the indifference margin of the stopping rule; a formulation whose
        b1 is within it of the leader's counts as tied (>= 0).
    min_depth : int
        ``design.min_depth``: answered examples every phi and |dphi| cell gets before the
        criterion may pass it by.
    cell_cap : float
        ``design.cell_cap``: the largest share, in (0, 1], of a wave (``export --next-batch``) or of
        each ``wave_pages`` pages of the hosted study's order that one phi or |dphi| cell of the
        formulations the criterion reads may take while other examples are free (1: no cap).
    budget : int
        ``design.budget``: the study's budget in ``budget_unit``; 0 for none.
    budget_unit : str
        ``design.budget_unit``: ``"answers"`` or ``"pages"``.
    pool_size : int
        ``design.pool_size``: candidate examples in pool.csv; 0 for ``POOL_PER_DESIGN`` times
        the coverage design's size.
    refit_seconds : float
        ``serve.refit_seconds``: seconds between two refits of satcal serve's page order.
    """

    adaptive: bool = False
    wave_pages: int = 10
    confidence: float = 0.95
    top_m: int = 1
    margin: float = 0.005
    min_depth: int = 10
    cell_cap: float = 0.25
    budget: int = 0
    budget_unit: str = "answers"
    pool_size: int = 0
    refit_seconds: float = 5.0

    @classmethod
    def from_workspace(cls, ws) -> "AdaptiveSettings":
        """The adaptive keys of the study's [design] and ``serve.refit_seconds``.

        Parameters
        ----------
        ws : satcal.study.Study
            The workspace.

        Returns
        -------
        AdaptiveSettings
        """
        d = ws.config["design"]
        return cls(adaptive=d["adaptive"], wave_pages=d["wave_pages"], confidence=float(d["confidence"]),
                   top_m=d["top_m"], margin=float(d["margin"]), min_depth=d["min_depth"],
                   cell_cap=float(d["cell_cap"]), budget=d["budget"],
                   budget_unit=d["budget_unit"], pool_size=d["pool_size"],
                   refit_seconds=float(ws["serve.refit_seconds"]))


def _settings(ws) -> AdaptiveSettings:
    return AdaptiveSettings.from_workspace(ws)


def _require(ws, command: str) -> AdaptiveSettings:
    s = _settings(ws)
    if not s.adaptive:
        raise SatcalError(f"{ws.path}/study.toml: design.adaptive = false; {command} needs an adaptive study "
                          "(set [design] adaptive = true, then satcal generate DIR --force)")
    return s


# -- the pool ------------------------------------------------------------------------------
def build_pool(ws, judgments, formulations, design_size: int, candidate_pool=None) -> pd.DataFrame:
    """The candidate pool of an adaptive study: ``pool_size`` examples (``POOL_PER_DESIGN``
    times the coverage design's size when 0), made with the study's seed.

    Parameters
    ----------
    ws : satcal.study.Study
        The adaptive study's workspace.
    judgments : satcal.judgments.Judgments
        The study's judgments.
    formulations : list of Formulation
        The study formulations the pool covers.
    design_size : int
        Examples of the fixed coverage design.
    candidate_pool : callable or None, optional
        Builds the pool from ``(judgments, k, levels, formulations, n, seed)``; None
        (default) is :func:`satcal.analysis.adaptive.candidate_pool` with the generator's
        overlap and bins.

    Returns
    -------
    pandas.DataFrame
    """
    s = _settings(ws)
    if candidate_pool is None:
        from functools import partial
        from .analysis.adaptive import candidate_pool
        candidate_pool = partial(candidate_pool, overlap=ws["generator.overlap"], n_bins=ws["generator.n_bins"])
    n = s.pool_size or POOL_PER_DESIGN * int(design_size)
    return candidate_pool(judgments, ws.k, list(ws["study.levels"]), formulations, n, ws.seed + 17)


def adopt_pool(ws, result, judgments, design, candidate_pool=None) -> None:
    """Make the generator's ``result`` an adaptive study's: its examples (examples.csv, and
    pool.csv) become the candidate pool, with their scores; its coverage table stays the fixed
    coverage design's, the yardstick an adaptive study is compared with.

    Parameters
    ----------
    ws : satcal.study.Study
        The adaptive study's workspace.
    result : satcal.generate.GenerationResult
        The generator's result, changed in place.
    judgments : satcal.judgments.Judgments
        The study's judgments.
    design : satcal.generate.Design
        The generator's design (formulations and extra measures).
    candidate_pool : callable or None, optional
        See :func:`build_pool`.
    """
    from .generate import _score_table
    forms = list(design.formulations) + list(design.extra)
    pool = build_pool(ws, judgments, list(design.formulations), len(result.examples), candidate_pool)
    result.candidates = {**result.candidates, "coverage_design_examples": int(len(result.examples)),
                         "adaptive_pool": int(len(pool))}
    result.examples = pool.reset_index(drop=True)
    result.scores = _score_table(result.examples, forms, design)


def read_pool(ws) -> pd.DataFrame:
    """pool.csv, as generate wrote it (one line if it is missing).

    Parameters
    ----------
    ws : satcal.study.Study
        The adaptive study's workspace.

    Returns
    -------
    pandas.DataFrame

    Raises
    ------
    SatcalError
        pool.csv is missing or holds examples examples.csv does not.
    """
    if not ws.file(POOL_FILE).exists():
        raise SatcalError(f"{ws.path}/{POOL_FILE} is missing: an adaptive study draws its waves from the pool "
                          f"that satcal generate writes; run satcal generate {ws.path}"
                          + (" --force" if ws.file("examples.csv").exists() else ""))
    pool = ws.table(POOL_FILE)
    examples = ws.table("examples.csv")
    stray = ~pool["example_id"].isin(set(examples["example_id"]))
    if stray.any():  # a pool left by an earlier generate: its examples would resolve to nothing
        raise SatcalError(f"{ws.path}/{POOL_FILE}: example {pool['example_id'][stray].iloc[0]!r} is not in "
                          f"examples.csv (the pool of an earlier generate); run satcal generate {ws.path} --force")
    return pool


# -- answers so far ------------------------------------------------------------------------
def answered_study(ws, answers: pd.DataFrame | None):
    """The answered examples (:class:`~satcal.answers.StudyData`) of ``answers`` (rows of the
    answers table: ``example_id, worker_id, answer, is_trap``), or None when none answers an
    example.

    Parameters
    ----------
    ws : satcal.study.Study
        The adaptive study's workspace.
    answers : pandas.DataFrame or None
        The answers table, or None.

    Returns
    -------
    satcal.answers.StudyData or None
    """
    from .answers import StudyData
    if answers is None:
        return None
    real = answers[answers["is_trap"].astype(str) != "True"]
    if real.empty:
        return None
    examples = ws.table("examples.csv")
    merged = real[["example_id", "worker_id", "answer"]].merge(examples, on="example_id", how="inner",
                                                               validate="many_to_one")
    if merged.empty:
        return None
    for side in "ab":
        for i in range(1, ws.k + 1):
            merged[f"r{side}{i}"] = merged[f"r{side}{i}"].astype(int)
    return StudyData(merged.reset_index(drop=True), ws.k, max(ws["study.levels"]) + 1, ws.judgments(),
                     name=ws["study.name"])


def _ingested(ws) -> pd.DataFrame | None:
    return ws.table("answers.csv", required=False)


def _keys(ws) -> pd.DataFrame:
    keys = ws.keys()
    return keys if keys is not None else pd.DataFrame(columns=["item_id", "source_id", "is_trap", "page", "batch"])


def _examples_per_page(ws, keys: pd.DataFrame) -> float:
    """Examples (not traps) on a page of the batches exported so far; before any, the setting."""
    real = keys[keys["is_trap"].astype(str) != "True"]
    if len(real):
        pages = real.groupby([real.get("batch", pd.Series("1", index=real.index)).astype(str),
                              real["page"].astype(str)]).ngroups
        return len(real) / max(pages, 1)
    per_page = ws["presentation.items_per_page"]
    return float(per_page) if isinstance(per_page, int) else 10.0


@dataclass(frozen=True)
class Budget:
    """Answers an adaptive study may collect (None: no budget), and one wave's worth.

    Attributes
    ----------
    answers : int or None
        The budget in answers (a budget in pages turned into answers with the examples per page
        of the batches so far); None without a budget.
    wave_answers : float
        Answers one wave brings: ``wave_pages`` x examples per page x answers per example, at
        least 1.
    """

    answers: int | None
    wave_answers: float

    def looks(self, n_answers: int, waves_answered: int = 0) -> tuple[int, int]:
        """(look, planned looks) after ``n_answers`` answers from ``waves_answered`` waves (file
        platforms): the waves answered, or the whole waves' worth of answers in (a hosted
        study), at least 1; see the module docstring.

        Parameters
        ----------
        n_answers : int
            Answers collected.
        waves_answered : int, optional
            Waves with answers ingested (default 0).

        Returns
        -------
        tuple of (int, int)
        """
        look = max(1, waves_answered, math.floor(n_answers / self.wave_answers + 1e-9))
        planned = math.ceil(self.answers / self.wave_answers) if self.answers else DEFAULT_LOOKS
        return look, max(planned, look)

    def information(self, n_answers: int) -> float | None:
        """The information fraction answers / budget (None without a budget).

        Parameters
        ----------
        n_answers : int
            Answers collected (counted as at least 1).

        Returns
        -------
        float or None
            At most 1.
        """
        return None if not self.answers else min(1.0, max(n_answers, 1) / self.answers)

    def reached(self, n_answers: int) -> bool:
        """Whether ``n_answers`` has reached the budget (never without one).

        Parameters
        ----------
        n_answers : int
            Answers collected.

        Returns
        -------
        bool
        """
        return self.answers is not None and n_answers >= self.answers


def budget(ws, keys: pd.DataFrame | None = None) -> Budget:
    """The study's budget in answers and one wave's worth of answers.

    A budget in pages is turned into answers with the examples per page of the batches so far.

    Parameters
    ----------
    ws : satcal.study.Study
        The workspace.
    keys : pandas.DataFrame or None, optional
        The batches' keys; None (default) reads them all.

    Returns
    -------
    Budget
    """
    s = _settings(ws)
    per_page = _examples_per_page(ws, _keys(ws) if keys is None else keys)
    wave = max(1.0, s.wave_pages * per_page * ws["design.answers_per_example"])
    if not s.budget:
        return Budget(None, wave)
    answers = s.budget if s.budget_unit == "answers" else math.ceil(s.budget * per_page)
    return Budget(int(answers), wave)


# -- the stopping rule ---------------------------------------------------------------------
def waves_answered(ws, answers: pd.DataFrame | None) -> int:
    """The batches (waves) of which ingested answers hold at least one answer to an example.

    Parameters
    ----------
    ws : satcal.study.Study
        The adaptive study's workspace.
    answers : pandas.DataFrame or None
        The ingested answers.

    Returns
    -------
    int
    """
    if answers is None or not len(answers):
        return 0
    keys = _keys(ws)
    if "batch" not in keys.columns:
        return 1
    batch = keys.set_index("item_id")["batch"].astype(str)
    real = answers[answers["is_trap"].astype(str) != "True"]
    return int(real["item_id"].astype(str).map(batch).dropna().nunique())


def look_of(ws, n_answers: int, answers: pd.DataFrame | None = None) -> tuple[int, int]:
    """(look, planned looks) of the stopping rule after these answers.

    Parameters
    ----------
    ws : satcal.study.Study
        The adaptive study's workspace.
    n_answers : int
        Answers collected.
    answers : pandas.DataFrame or None, optional
        The ingested answers, to count the waves answered.

    Returns
    -------
    tuple of (int, int)
    """
    return budget(ws).looks(n_answers, waves_answered(ws, answers))


def settlement(ws, study, result=None, settle=None, n_answers: int | None = None, look=None):
    """The stopping rule's verdict on ``study`` (answers so far): ``settle`` (default
    :func:`satcal.analysis.adaptive.settle`) on ``result`` (fitted here with ``SETTLE_FIT``
    when not given), at the look the answers have reached; None when the answers are still too
    few to fit the curves (not settled).

    Parameters
    ----------
    ws : satcal.study.Study
        The adaptive study's workspace.
    study : satcal.answers.StudyData or None
        The answers so far (used when ``result`` is None, and for their number).
    result : satcal.analysis.CalibrationResult or None, optional
        A fitted calibration; None fits one.
    settle : callable or None, optional
        The stopping rule.
    n_answers : int or None, optional
        Answers counted; None takes the examples of ``study``.
    look : tuple of (int, int) or None, optional
        (look, planned looks); None takes them from the budget.

    Returns
    -------
    verdict or None
        What ``settle`` returns; None when the answers are too few to fit.
    """
    if settle is None:
        from .analysis.adaptive import settle
    if result is None:
        from .analysis import calibrate
        try:
            result = calibrate(study, formulations=ws.formulations(), seed=ws.seed, **SETTLE_FIT)
        except SatcalError:
            return None  # too few answers to fit the curves: nothing can be settled yet
    s = _settings(ws)
    n = len(study.examples) if n_answers is None else n_answers
    look, planned = look if look is not None else budget(ws).looks(n)
    info = budget(ws).information(n)
    extra = {"information": info} if info is not None else {}
    if study is not None:   # checked against the calibration's count (std_replicates)
        extra["study"] = study
    return settle(result, confidence=s.confidence, top_m=s.top_m, look=look, max_looks=planned,
                  margin=s.margin, **extra)


def calibration_record(ws, result, settle=None) -> dict:
    """calibration.json's ``adaptive`` block: the verdict (settled, leaders, confidence,
    looks, alpha spent, answers) and the budget.

    Parameters
    ----------
    ws : satcal.study.Study
        The adaptive study's workspace.
    result : satcal.analysis.CalibrationResult
        The analysis of the answers.
    settle : callable or None, optional
        The stopping rule; None is the default rule.

    Returns
    -------
    dict
    """
    answers = _ingested(ws)
    n = int(result.meta.get("crowd", {}).get("answers", 0)) or int(result.meta.get("n_examples", 0))
    study = None   # the answers the analysis fitted: b1_std's replicates then refit the weights
    if hasattr(ws, "study_data"):
        try:
            study = ws.study_data()
        except SatcalError:
            study = None
        if study is not None and len(study.examples) != int(result.meta.get("n_examples", -1)):
            study = None
    verdict = settlement(ws, study, result=result, settle=settle, n_answers=n, look=look_of(ws, n, answers))
    b = budget(ws)
    record = dict(verdict.to_dict())
    record.update(budget_answers=b.answers, budget_reached=b.reached(n), summary=verdict.summary())
    return record


# -- waves (file platforms) ----------------------------------------------------------------
@dataclass(frozen=True)
class Wave:
    """The next wave: its examples (rows of examples.csv, in the criterion's order) and
    traps, and its number among the batches.

    Attributes
    ----------
    examples : pandas.DataFrame
        The rows of examples.csv the criterion chose, in its order (without its priority).
    traps : pandas.DataFrame
        The traps drawn for the wave (rows of traps.csv; empty when none).
    batch : int
        The wave's batch number: one more than the batches exported so far.
    items_per_page : int
        Items per page of the wave (``presentation.items_per_page``, or worked out from the
        pool's reading load when ``"auto"``, the traps a hosted study shows on top of its
        pages counted, as the fixed study's are).
    """

    examples: pd.DataFrame
    traps: pd.DataFrame
    batch: int
    items_per_page: int


def _visible_sample(ws, pool: pd.DataFrame) -> pd.DataFrame:
    """What workers would see of the pool's first 50 examples: the reading load "auto" sizes
    pages by."""
    from .platforms import build_items
    visible, _ = build_items(pool.head(50), pd.DataFrame(), ws.k, seed=ws.seed, items_per_page=10,
                             documents=ws.documents(), topics=ws.topics())
    return visible


def _items_per_page(ws, pool: pd.DataFrame) -> int:
    per_page = ws["presentation.items_per_page"]
    if per_page != "auto":
        return int(per_page)
    from .platforms.serve import auto_items_per_page
    return auto_items_per_page(_visible_sample(ws, pool), ws.k)


def _serve_on_top(ws, platform: str | None) -> bool:
    """Whether a wave's pages are the hosted study's under "auto" with traps shown on top: they
    are then sized as the fixed study's (``Study._serve_items_per_page``), traps on top counted."""
    return ((platform or ws["presentation.platform"]) == "serve" and ws["serve.traps_on_top"]
            and ws["presentation.items_per_page"] == "auto")


def next_wave(ws, plan_wave=None, settle=None, platform: str | None = None) -> Wave:
    """The next wave of an adaptive study, or a one-line refusal: not adaptive, settled, at the
    budget, or every candidate asked.

    ``plan_wave`` (default :func:`satcal.analysis.adaptive.plan_wave`) chooses ``n`` of the
    pool's examples not yet asked from the answers ingested so far (None before any).

    Parameters
    ----------
    ws : satcal.study.Study
        The adaptive study's workspace.
    plan_wave : callable or None, optional
        The wave planner.
    settle : callable or None, optional
        The stopping rule; None is :func:`satcal.analysis.adaptive.settle`.
    platform : str or None, optional
        The platform the wave is for; None takes the study's. The hosted study's pages under
        ``"auto"`` with ``serve.traps_on_top`` leave room for the traps shown on top of them.

    Returns
    -------
    Wave

    Raises
    ------
    SatcalError
        The study is not adaptive, settled, at its budget, or every candidate is asked.
    """
    s = _require(ws, "export --next-batch")
    if plan_wave is None:
        from functools import partial
        from .analysis.adaptive import plan_wave
        plan_wave = partial(plan_wave, n_bins=ws["generator.n_bins"], top_level=max(ws["study.levels"]),
                            margin=s.margin, reference_seed=ws.seed, cell_cap=s.cell_cap)
    pool = read_pool(ws)
    keys = _keys(ws)
    asked = set(keys.loc[keys["is_trap"].astype(str) != "True", "source_id"].astype(str))
    b = budget(ws, keys)
    ingested = _ingested(ws)
    study = answered_study(ws, ingested)
    n_answers = 0 if study is None else len(study.examples)
    if b.reached(n_answers):
        raise SatcalError(f"{ws.path}: the study has {n_answers} answers, its budget is {b.answers} "
                          f"(design.budget): no further wave. Analyse it: satcal analyze {ws.path}")
    asked_answers = len(asked) * ws["design.answers_per_example"]
    if b.answers is not None and asked_answers >= b.answers:
        raise SatcalError(f"{ws.path}: the waves exported already ask for {asked_answers} answers, the budget "
                          f"is {b.answers} (design.budget): ingest their answers and analyse them")
    if study is not None:
        verdict = settlement(ws, study, settle=settle, look=look_of(ws, n_answers, ingested))
        if verdict is not None and verdict.settled:
            raise SatcalError(f"{ws.path}: the study is {verdict.summary().splitlines()[0]}; no "
                              f"further wave is needed. Analyse it: satcal analyze {ws.path}")
    per_page = _items_per_page(ws, pool)
    traps = ws.table("traps.csv", required=False)
    traps = traps if traps is not None else pd.DataFrame()
    batch = ws.batch_number() + 1
    rng = np.random.default_rng([ws.seed, 24, batch])
    plan_seed = int(rng.integers(2 ** 31))
    on_top = _serve_on_top(ws, platform) and len(traps) > 0
    if on_top:
        # the traps on top of a page take room too: the pages are sized with the wave's own
        # traps (a draw at the reading load's size; its prefix is the draw at the final size)
        import warnings
        with warnings.catch_warnings():   # the final size's shortfall is warned below
            warnings.simplefilter("ignore")
            first = _wave_traps(ws, traps, s.wave_pages * per_page, per_page)
        drawn = rng.permutation(len(traps))
        per_page = ws._serve_items_per_page(_visible_sample(ws, pool), traps.iloc[drawn[:first]],
                                            s.wave_pages * per_page - first)
    items = s.wave_pages * per_page
    n_traps = _wave_traps(ws, traps, items, per_page)
    n = items - n_traps
    if b.answers is not None:  # the last wave asks for what the budget leaves
        n = min(n, max(1, math.ceil((b.answers - asked_answers) / ws["design.answers_per_example"])))
    left = len(set(pool["example_id"].astype(str)) - asked)
    if left == 0:
        raise SatcalError(f"{ws.path}: every example of {POOL_FILE} ({len(pool)}) has been asked; a larger pool "
                          "needs a new study (design.pool_size)")
    chosen = plan_wave(pool, study, ws.formulations(), min(n, left), seed=plan_seed,
                       min_depth=s.min_depth, exclude=sorted(asked))
    ids = chosen["example_id"].astype(str)
    if ids.isin(asked).any() or ids.duplicated().any():
        raise SatcalError(f"{ws.path}: the wave planner chose example {ids[ids.isin(asked) | ids.duplicated()].iloc[0]!r} "
                          "twice or again; this is a bug, please report it")
    examples = ws.table("examples.csv").set_index("example_id").loc[ids].reset_index()
    if "priority" in chosen.columns:
        examples["priority"] = chosen["priority"].to_numpy()
    if on_top:
        wave_traps = traps.iloc[np.sort(drawn[:n_traps])]
    else:
        wave_traps = traps.iloc[np.sort(rng.choice(len(traps), size=n_traps, replace=False))] if n_traps else traps.iloc[:0]
    return Wave(examples.drop(columns=["priority"], errors="ignore"), wave_traps.reset_index(drop=True), batch,
                per_page)


def export_next(ws, platform: str | None = None, plan_wave=None, settle=None) -> list:
    """``satcal export DIR --next-batch``: the next wave (:func:`next_wave`) written as a new
    batch for ``platform``, under the workspace lock; the paths written.

    Parameters
    ----------
    ws : satcal.study.Study
        The adaptive study's workspace.
    platform : str or None, optional
        Platform; None takes the study's.
    plan_wave, settle : callable or None, optional
        See :func:`next_wave`.

    Returns
    -------
    list of pathlib.Path
    """
    with ws.locked():
        return ws._export(platform, False, True, wave=next_wave(ws, plan_wave, settle, platform))


def _wave_traps(ws, traps: pd.DataFrame, items: int, per_page: int) -> int:
    """Traps in a wave: the trap rule's count (:func:`satcal.quality.traps_within`, as the
    hosted study's ``"auto"`` and the platforms' test questions take it), at most half the
    wave's items (the wave stays mostly examples) unless ``quality.min_traps`` asks more, and
    never the whole wave; a warning with the
    power reached where the wave is too short for the count."""
    import warnings
    from .errors import SatcalWarning
    from .quality import _chance, traps_within
    if not len(traps) or items < 2:
        return 0
    power = ws["quality.trap_power"]
    n, needed, reached = traps_within(_chance(traps), items // 2, ws["quality.trust_threshold"], power,
                                      ws["quality.min_traps"])
    n = min(n, items - 1)
    if needed is not None and n < needed <= len(traps):
        pages = -(-2 * needed // max(per_page, 1))
        warnings.warn(f"{ws.path}: the wave holds {n} traps, not the trap rule's {needed}: a wave of {items} items "
                      f"keeps at least half for examples, so a worker answering at random is excluded by the traps "
                      f"alone with probability {reached:.3f}, not quality.trap_power = {power:g}; raise [design] "
                      f"wave_pages to {pages}", SatcalWarning, stacklevel=3)
    return int(n)


# -- the hosted study ----------------------------------------------------------------------
def capped_page_order(priority, pages, cells, wave_pages: int, cell_cap: float, exempt=frozenset(),
                      later=frozenset(), taken=()) -> list:
    """The hosted study's page order under a wave's cell cap: the pages by ``priority``
    (highest first, ties by page number; pages in ``later`` after all others), each successive
    run of ``wave_pages`` pages taking, greedily, the best page that keeps every cell of
    ``cells`` within ``ceil(cell_cap x examples of a run)`` examples of the run (a run's
    examples: ``wave_pages`` times the mean examples a page), then, if none is left that fits,
    the best of the others. Pages in ``exempt`` (an example in a cell short of ``min_depth``)
    are never held back: the cell floor comes first, as in
    :func:`satcal.analysis.adaptive.plan_wave`, whose cap this is for pages fixed at export.

    Parameters
    ----------
    priority : mapping of int to float
        Each page's priority.
    pages : array_like of int
        The page of each example, aligned with the rows of ``cells``.
    cells : array_like of int, shape (examples, c)
        The cells each example counts in (:func:`satcal.analysis.adaptive.pool_cells`); an
        example counts once in a cell however many of its columns name it.
    wave_pages : int
        Pages of a run (``design.wave_pages``).
    cell_cap : float
        ``design.cell_cap``, in (0, 1]; 1 is no cap.
    exempt : collection of int, optional
        Pages never held back by the cap.
    later : collection of int, optional
        Pages ordered after the others (those the next claims cannot take: the server hands
        out the emptiest pages first).
    taken : sequence of int, optional
        Pages already handed out in the run under way, fewer than ``wave_pages``: their
        examples count in the first run, which takes ``wave_pages - len(taken)`` pages more,
        so the runs stay aligned with the claims (a taken page may be ordered again: it is
        handed out again only if its holder timed out).

    Returns
    -------
    list of int
        The pages, first handed out first.
    """
    order = sorted(priority, key=lambda p: (p in later, -float(priority[p]), int(p)))
    cells = np.asarray(cells, dtype=np.int64)
    taken = [int(p) for p in taken]
    if len(taken) >= max(wave_pages, 1):
        raise ValueError(f"{len(taken)} pages taken in a run of {wave_pages}: expected fewer")
    if cell_cap >= 1 or not len(order) or not cells.size:
        return [int(p) for p in order]
    pages = np.asarray(pages, dtype=np.int64)
    position = pd.Index(np.asarray(order, dtype=np.int64)).get_indexer(pages)   # -1: a page not ordered
    srt = np.sort(cells, axis=1)
    once = np.ones(srt.shape, bool)   # an example counts once in a cell
    once[:, 1:] = srt[:, 1:] != srt[:, :-1]
    once &= (position >= 0)[:, None]
    # (cell, page position) pairs and the examples of the page in the cell, sorted by cell: each
    # cell's pages are a slice (a compressed column), so a take checks only the cells it fills
    width = len(order) + 1
    key, counts = np.unique(srt[once] * width + np.broadcast_to(position[:, None], srt.shape)[once],
                            return_counts=True)
    pairs = np.stack([key // width, key % width], 1)
    n_cells = int(srt.max()) + 1
    by_page = np.argsort(pairs[:, 1], kind="stable")
    page_start = np.searchsorted(pairs[by_page, 1], np.arange(len(order) + 1))
    cap = max(1, math.ceil(cell_cap * wave_pages * int((position >= 0).sum()) / len(order)))
    free_of_cap = np.isin(np.asarray(order, dtype=np.int64), np.asarray(list(exempt), dtype=np.int64))
    # only the pairs of pages the cap may hold back are searched when a cell fills: early in a
    # study most pages are exempt (an example in a short cell), and searching theirs too cost
    # 5 s a refit at 4,174 pages and 34 formulations read
    holdable = ~free_of_cap[pairs[:, 1]]
    # within each cell, the most examples first: the pages a cell holds back are a prefix
    by_count = np.lexsort((-counts[holdable], pairs[holdable, 0]))
    hold_cell = pairs[holdable, 0][by_count]
    hold_page, hold_count = pairs[holdable, 1][by_count], counts[holdable][by_count]
    start = np.searchsorted(hold_cell, np.arange(n_cells + 1))
    top = int(hold_count.max()) if hold_count.size else 0
    # above[c, v]: the holdable pages with more than v examples in cell c (a prefix's length)
    above = np.stack([np.bincount(hold_cell[hold_count > v], minlength=n_cells) for v in range(top + 1)], 1)
    most = np.zeros(n_cells)   # the most examples of one such page in each cell
    most[start[:-1] < start[1:]] = hold_count[start[:-1][start[:-1] < start[1:]]]
    left = np.ones(len(order), bool)   # not yet in the order
    alone = np.zeros(len(order), bool)   # past the cap on its own
    alone[hold_page[hold_count > cap]] = True
    place = {int(p): i for i, p in enumerate(order)}

    def add(i, in_run, fits, shut):
        """Page ``order[i]`` joins the run: count its cells, hold back what no longer fits."""
        mine = by_page[page_start[i]:page_start[i + 1]]
        cell = pairs[mine, 0]
        in_run[cell] += counts[mine]
        filled = cell[(in_run[cell] + most[cell] > cap) & ~shut[cell]]   # only these may hold a page back
        if not filled.size:
            return
        room = (cap - in_run[filled]).astype(np.int64)   # whole examples: more than room is held back
        lengths = above[filled, np.clip(room, 0, top)]   # above[:, top] is 0: room >= top holds none back
        at = np.repeat(start[filled] - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths) \
            + np.arange(int(lengths.sum()))
        fits[hold_page[at]] = False
        shut[filled[room < 1]] = True   # every page in these cells is held back: no need to look again

    out: list = []
    already = len(taken)   # the run under way: its pages handed out count, and it is shorter
    while len(out) < len(order):
        in_run = np.zeros(n_cells)
        shut = np.zeros(n_cells, bool)   # cells of the run whose every holdable page is held back
        fits = left & ~alone   # left, and no cell of the run would go past the cap with it
        for p in taken if already else ():
            if p in place:
                add(place[p], in_run, fits, shut)
        for _ in range(min(wave_pages - already, len(order) - len(out))):
            i = int(np.argmax(fits))
            if not fits[i]:   # no page left fits the run: the best of the others
                i = int(np.argmax(left))
            left[i] = fits[i] = False
            out.append(int(order[i]))
            add(i, in_run, fits, shut)
        already = 0
    return out


def _served_answers(ws, engine, key: pd.DataFrame) -> pd.DataFrame | None:
    """The hosted study's answers now (its database), resolved against its key as ingest does
    (traps scored, excluded workers left out), with the answers ingested from other batches."""
    from .ingest import resolve_rows
    from .platforms._common import raw_answers
    from .serve import db
    snap = db.snapshot(engine)
    rows = raw_answers("serve-database", snap["item_id"], snap["worker_id"], snap["answer"],
                       snap["submitted_at"], snap["row_id"], None, snap["status"], None, snap["seconds"])
    if "attention_passed" in snap.columns:
        rows["attention_passed"] = snap["attention_passed"].to_numpy()
    examples = set(ws.table("examples.csv")["example_id"].astype(str))
    limit = None if ws["serve.keep_failed_attention"] else ws["serve.attention_fail_limit"]
    answers, *_ = resolve_rows(rows, key, examples, ws["quality.trust_threshold"], ws["quality.min_traps"],
                               attention_limit=limit)
    earlier = _ingested(ws)
    if earlier is not None and len(earlier):
        earlier = earlier[~earlier["item_id"].astype(str).isin(set(key["item_id"].astype(str)))]
        answers = pd.concat([earlier[answers.columns.intersection(earlier.columns)], answers], ignore_index=True)
    return answers


def _hand_outs(engine, wave_pages: int, answers_per_example: int, now: float | None = None) -> tuple:
    """What the next claims of a hosted study can take, read from its database: the pages
    they cannot take yet (no free slot at the lowest replicate with a free slot: held by a
    participant or answered; a claim takes the emptiest pages first) and the pages of the run
    of ``wave_pages`` claims under way (the last ``claims mod wave_pages`` claims, by
    assignment id). Returns ``(later, taken)``: a set and a tuple of page numbers."""
    import time

    from sqlalchemy import func, select

    from .serve import db
    t = db.tables()
    s, a = t["slots"], t["assignments"]
    now = time.time() if now is None else now
    free = (s.c.done.is_(False) & (s.c.replicate <= answers_per_example)
            & (s.c.assignment_id.is_(None) | (s.c.held_until < now)))
    with engine.connect() as conn:
        pages = set(conn.execute(select(s.c.page).distinct()).scalars())
        level = conn.execute(select(func.min(s.c.replicate)).where(free)).scalar()
        ready = set() if level is None else set(conn.execute(
            select(s.c.page).where(free & (s.c.replicate == level))).scalars())
        claims = conn.execute(select(func.count()).select_from(a)).scalar_one()
        under_way = claims % max(int(wave_pages), 1)
        taken = [] if not under_way else list(conn.execute(
            select(a.c.page).order_by(a.c.id.desc()).limit(under_way)).scalars())
    return pages - ready, tuple(int(p) for p in reversed(taken))


#: Seconds the server's refit process waits for the stopping rule at a new look before it
#: publishes the order with the previous verdict; the rule goes on in its thread and a later
#: refit reads it. A look's calibration with its bootstrap takes 30-50 s of CPU
#: (docs/benchmarks.md, "The refit's CPU"), during which the order would otherwise lag the answers.
SETTLE_WAIT = 1.0


def _ask(rule, wait: float | None) -> tuple:
    """``rule()`` in a daemon thread, waited for up to ``wait`` seconds (None: until it
    ends): (the thread, a dict that gets ``verdict`` or ``error``)."""
    import threading
    box: dict = {}

    def run():
        try:
            box["verdict"] = rule()
        except Exception as exc:  # raised by the refit that reads it
            box["error"] = exc

    thread = threading.Thread(target=run, name="satcal-settle", daemon=True)
    thread.start()
    thread.join(wait)
    return thread, box


def serve_refit(ws, engine, priorities=None, settle=None, settle_wait: float | None = None):
    """The refit ``satcal serve`` runs in the background on an adaptive study: the answers in
    its database, the criterion's priority of each example (default
    :func:`satcal.analysis.adaptive.example_priorities`) averaged over each page's examples,
    and whether to stop (settled, or at the budget). Where the criterion names the
    formulations a wave's cap reads (``attrs["capped"]``) and ``design.cell_cap`` is below 1,
    the pages go in the capped order of :func:`capped_page_order` instead: it is worked out
    here, in the refit, so a participant's claim reads it without waiting. Its runs are aligned
    with the claims: the pages the next claims cannot take (held or answered at the lowest
    replicate with a free slot) come last, and the pages of the run of ``wave_pages`` claims
    under way count in its first run (:func:`_hand_outs`, read after the criterion's fit, so
    only claims made while the order itself is worked out can fall outside it). The
    criterion's fit is redone only on new answers; the order, whenever the claims moved. At a
    new look the stopping rule runs in a thread of its own (one look at a time): the refit
    waits for it up to ``settle_wait`` seconds (the server's refit process: :data:`SETTLE_WAIT`),
    else publishes the new order with the previous verdict and a later refit reads the look's
    verdict when it is in.

    Parameters
    ----------
    ws : satcal.study.Study
        The adaptive study's workspace.
    engine : sqlalchemy.engine.Engine
        The hosted study's database.
    priorities : callable or None, optional
        The criterion's priority of each example.
    settle : callable or None, optional
        The stopping rule; None is the default rule.
    settle_wait : float or None, optional
        Seconds a refit waits for the rule at a new look; None (default) waits until it is in.

    Returns
    -------
    callable
        Takes no argument and returns a :class:`satcal.serve.priority.Plan`.

    Raises
    ------
    SatcalError
        The study is not adaptive.
    """
    if priorities is None:
        from functools import partial
        from .analysis.adaptive import example_priorities
        # the cache keeps each refit's fits: the next starts from them (a warm start)
        priorities = partial(example_priorities, n_bins=ws["generator.n_bins"],
                             top_level=max(ws["study.levels"]), cache={}, margin=_settings(ws).margin,
                             reference_seed=ws.seed)
    from .analysis.adaptive import SHORT_FIRST, pool_cells
    from .serve.priority import Plan
    s = _require(ws, "serve")
    key = ws.table("key.csv")
    real = key[key["is_trap"].astype(str) != "True"]
    pages = pd.Series(real["page"].astype(int).to_numpy(), index=real["source_id"].astype(str))
    pool = ws.table("examples.csv")
    pool = pool[pool["example_id"].astype(str).isin(set(pages.index))].reset_index(drop=True)
    forms, b = ws.formulations(), budget(ws, key)
    seed = int(np.random.default_rng([ws.seed, 24, 0]).integers(2 ** 31))

    # look -> (thread, box): the rule is asked once per look, never again within it, in a thread
    # of its own so the order goes on refreshing while a look's calibration runs (:func:`_ask`)
    tested: dict = {}
    # waves answered through files before this batch are looks taken (export --next-batch asked
    # the rule at the last of them): the server asks it from the next look on
    earlier = waves_answered(ws, _ingested(ws))

    # the previous refit's answers and fit (no new answer, no new fit), its hand-outs and order
    # (no new answer and no claim since, the same order), and its plan (nor a new verdict)
    last: dict = {}

    def _capped_plan(ranked: dict, by_page: pd.Series, cells, hand_outs: tuple) -> dict:
        """The page priorities of the capped order (:func:`capped_page_order`): pages
        with an example in a short cell are exempt; pages the next claims cannot take come
        after the rest; the run under way counts."""
        exempt = set(by_page.index[by_page.to_numpy() >= SHORT_FIRST])
        later, taken = hand_outs
        order = capped_page_order(ranked, pages.to_numpy(), cells, s.wave_pages, s.cell_cap, exempt, later, taken)
        return {p: float(len(order) - i) for i, p in enumerate(order)}

    def refit() -> Plan:
        answers = _served_answers(ws, engine, key)
        if "fit" not in last or not last["answers"].equals(answers):
            study = answered_study(ws, answers)
            last.update(answers=answers, study=study, fit=_fit(study))
            last.pop("order", None)
        capped = last["fit"][2] is not None
        hand_outs = _hand_outs(engine, s.wave_pages, ws["design.answers_per_example"]) if capped else None
        if "order" not in last or last["hand_outs"] != hand_outs:
            last.update(hand_outs=hand_outs, order=_order(*last["fit"], hand_outs))
            last.pop("plan", None)
        state = _look(last["study"])
        if "plan" not in last or last["state"] != state:
            last.update(state=state, plan=_plan(last["study"], last["order"], state))
        return last["plan"]

    def _fit(study) -> tuple:
        """The criterion on the answers: each page's priority (mean over its examples), the
        examples' priorities by page, and the capped formulations' cells of each key row
        (None when no cap applies)."""
        score = priorities(pool, study, forms, seed=seed, min_depth=s.min_depth)
        by_page = pd.Series(pages.index.map(score).to_numpy(dtype=float), index=pages.to_numpy())
        ranked = by_page.groupby(level=0).mean().dropna().to_dict()
        capped = score.attrs.get("capped") or []
        cells = None
        if capped and s.cell_cap < 1:   # the cap of a wave, on each wave_pages pages handed out
            cells = pool_cells(pool, study, capped, n_bins=ws["generator.n_bins"], top_level=max(ws["study.levels"]))
            cells = cells[pd.Index(pool["example_id"].astype(str)).get_indexer(pages.index)]  # each key row's
        return ranked, by_page, cells

    def _order(ranked: dict, by_page: pd.Series, cells, hand_outs) -> dict:
        return ranked if cells is None else _capped_plan(ranked, by_page, cells, hand_outs)

    def _look(study):
        """Asks the rule at a new look (none under way) and returns the state the plan reads:
        "budget", the latest look whose verdict is in, or None."""
        n = 0 if study is None else len(study.examples)
        if b.reached(n):
            return "budget"
        now = max(earlier, math.floor(n / b.wave_answers + 1e-9))  # 0: no whole wave's worth yet
        busy = any(thread.is_alive() for thread, _ in tested.values())
        if study is not None and now > earlier and now not in tested and not busy:
            tested[now] = _ask(lambda: settlement(ws, study, settle=settle, look=b.looks(n, earlier)), settle_wait)
        done = [k for k, (thread, _) in tested.items() if not thread.is_alive()]
        if done and "error" in tested[max(done)][1]:
            raise tested.pop(max(done))[1]["error"]   # as a refit failure; asked again next time
        return max(done) if done else None

    def _plan(study, ranked: dict, state) -> Plan:
        n = 0 if study is None else len(study.examples)
        if state == "budget":
            return Plan(ranked, True, f"budget reached: {n} answers of {b.answers}")
        verdict = tested[state][1]["verdict"] if state is not None else None
        if verdict is not None and verdict.settled:
            return Plan(ranked, True, verdict.summary().splitlines()[0])
        return Plan(ranked, False, f"{n} answers, not settled" + (f" ({verdict.summary()})" if verdict else ""))

    # one BLAS thread: with OpenBLAS's default (a thread a core) the warm fits' L-BFGS-B and the
    # criterion's small products spin idle threads on a busy machine, 6.1 s of CPU against 1.2 s
    # for the same refit at 150 answers (docs/benchmarks.md, "The refit's CPU")
    return one_blas_thread(refit)


#: The refit of this process when it is the server's refit process (built on its first call).
_CHILD_REFIT = None
#: How much lower the refit process's scheduling priority is than the server's (Unix nice).
REFIT_NICENESS = 19


#: Linux: scheduling class and nice are a thread's, so the server can set its new refit process's
#: first thread before that starts others (elsewhere the process sets its own, at its first refit).
_PER_THREAD = hasattr(os, "sched_setscheduler") and os.path.isdir("/proc/self/task")


def _thread_ids() -> list[int]:
    """The kernel's ids of this process's threads (Linux: /proc/self/task); empty elsewhere."""
    try:
        return [int(tid) for tid in os.listdir("/proc/self/task")]
    except OSError:
        return []


def _yield_the_cores(pid: int = 0) -> str:
    """Give process ``pid`` (0: this one) the lowest CPU priority the platform allows, so that
    a busy server's threads always come first: nice :data:`REFIT_NICENESS`, and on Linux the
    ``SCHED_IDLE`` class, which runs only on a core that would otherwise idle (its weight is 3
    against nice 19's 15 and nice 0's 1,024). On Linux both are a thread's, not a process's:
    with ``pid`` 0 every thread the process has now is set (the calling thread's is inherited
    by the threads it starts later, e.g. the stopping rule's); with another ``pid``, its first
    thread, before it starts others. Where ``SCHED_IDLE`` is missing or refused, nice alone,
    silently; where both are, nothing.

    Parameters
    ----------
    pid : int, optional
        The process; 0 (default) is this one.

    Returns
    -------
    str
        ``"idle"`` (SCHED_IDLE and nice), ``"nice"`` or ``"none"``: what the calling thread (or
        ``pid``'s first thread) got.
    """
    import threading
    # the calling thread first: the threads it starts inherit its class and nice
    tids = [pid] if pid else [0] + [t for t in _thread_ids() if t != threading.get_native_id()]
    got = "none"
    for i, tid in enumerate(tids):
        try:
            if tid == 0 and hasattr(os, "nice"):
                os.nice(REFIT_NICENESS)   # a thread's on Linux, the process's on other Unixes
            elif hasattr(os, "setpriority"):
                os.setpriority(os.PRIO_PROCESS, tid, max(REFIT_NICENESS, os.getpriority(os.PRIO_PROCESS, tid)))
            got = "nice" if i == 0 else got
        except OSError:   # a thread gone meanwhile, or the call refused: the others still go
            pass
        if hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_IDLE"):
            try:
                os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
                got = "idle" if i == 0 else got
            except OSError:   # refused (a seccomp filter, an old kernel): nice alone
                pass
    return got


#: Seconds between two checks of the refit process that its server is still alive.
ORPHAN_CHECK_SECONDS = 1.0


def _exit_with_the_server() -> None:
    """In the refit process, at its start: end it once its server is gone. A server ended by a
    signal (uvicorn re-raises SIGTERM after its shutdown) or killed runs no ``atexit``, and an
    idle pool process would otherwise live on, orphaned, holding the study's database open."""
    import os
    import threading
    import time
    server = os.getppid()

    def watch():
        while os.getppid() == server:
            time.sleep(ORPHAN_CHECK_SECONDS)
        os._exit(0)

    threading.Thread(target=watch, name="satcal-refit-watch", daemon=True).start()


def _refit_in_child(path: str, url: str, open_workspace):
    """One refit, in the server's refit process: the workspace (opened by
    ``open_workspace(path)``: this module does not import the workspace, which imports it), the
    database and the criterion's warm-start cache are kept there between calls."""
    global _CHILD_REFIT
    if _CHILD_REFIT is None:
        from .serve import db
        # the server's threads come first when the cores are busy: SCHED_IDLE and nice 19 for every
        # thread now here (OpenBLAS's, the orphan watch), and by inheritance for those started later
        # (the stopping rule's); the server set this thread's already at the spawn, as it could
        _yield_the_cores()
        from threadpoolctl import threadpool_limits
        # for good, not per call: the stopping rule's thread may outlive the refit that started it
        threadpool_limits(limits=1, user_api="blas")
        _CHILD_REFIT = serve_refit(open_workspace(path), db.connect(url), settle_wait=SETTLE_WAIT)
    return _CHILD_REFIT()


class ProcessRefit:
    """``serve_refit`` run in a process of its own (spawned once, kept): the server's
    threads never share an interpreter lock with a refit, so a refit costs participants
    nothing but a core's share. A refit process that died is replaced at the next call.

    Parameters
    ----------
    path : str or os.PathLike
        The study directory, opened in the refit process.
    url : str
        The server's database URL (password included: the child connects on its own).
    open_workspace : callable
        Opens the study directory given its path (``Study.open``), called in the refit
        process; picklable, as the process is spawned.
    """

    def __init__(self, path, url: str, open_workspace):
        self.args = (str(path), url, open_workspace)
        self.pool = None
        self.yielded: set = set()   # the refit processes given the lowest priority (pids)

    def __call__(self):
        from concurrent.futures.process import BrokenProcessPool
        if self.pool is None:
            import atexit
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor
            self.pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                                            initializer=_exit_with_the_server)
            atexit.register(self.pool.shutdown, wait=False, cancel_futures=True)
        try:
            future = self.pool.submit(_refit_in_child, *self.args)
            for pid in list(getattr(self.pool, "_processes", None) or ()) if _PER_THREAD else ():
                if pid not in self.yielded:
                    # the new process's first thread at once, before it imports numpy (whose BLAS
                    # threads then inherit it): its start-up, not only its refits, yields the cores.
                    # From this (server) thread, never by lowering it: a starved thread holding
                    # the interpreter lock would stall every participant's request
                    self.yielded.add(pid)
                    _yield_the_cores(pid)
            return future.result()
        except BrokenProcessPool:
            self.pool = None
            raise


def attach(ws, study, priorities=None, settle=None, process: bool | None = None) -> bool:
    """Give a :class:`~satcal.serve.HostedStudy` of an adaptive workspace its page order,
    refitted in the background while the server runs (the first refit at its start: until it
    is in, pages go in page order; the server's start never waits for it). The refit runs in a process of its own
    (:class:`ProcessRefit`) unless ``process`` is false or a criterion or rule is passed in
    (they run in the server's background thread). False, and nothing done, for a fixed study.

    Parameters
    ----------
    ws : satcal.study.Study
        The adaptive study's workspace.
    study : satcal.serve.HostedStudy
        The hosted study, given its ``order``.
    priorities : callable or None, optional
        The criterion (see :func:`serve_refit`).
    settle : callable or None, optional
        The stopping rule.
    process : bool or None, optional
        Refit in a process of its own; None (default) does so when neither
        ``priorities`` nor ``settle`` is given.

    Returns
    -------
    bool
        Whether the study is adaptive.
    """
    s = _settings(ws)
    if not s.adaptive:
        return False
    from .serve.priority import PageOrder
    if process is None:
        process = priorities is None and settle is None
    if process:
        refit = ProcessRefit(ws.path.resolve(), study.engine.url.render_as_string(hide_password=False),
                             type(ws).open)
    else:
        refit = serve_refit(ws, study.engine, priorities, settle)
    study.order = PageOrder(refit, s.refit_seconds)
    return True
