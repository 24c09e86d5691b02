"""Worker quality: trust from traps, exclusion, screening, agreement between workers, and
optional Dawid-Skene worker models.

Trust is the share of traps a worker answered correctly, once they have answered at least
``min_traps`` traps; otherwise the platform's own trust where it gives one (Appen's
``_trust``); otherwise unknown (kept, and flagged).

A worker scored by traps is excluded on evidence, not on the raw share, because a few traps
say little (with 3 traps and a threshold of 0.7, one honest slip would exclude): when their
trap answers are likelier from a worker answering at chance than from one at the threshold
accuracy (:func:`trap_evidence`, a likelihood ratio in which each trap counts by how easily
chance passes it: 1/4 for one accepted answer, 1/2 for two), or when an exact one-sided
binomial test rejects "accuracy >= threshold" at level ``TRUST_ALPHA`` (which matters with
many traps, where a worker well above chance can still be shown below the threshold). A worker
scored by the platform's trust is excluded below the threshold.

Workers who straight-line are excluded (:func:`straight_lining`): one answer code, as shown,
makes up at least ``STRAIGHT_SHARE`` of their answers (``STRAIGHT_MIN_ANSWERS`` or more), and
an exact one-sided binomial test, Bonferroni-corrected over the four codes, rejects "no more
often than the other workers answer it" at level ``STRAIGHT_ALPHA``. Traps alone cannot catch
such a worker where every trap accepts the code they repeat (a "both bad" straight-liner passes
every trap when no query has k top-level documents, see :mod:`satcal.traps`).

Workers who prefer the dominated list are excluded (:func:`judgment_consistency`): among
their decisive answers ("A is better" or "B is better") to comparisons where one list
dominates the other by the judged levels (:func:`dominance`; traps whose expected answer
names one list better count with that list dominant), a one-sided test rejects "prefers the
dominated list no more often than honest workers do" at level ``CONSISTENCY_ALPHA``, against a
beta-binomial null (honest workers differ) fitted to the crowd as a mixture with guessers. It
uses every answer, not only the traps: a worker answering at random prefers the dominated list
in half their decisive answers, an attentive one rarely.

Workers whose answers are likelier at random than like the crowd are excluded
(:func:`crowd_likelihood`): over their answers to items (traps and examples) that other kept
workers answered too, the likelihood ratio of "answers uniformly over the four codes" against
"answers as the other kept workers answer that item" reaches ``1 / CROWD_ALPHA``. It reads the
whole answer, not only right or wrong: a guesser who names the non-relevant list or "both good"
on a trap the crowd answers "A is better or both bad" loses more than a miss counts in the trap
rule.

Workers who failed instructional attention checks (the hosted study's) are excluded at the
study's limit (:func:`exclude_failed_attention`).

Screening flags (reported, not excluded: a flag is a reason to look, not proof): workers who,
where the platform records times, answer faster than ``SCREEN_SECONDS`` seconds per item, or,
where the items are known, at least ``SCREEN_RELATIVE_SPEED`` times faster than the crowd's
median worker on the same reading load (the items' words at skimming speed,
:func:`reading_seconds`; Leiner 2019's relative speed index), and workers who pick the side shown first (or second) in at least ``SCREEN_SAME_SIDE`` of their
answers: A and B are swapped at random, so an attentive worker's choices of the shown side
follow the lists, not the screen.
"""
from __future__ import annotations

import html

import numpy as np
import pandas as pd

from ._results import ResultTables
from .errors import SatcalError

__all__ = ["worker_table", "binom_cdf", "dawid_skene", "agreement", "Agreement", "screening", "trap_table",
           "TRAP_SUSPECT_ACCURACY", "TRAP_SUSPECT_ALPHA", "reading_seconds", "attention_failures", "exclude_failed_attention",
           "straight_lining", "STRAIGHT_ALPHA", "STRAIGHT_SHARE", "STRAIGHT_MIN_ANSWERS",
           "dominance", "trap_dominance", "trap_exclusion", "empty_worker_table", "traps_needed", "trap_rule_line", "traps_within", "judgment_consistency", "CONSISTENCY_ALPHA", "honest_dispersion",
           "crowd_likelihood", "CROWD_ALPHA", "typed_workers", "WORKER_NUMBER_COLUMNS",
           "WORKER_FLAG_COLUMNS"]

#: Screening thresholds: seconds per answered item, share of answers naming the same shown side,
#: and the answers a worker needs before the side is judged.
SCREEN_SECONDS = 2.0
SCREEN_SAME_SIDE = 0.9
SCREEN_MIN_ANSWERS = 10
#: Skimming speed in words a minute: the fastest reading that still takes in text (Rayner,
#: Schotter, Masson, Potter & Treiman 2016, "So much to read, so little time", Psychological
#: Science in the Public Interest 17(1): skimming at 600-700 wpm, against 200-400 wpm for
#: normal reading, already costs comprehension). A page answered faster than its words at this
#: speed, plus the decision time of each item, was not read.
SKIM_WORDS_PER_MINUTE = 700
#: Relative speed index at and above which a worker is flagged too fast for the reading load:
#: the crowd's median pace (seconds over the pages' reading floor) over the worker's own. 2 is
#: Leiner's (2019) cut-off ("Too fast, too straight, too weird: non-reactive indicators for
#: meaningless data in internet surveys", Survey Research Methods 13(3), 229-248): twice as
#: fast as the typical respondent on the same load.
SCREEN_RELATIVE_SPEED = 2.0
#: Timed workers needed before the crowd's median pace is a yardstick.
SCREEN_MIN_TIMED_WORKERS = 5
#: Level of the one-sided binomial test of "trap accuracy >= threshold".
TRUST_ALPHA = 0.05
#: The answer codes a trap can accept (a trap's chance rate is its accepted share of them).
N_ANSWER_CODES = 4
#: Straight-lining (:func:`straight_lining`): the share of one's answers one code must reach,
#: the answers a worker needs before it is judged, and the level of the exact binomial test
#: against the other workers' rate of that code (Bonferroni over the four codes). Small, as an
#: exclusion on a worker's whole answer pattern: a lenient or strict honest worker who answers
#: one code often, near what the crowd does, is not a straight-liner. The share is nine in ten,
#: not eight: honest workers differ in strictness, so with many traps that all accept "both bad"
#: the binomial test rejects the crowd's rate for the strictest of them (84% "both bad" of 69
#: traps against the crowd's 59%), and only the share says "one code whatever the item". The
#: simulated honest workers' "both bad" shares on such traps fit a beta-binomial with mean 0.59
#: and intra-worker correlation 0.03 (204 workers, docs/benchmarks.md): at 69 traps one reaches
#: 80% with probability 0.015 and 90% with 0.0002, while a worker repeating one code reaches 100%.
STRAIGHT_SHARE = 0.9
STRAIGHT_MIN_ANSWERS = 10
STRAIGHT_ALPHA = 0.001
#: Judgment consistency (:func:`judgment_consistency`): level of the exact one-sided binomial
#: test of "prefers the dominated list no more often than the other workers do".
CONSISTENCY_ALPHA = 0.01
#: The largest intra-worker correlation of the honest workers' rates the consistency test's
#: beta-binomial null allows (1 would make a worker's answers one draw: no count evidence).
MAX_DISPERSION = 0.5
#: Crowd likelihood (:func:`crowd_likelihood`): a worker is excluded when their answers are at
#: least 1 / CROWD_ALPHA times likelier at random than as the other kept workers answer; a
#: worker answering as the crowd does reaches it with probability at most CROWD_ALPHA.
CROWD_ALPHA = 0.01
#: The canonical answer codes, in the order of crowd_likelihood's counts.
ANSWER_CODES = ("a_better", "b_better", "both_good", "both_bad")


def trap_evidence(correct, chance, threshold: float) -> np.ndarray:
    """Log likelihood ratio, per answer, of a worker answering at chance against one at the
    threshold accuracy (summed per worker: > 0 means the trap answers are likelier at chance).

    For a trap passed by chance with probability c (its accepted answers over the four codes)
    and threshold t: log(c / t) when answered correctly, log((1 - c) / (1 - t)) when missed; a
    trap chance passes at least as often as the threshold (c >= t) says nothing and counts 0.
    This is the Neyman-Pearson statistic of the two simple hypotheses (Neyman and Pearson
    1933, Phil. Trans. R. Soc. A 231), so excluding at > 0 is the Bayes rule at even prior odds.

    Parameters
    ----------
    correct : array_like of bool
        Whether each trap answer was right.
    chance : float or array_like of float
        Each trap's chance of being passed at random.
    threshold : float
        The threshold accuracy t (clipped into (0, 1)).

    Returns
    -------
    numpy.ndarray
        The log likelihood ratio per answer.

    References
    ----------
    Neyman, J. and Pearson, E. S. (1933). On the problem of the most efficient tests of
    statistical hypotheses. Philosophical Transactions of the Royal Society A 231, 289-337.
    """
    ok = np.asarray(correct, bool)
    c = np.asarray(chance, float) * np.ones(ok.shape)
    t = float(np.clip(threshold, 1e-9, 1 - 1e-9))
    with np.errstate(divide="ignore"):
        out = np.where(ok, np.log(c / t), np.log((1 - c) / (1 - t)))
    return np.where(c >= t, 0.0, out)


def _chance(answers: pd.DataFrame) -> np.ndarray:
    """Each answer's chance of passing its trap: accepted codes / 4 from ``expected`` (codes
    separated by ``;``), 1/4 where the expected answers are not given."""
    if "expected" not in answers.columns:
        return np.full(len(answers), 1 / N_ANSWER_CODES)
    # factorised as given, each distinct value read as text once (not a text copy of the column)
    codes, distinct = pd.factorize(answers["expected"], use_na_sentinel=False)
    counts = np.array([0 if pd.isna(v) else sum(1 for x in str(v).replace("|", ";").split(";") if x.strip())
                       for v in distinct], dtype=int)
    n = counts[codes] if len(distinct) else np.zeros(len(answers), dtype=int)  # once per distinct value
    return np.where(n > 0, np.minimum(n, N_ANSWER_CODES) / N_ANSWER_CODES, 1 / N_ANSWER_CODES)


def binom_cdf(k, n, p: float) -> np.ndarray:
    """``scipy.stats.binom.cdf(k, n, p)`` for counts ``0 <= k`` and ``n`` and ``p`` in [0, 1],
    value for value, without importing scipy.stats (about half a second of an ingest's
    start): 1 where ``k >= n``, else the ufunc that ``binom.cdf`` itself evaluates (Boost's
    binomial CDF), clipped into [0, 1] as it does; ``binom.cdf`` where that ufunc is missing.

    Parameters
    ----------
    k : array_like of int
        Successes (at most).
    n : array_like of int
        Trials.
    p : float
        Success probability.

    Returns
    -------
    numpy.ndarray
    """
    k, n = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    try:
        from scipy.special._ufuncs import _binom_cdf
    except ImportError:  # another scipy: the public function
        from scipy.stats import binom
        return np.asarray(binom.cdf(k, n, p), dtype=float)
    k, n = np.broadcast_arrays(k, n)
    out = np.ones(k.shape)
    inside = k < n
    out[inside] = np.clip(_binom_cdf(np.floor(k[inside]), n[inside], float(p)), 0, 1)
    return out


def _composition(chance, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct chance rates of ``chance`` and how many of ``n`` traps a worker meets of
    each: n times each rate's share of the traps, rounded by largest remainder."""
    rates, counts = np.unique(np.asarray(chance, float), return_counts=True)
    exact = n * counts / counts.sum()
    k = np.floor(exact).astype(int)
    k[np.argsort(-(exact - k), kind="stable")[:n - k.sum()]] += 1
    return rates, k


def trap_exclusion(chance, threshold: float, n: int, accuracy=None) -> float:
    """Probability that a worker meeting ``n`` traps is excluded by the trap rule of
    :func:`worker_table` alone (summed :func:`trap_evidence` > 0, or the one-sided binomial
    test of "accuracy >= threshold" below ``TRUST_ALPHA``), computed exactly.

    The worker meets the traps' chance rates in their shares in ``chance`` (n times each
    share, rounded by largest remainder); with ``accuracy`` None they answer at random, so
    the correct count at rate c_j is Binomial(n_j, c_j), and the law of the correct traps is
    the Poisson-binomial these make; every combination of counts is enumerated (the evidence
    depends on which rates were passed, not only on the total). With ``accuracy`` a, every trap
    is passed with probability a (an honest worker at that accuracy).

    Parameters
    ----------
    chance : array_like of float
        The chance rate of each trap (accepted codes / 4).
    threshold : float
        The trust threshold.
    n : int
        Traps the worker meets.
    accuracy : float or None, optional
        The worker's accuracy on every trap; None (default) answers at random.

    Returns
    -------
    float
    """
    from scipy.stats import binom
    if n <= 0:
        return 0.0
    rates, counts = _composition(chance, int(n))
    hit = trap_evidence(np.ones(len(rates), bool), rates, threshold)
    miss = trap_evidence(np.zeros(len(rates), bool), rates, threshold)
    grids = np.meshgrid(*[np.arange(m + 1) for m in counts], indexing="ij")
    prob, evidence, correct = np.ones(grids[0].shape), np.zeros(grids[0].shape), np.zeros(grids[0].shape, int)
    for y, m, c, h, x in zip(grids, counts, rates, hit, miss):
        prob = prob * binom.pmf(y, m, c if accuracy is None else accuracy)
        evidence = evidence + y * h + (m - y) * x
        correct = correct + y
    # the same two conditions as worker_table's at_chance and below
    excluded = (evidence > 0) | (binom_cdf(correct, int(n), threshold) < TRUST_ALPHA)
    return float(prob[excluded].sum())


def traps_needed(chance, threshold: float, power: float, limit: int = 400) -> int | None:
    """The smallest number of traps a worker must meet for :func:`trap_exclusion` of a worker
    answering at random to reach ``power`` (None when no count up to ``limit`` does, e.g.
    when chance passes the traps at least as often as the threshold asks).

    Parameters
    ----------
    chance : array_like of float
        The chance rate of each trap (accepted codes / 4).
    threshold : float
        The trust threshold.
    power : float
        The probability of excluding a random answerer by the traps alone.
    limit : int, optional
        The largest count tried (default 400).

    Returns
    -------
    int or None
    """
    chance = np.asarray(chance, float)
    if not len(chance) or power <= 0:
        return 0 if power <= 0 else None
    for n in range(1, limit + 1):
        if trap_exclusion(chance, threshold, n) >= power:
            return n
    return None


def trap_rule_line(chance, threshold: float, power: float) -> str:
    """One sentence of the trap-count rule for generate and export to print.

    Parameters
    ----------
    chance : array_like of float
        The chance rate of each trap.
    threshold : float
        The trust threshold.
    power : float
        ``quality.trap_power``.

    Returns
    -------
    str
    """
    chance = np.asarray(chance, float)
    n = traps_needed(chance, threshold, power)
    mean = f"{chance.mean():.2f}" if len(chance) else "n/a"
    if n is None:
        return (f"traps per worker: none is enough: the traps' chance acceptance rate (mean {mean}) leaves a "
                f"random answerer kept too often to reach quality.trap_power = {power:g}")
    honest = trap_exclusion(chance, threshold, n, accuracy=threshold)
    return (f"traps per worker: {n}, so that a worker answering at random (chance acceptance rate, mean {mean}) "
            f"is excluded by the traps alone with probability >= {power:g} "
            f"({trap_exclusion(chance, threshold, n):.3f}); one at the threshold accuracy {threshold:g} is "
            f"excluded with probability {honest:.3f}")


def traps_within(chance, room: int, threshold: float, power: float, min_traps: int) -> tuple[int, int | None, float]:
    """The trap rule's count where a design has room for only so many traps, as the hosted
    study's ``traps_per_participant = "auto"`` and the adaptive study's waves place them:
    :func:`traps_needed` of the traps' chance rates, at most ``room``, at least ``min_traps``
    (fewer leave a worker unscored at ingest), never more than the traps given.

    Parameters
    ----------
    chance : array_like of float
        The chance acceptance rate of each trap available (accepted codes / 4).
    room : int
        The most traps the design gives room for (a participant's own items; half a wave).
    threshold : float
        ``quality.trust_threshold``.
    power : float
        ``quality.trap_power``.
    min_traps : int
        ``quality.min_traps``.

    Returns
    -------
    tuple of (int, int or None, float)
        The count; the rule's count (None: no count reaches ``power``, or no traps); the
        probability that the count excludes a random answerer by the traps alone
        (:func:`trap_exclusion`).
    """
    chance = np.asarray(chance, float)
    if not len(chance):
        return 0, None, 0.0
    needed = traps_needed(chance, threshold, power)
    n = max(int(min_traps), min(needed, int(room))) if needed is not None else int(min_traps)
    n = min(n, len(chance))
    return n, needed, float(trap_exclusion(chance, threshold, n))


#: workers.csv's columns of numbers (NaN where a rule did not compute one) and of flags.
WORKER_NUMBER_COLUMNS = ("answers", "examples_answered", "traps_seen", "traps_correct", "platform_trust",
                         "chance_evidence", "trust", "binomial_p", "top_answer_share", "crowd_share",
                         "straight_lining_p", "dominance_decisive", "dominated_preferred", "dominated_crowd_share",
                         "dominated_dispersion", "dominated_guessers", "consistency_p", "crowd_answers",
                         "random_evidence", "seconds_per_answer", "reading_floor_per_answer", "relative_speed",
                         "same_side_share",
                         "attention_failed", "ds_accuracy")
WORKER_FLAG_COLUMNS = ("excluded", "straight_lining", "inconsistent", "random_like", "too_fast", "same_side",
                       "simulated")


def _worker_codes(answers: pd.DataFrame) -> tuple[np.ndarray, pd.Index]:
    """Each answer's worker as an integer code in sorted order, and the workers in that order
    (the index a groupby on ``worker_id`` gives): factorised once for all the rules."""
    ids = answers["worker_id"]
    if isinstance(ids.dtype, pd.CategoricalDtype):
        # the categories the rows hold, sorted as factorising the values sorts them, and the
        # rows' codes remapped: no million strings hashed (the same codes and workers)
        codes = ids.cat.codes.to_numpy()
        categories = np.asarray(ids.cat.categories, dtype=object)
        used = np.flatnonzero(np.bincount(codes[codes >= 0], minlength=len(categories)))
        rank, names = pd.factorize(pd.Series(categories[used], dtype=object), sort=True)
        remap = np.full(len(categories) + 1, -1, dtype=np.intp)
        remap[used] = rank
        return remap[codes], pd.Index(names, name="worker_id")  # a missing id (-1) stays -1
    who, names = pd.factorize(ids, sort=True)
    return who, pd.Index(names, name="worker_id")


def _sorted_codes_of(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize(values, sort=True)`` (codes, distinct values), a categorical column's
    read from its codes (:func:`_worker_codes`' remapping: no text hashed per row)."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        codes, names = _worker_codes(pd.DataFrame({"worker_id": values}))
        return codes, np.asarray(names, dtype=object)
    return pd.factorize(values, sort=True)


def typed_workers(workers: pd.DataFrame) -> pd.DataFrame:
    """``workers`` (:func:`worker_table`, or workers.csv read as text) with its number columns
    as floats (NaN where empty or not computed) and its flags as booleans, so that a report's
    float format reaches every number (read as text, a p-value or an evidence printed with all
    17 digits, and trust sorted as text).

    Parameters
    ----------
    workers : pandas.DataFrame
        The workers table.

    Returns
    -------
    pandas.DataFrame
        A copy; columns it does not know are left as they are.
    """
    out = workers.copy()
    for c in WORKER_NUMBER_COLUMNS:
        if c in out.columns:
            out[c] = pd.to_numeric(out[c], errors="coerce").astype(float)
    for c in WORKER_FLAG_COLUMNS:
        if c in out.columns:
            out[c] = out[c].astype(str).str.strip().str.lower().isin(["true", "1", "yes"])
    return out


def worker_table(answers: pd.DataFrame, threshold: float = 0.7, min_traps: int = 3,
                 screen_seconds: float = None, screen_same_side: float = None,
                 drop_traps=(), straight_alpha: float = None, consistency_alpha: float = None,
                 crowd_alpha: float = None) -> pd.DataFrame:
    """One row per worker: answers, traps seen / correct, trust and its source, exclusion, and
    the screening columns (see :func:`screening`).

    ``answers`` needs ``worker_id, is_trap, correct`` and optionally ``expected`` (a trap's
    accepted codes, for its chance rate), ``trust`` (platform trust), ``answer_shown`` and
    ``seconds``/``submitted_at`` (for screening). Answers to the traps in ``drop_traps`` (trap
    ids, matched on ``example_id``) do not count towards trust. ``chance_evidence`` is the
    summed :func:`trap_evidence` and ``binomial_p`` the one-sided p of "accuracy >= threshold";
    the module docstring gives the exclusion rule. Workers kept by their traps are then excluded
    when they straight-line (:func:`straight_lining`, on ``answer_shown``; its columns are
    added), then when they prefer the dominated list (:func:`judgment_consistency`, on
    ``answer`` and ``dominant``; its columns are added), and then when their answers are
    likelier at random than like the crowd (:func:`crowd_likelihood`, on ``example_id`` and
    ``answer``; its columns are added).

    Parameters
    ----------
    answers : pandas.DataFrame
        The answers, with the columns above.
    threshold : float, optional
        Trust threshold, in [0, 1] (default 0.7).
    min_traps : int, optional
        Traps a worker must have seen for trap trust (default 3; at least 1 counts).
    screen_seconds : float or None, optional
        ``seconds`` of :func:`screening`.
    screen_same_side : float or None, optional
        ``same_side`` of :func:`screening`.
    drop_traps : sequence of str, optional
        Trap ids left out of trust.
    straight_alpha : float or None, optional
        Level of the straight-lining test (default ``STRAIGHT_ALPHA``; 0 excludes nobody).
    consistency_alpha : float or None, optional
        Level of the judgment-consistency test (default ``CONSISTENCY_ALPHA``; 0 excludes
        nobody).
    crowd_alpha : float or None, optional
        Level of the crowd-likelihood rule (default ``CROWD_ALPHA``; 0 excludes nobody).

    Returns
    -------
    pandas.DataFrame

    Raises
    ------
    SatcalError
        ``threshold`` is outside [0, 1].
    """
    if not 0 <= threshold <= 1:
        raise SatcalError(f"the trust threshold must be in [0, 1], got {threshold}")
    a = answers.copy(deep=False)  # columns are added or replaced, never written into
    a["is_trap"] = a["is_trap"].astype(bool)
    if len(drop_traps) and "example_id" in a.columns:
        dropped = a["is_trap"] & a["example_id"].astype(str).isin([str(t) for t in drop_traps])
    else:
        dropped = pd.Series(False, index=a.index)
    a["trap_counted"] = a["is_trap"] & ~dropped
    a["trap_correct"] = a["trap_counted"] & a["correct"].astype(bool)
    if "trust" not in a.columns:
        a["trust"] = np.nan
    a["evidence"] = np.where(a["trap_counted"], trap_evidence(a["trap_correct"], _chance(a), threshold), 0.0)
    # group sums by integer worker codes (factorised once for every rule below), not by strings
    codes = _worker_codes(a)
    who, workers = codes
    m = len(workers)
    size = np.bincount(who, minlength=m)
    trust = pd.to_numeric(a["trust"], errors="coerce")
    if trust.notna().any() and isinstance(a["worker_id"].dtype, pd.CategoricalDtype):
        a["worker_id"] = a["worker_id"].astype(object)  # grouped below by value, in sorted order
    table = pd.DataFrame({
        "answers": size,
        "examples_answered": size - np.bincount(who[a["is_trap"].to_numpy()], minlength=m),
        "traps_seen": np.bincount(who[a["trap_counted"].to_numpy()], minlength=m),
        "traps_correct": np.bincount(who[a["trap_correct"].to_numpy()], minlength=m),
        # a platform's trust where it gives one (a mean per worker); none at all is the usual case
        "platform_trust": (a.groupby("worker_id", sort=True)["trust"].apply(
            lambda s: pd.to_numeric(s, errors="coerce").dropna().mean()
            if pd.to_numeric(s, errors="coerce").notna().any() else np.nan).to_numpy(dtype=float)
                           if trust.notna().any() else np.full(m, np.nan)),
        # pandas' grouped sum (compensated), as before, keyed by the codes: the same bits
        "chance_evidence": pd.Series(a["evidence"].to_numpy(dtype=float)).groupby(who).sum().to_numpy(),
    }, index=workers)
    # no counted trap: no evidence computed (NaN, not a likelihood ratio of 1)
    table["chance_evidence"] = table["chance_evidence"].where(table["traps_seen"] > 0)
    enough = table["traps_seen"] >= max(min_traps, 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        trap_trust = table["traps_correct"] / table["traps_seen"].where(table["traps_seen"] > 0)
    table["trust"] = np.where(enough, trap_trust, table["platform_trust"])
    table["trust_source"] = np.where(enough, "traps",
                                     np.where(table["platform_trust"].notna(), "platform", "none"))
    table["binomial_p"] = np.where(enough, binom_cdf(table["traps_correct"], table["traps_seen"], threshold),
                                   np.nan)
    at_chance = enough & (table["chance_evidence"] > 0)
    below = enough & (table["binomial_p"] < TRUST_ALPHA)
    by_platform = (table["trust_source"] == "platform") & (table["trust"] < threshold)
    table["excluded"] = at_chance | below | by_platform
    reasons = []
    for row, chance, low in zip(table.itertuples(), at_chance, below):
        traps = f"{row.traps_correct} of {row.traps_seen} traps"
        if chance:
            reasons.append(f"trust {row.trust:.2f} ({traps}): likelier at chance than at {threshold:.2f} "
                           f"(likelihood ratio {np.exp(row.chance_evidence):.2g})")
        elif low:
            reasons.append(f"trust {row.trust:.2f} ({traps}): below {threshold:.2f} "
                           f"(one-sided binomial p = {row.binomial_p:.2g})")
        elif row.excluded:
            reasons.append(f"trust {row.trust:.2f} < {threshold:.2f} (platform)")
        elif row.trust_source == "none":
            reasons.append("no traps seen: trust unknown, kept" if not row.traps_seen else
                           f"{row.traps_seen} trap{'s' if row.traps_seen != 1 else ''} seen, fewer than min_traps = "
                           f"{max(min_traps, 1)}: trust unknown, kept")
        else:
            reasons.append("")
    table["reason"] = reasons
    table = table.join(_straight_lining(a, codes, straight_alpha))
    lined = table["straight_lining"] & ~table["excluded"]
    table.loc[lined, "reason"] = [
        f"straight-lining: answered {code} in {share:.0%} of {n} answers, the other workers {crowd:.0%} "
        f"(binomial p = {p:.2g}, x4 codes, < {STRAIGHT_ALPHA if straight_alpha is None else straight_alpha:g})"
        for code, share, n, crowd, p in zip(table.loc[lined, "top_answer"], table.loc[lined, "top_answer_share"],
                                            table.loc[lined, "answers"], table.loc[lined, "crowd_share"],
                                            table.loc[lined, "straight_lining_p"])]
    table["excluded"] = table["excluded"] | table["straight_lining"]
    table = table.join(_judgment_consistency(a, codes, consistency_alpha, reference=~table["excluded"]))
    against = table["inconsistent"] & ~table["excluded"]
    level = CONSISTENCY_ALPHA if consistency_alpha is None else consistency_alpha
    table.loc[against, "reason"] = [
        f"prefers the dominated list: in {y} of {n} decisive answers where one list's levels dominate the "
        f"other's, honest workers {q:.0%} on average (beta-binomial p = {p:.2g} < {level:g})"
        for y, n, q, p in zip(table.loc[against, "dominated_preferred"], table.loc[against, "dominance_decisive"],
                              table.loc[against, "dominated_crowd_share"], table.loc[against, "consistency_p"])]
    table["excluded"] = table["excluded"] | table["inconsistent"]
    table = table.join(_crowd_likelihood(a, codes, crowd_alpha, reference=~table["excluded"]))
    random_like = table["random_like"] & ~table["excluded"]
    table.loc[random_like, "reason"] = [
        f"answers likelier at random than like the other workers: likelihood ratio {np.exp(e):.3g} "
        f"over {n} answers (>= 1/{CROWD_ALPHA if crowd_alpha is None else crowd_alpha:g})"
        for e, n in zip(table.loc[random_like, "random_evidence"], table.loc[random_like, "crowd_answers"])]
    table["excluded"] = table["excluded"] | table["random_like"]
    return table.join(_screening(a, codes, screen_seconds, screen_same_side)).reset_index()


def straight_lining(answers: pd.DataFrame, alpha: float = None, share: float = STRAIGHT_SHARE,
                    min_answers: int = STRAIGHT_MIN_ANSWERS) -> pd.DataFrame:
    """Per worker: the answer code they gave most often as shown (``top_answer``), its share of
    their answers, the share of that code among the *other* workers' answers (``crowd_share``),
    the p-value of straight-lining and whether they straight-line.

    For worker w with n answers, x of them code c (their commonest), and the other workers
    answering c at rate p0 = (X_c - x) / (N - n) (X_c of N answers in all), the p-value is
    min(1, 4 P(Bin(n, p0) >= x)): an exact one-sided binomial test, Bonferroni-corrected over
    the four codes since c was picked by the data (Bonferroni; Dunn 1961, JASA 56). A worker
    straight-lines when n >= ``min_answers``, x / n >= ``share`` and p < ``alpha``; with fewer
    than ``min_answers`` answers from the others there is no rate to test against. Shown
    codes, not canonical ones, so a worker always picking the side shown first counts too.

    Parameters
    ----------
    answers : pandas.DataFrame
        Answers with ``worker_id`` and ``answer_shown`` (without it nobody is tested).
    alpha : float or None, optional
        Level of the test (default ``STRAIGHT_ALPHA``; 0 flags nobody).
    share : float, optional
        The share of one code a worker must reach (default ``STRAIGHT_SHARE``).
    min_answers : int, optional
        Answers a worker needs to be tested (default ``STRAIGHT_MIN_ANSWERS``).

    Returns
    -------
    pandas.DataFrame
        ``top_answer, top_answer_share, crowd_share, straight_lining_p, straight_lining``,
        indexed by ``worker_id``.
    """
    return _straight_lining(answers, _worker_codes(answers), alpha, share, min_answers)


def _straight_lining(answers, codes, alpha=None, share=STRAIGHT_SHARE, min_answers=STRAIGHT_MIN_ANSWERS):
    """:func:`straight_lining` with the workers' codes (:func:`_worker_codes`) given."""
    alpha = STRAIGHT_ALPHA if alpha is None else float(alpha)
    who_all, workers = codes
    out = pd.DataFrame(index=workers, columns=["top_answer", "top_answer_share", "crowd_share",
                                               "straight_lining_p"], dtype=object)
    out["straight_lining"] = False
    if "answer_shown" not in answers.columns or not len(answers):
        return out
    # answers per worker and code, by integer codes (a crosstab is slow on millions of rows)
    code, names = pd.factorize(answers["answer_shown"], sort=True)  # missing -> -1
    keep = names.astype(str) != ""
    remap = np.where(keep, np.cumsum(keep) - 1, -1)
    names = names[keep]
    code = np.where(code >= 0, remap[np.maximum(code, 0)], -1)
    given = code >= 0
    if not given.any():
        return out
    who = who_all[given]
    code = code[given]
    table = np.bincount(who * len(names) + code, minlength=len(workers) * len(names)).reshape(len(workers), len(names))
    n = table.sum(axis=1)
    top = table.argmax(axis=1)
    x = table[np.arange(len(workers)), top]
    totals = table.sum(axis=0)
    others = n.sum() - n
    with np.errstate(invalid="ignore", divide="ignore"):
        p0 = np.where(others > 0, (totals[top] - x) / np.maximum(others, 1), np.nan)
        own = np.where(n > 0, x / np.maximum(n, 1), np.nan)
    # P(X >= x) = sf(x - 1); fewer than min_answers answers of others give no crowd rate to test against
    from scipy.special import bdtrc  # P(Bin(n, p) > k), without scipy.stats' import cost
    p = np.where(others >= max(min_answers, 1),
                 np.minimum(1.0, N_ANSWER_CODES * bdtrc(x - 1, n, np.nan_to_num(p0))), np.nan)
    out["top_answer"] = np.where(n > 0, np.asarray(names, dtype=object)[top], "")
    out["top_answer_share"] = own
    out["crowd_share"] = p0
    out["straight_lining_p"] = p
    out["straight_lining"] = (n >= min_answers) & (own >= share) & (p < alpha)
    return out


def dominance(ra, rb) -> np.ndarray:
    """Which list of each pair dominates the other by the judged levels, rank by rank: +1 where
    list A does, -1 where list B does, 0 where neither (or the lists are equal).

    A dominates B when at every rank i A's level is at least B's (the levels' own order, so
    -2 < -1 < 0 < 1 ...) and at some rank above it. Every user whose satisfaction does not
    fall when a document is replaced by a higher-judged one at the same rank (any gain
    increasing in the level, any discount, any cascade model) finds A at least as good as B.
    A rank empty in both lists (NaN: a list shorter than k) compares equal; a rank empty in one
    list only makes the pair incomparable (0), since nothing says whether no document is
    better than a non-relevant one.

    Parameters
    ----------
    ra, rb : array_like, shape (n, k)
        The levels of lists A and B by rank (NaN for an empty rank).

    Returns
    -------
    numpy.ndarray of int8, shape (n,)
    """
    ra, rb = np.atleast_2d(np.asarray(ra, float)), np.atleast_2d(np.asarray(rb, float))
    na, nb = np.isnan(ra), np.isnan(rb)
    comparable = ~(na ^ nb).any(axis=1)
    both = na & nb
    ge, le = ((ra >= rb) | both).all(axis=1), ((ra <= rb) | both).all(axis=1)
    gt, lt = (ra > rb).any(axis=1), (ra < rb).any(axis=1)
    return np.where(comparable & ge & gt, 1, np.where(comparable & le & lt, -1, 0)).astype(np.int8)


def trap_dominance(expected) -> np.ndarray:
    """The dominant list of traps from their expected answers: +1 where the accepted answers
    include "a_better" but not "b_better" (A is the better list, alone or with "both bad"), -1
    the other way round, 0 otherwise ("both good", "both bad", or not given).

    Parameters
    ----------
    expected : array_like of str
        Each trap's accepted answers, ``;``-separated.

    Returns
    -------
    numpy.ndarray of int8
    """
    codes, distinct = pd.factorize(pd.Series(expected, dtype=object).fillna("").astype(str), use_na_sentinel=False)
    sides = []
    for v in distinct:
        accepted = {x.strip() for x in str(v).replace("|", ";").split(";")}
        a, b = "a_better" in accepted, "b_better" in accepted
        sides.append(1 if a and not b else -1 if b and not a else 0)
    return np.asarray(sides, dtype=np.int8)[codes] if len(distinct) else np.zeros(0, dtype=np.int8)


def _reference_mask(reference, workers: pd.Index) -> np.ndarray:
    """Which of ``workers`` make the reference crowd: ``reference`` (bool by worker id; a worker
    it does not name is left out) or, when None, all of them."""
    if reference is None:
        return np.ones(len(workers), dtype=bool)
    return pd.Series(reference).reindex(workers).fillna(False).to_numpy(dtype=bool)


def _log_betabinom(y, n, mu, rho):
    """log P(Y = y), Y beta-binomial with n trials, mean share ``mu`` and intra-worker
    correlation ``rho`` in [0, 1), for one (mu, rho) shared by every element of ``y, n``.

    Written as products (Williams 1975; Prentice 1986), with r = rho / (1 - rho):
    P(Y = y) = C(n, y) prod_{j<y} (mu + j r) prod_{j<n-y} (1 - mu + j r) / prod_{j<n} (1 + j r),
    the gamma-function form with shape parameters mu / r and (1 - mu) / r divided through by
    1 / r. At r = 0 it is exactly the binomial and it is smooth in rho there, so a fit reaches
    or leaves the boundary rho = 0 by the likelihood itself (a switch to the binomial below a
    small rho made the likelihood flat there, and L-BFGS-B's finite-difference gradient stopped
    a fit at rho = 0 short of its maximum). Each product is a cumulative sum of logs up to the
    largest n, read at y, n - y and n: O(max n) a call.

    References
    ----------
    Williams, D. A. (1975). The analysis of binary responses from toxicological experiments
    involving reproduction and teratogenicity. Biometrics 31(4), 949-952.

    Prentice, R. L. (1986). Binary regression using an extended beta-binomial distribution.
    Journal of the American Statistical Association 81(394), 321-327.
    """
    from scipy.special import gammaln
    y, n = np.asarray(y, np.int64), np.asarray(n, np.int64)
    r = rho / (1 - rho)
    j = np.arange(int(n.max()) if n.size else 0, dtype=float)
    cum = lambda x: np.concatenate([[0.0], np.cumsum(np.log(x))])  # noqa: E731
    up, down, total = cum(mu + j * r), cum(1 - mu + j * r), cum(1 + j * r)
    return gammaln(n + 1) - gammaln(y + 1) - gammaln(n - y + 1) + up[y] + down[n - y] - total[n]


def _betabinom_tail(y, n, mu, rho) -> np.ndarray:
    """P(Y >= y) for Y beta-binomial (n, mu, rho) (:func:`_log_betabinom`, exact and the
    binomial's at rho = 0), one (mu, rho) for every element: the tail y..n summed in one flat
    pass. 1 where y <= 0; 0 where y > n."""
    y, n = np.asarray(y, np.int64), np.asarray(n, np.int64)
    lo = np.clip(y, 0, None)
    length = np.where(lo <= n, n - lo + 1, 0)
    out = np.zeros(len(y))
    if length.sum():
        row = np.repeat(np.arange(len(y)), length)
        k = lo[row] + (np.arange(length.sum()) - np.repeat(np.cumsum(length) - length, length))
        out = np.bincount(row, weights=np.exp(_log_betabinom(k, n[row], mu, rho)), minlength=len(y))
    return np.where(y <= 0, 1.0, np.clip(out, 0, 1))


def honest_dispersion(y, n) -> tuple[float, float, float]:
    """The honest workers' mean share ``mu`` and intra-worker correlation ``rho`` of naming the
    dominated list, with the share ``pi`` of guessers, by maximum likelihood of the mixture
    judgment_consistency's null is drawn from (see :func:`judgment_consistency`).

    Each worker's count y of n is beta-binomial (n, mu, rho) with probability 1 - pi (honest:
    each with their own rate, drawn from a beta distribution) or Bin(n, 1/2) with probability
    pi (guessing: a random decisive answer names either list); pi is at most 1/2 (a crowd is
    mostly honest), mu at most 1/2 and rho at most ``MAX_DISPERSION``. The log likelihood adds
    log mu + log(1 - mu), a Beta(2, 2) prior on mu: the posterior mode of one binomial rate is
    then (Y + 1) / (N + 2), so one slip against a crowd that never slipped is not proof. Counts
    are grouped by distinct (y, n), so the fit costs the same at any number of workers.

    Parameters
    ----------
    y, n : array_like of int
        Dominated-list answers and decisive answers of each worker of the reference crowd
        (workers with n = 0 say nothing and are left out).

    Returns
    -------
    tuple of float
        ``(mu, rho, pi)``; rho 0 when no worker has two decisive answers (nothing to measure a
        spread by) and ``(0.5, 0, 0)`` without a count.

    References
    ----------
    Skellam, J. G. (1948). A probability distribution derived from the binomial distribution
    by regarding the probability of success as variable between the sets of trials. Journal of
    the Royal Statistical Society B 10(2), 257-261.

    McLachlan, G. J. and Peel, D. (2000). Finite Mixture Models. Wiley, New York.
    """
    y, n = np.asarray(y, np.int64), np.asarray(n, np.int64)
    keep = n > 0
    if not keep.any():
        return 0.5, 0.0, 0.0
    pairs, count = np.unique(np.stack([y[keep], n[keep]]), axis=1, return_counts=True)
    yy, nn = pairs[0].astype(float), pairs[1].astype(float)
    total_y, total_n = float((yy * count).sum()), float((nn * count).sum())
    pooled = (total_y + 1) / (total_n + 2)
    if nn.max() < 2:  # one answer each: no spread to measure (and no guesser to tell apart)
        return pooled, 0.0, 0.0
    from scipy.optimize import minimize  # only with counts to fit (0.14 s of imports)
    from scipy.special import gammaln, logsumexp
    binomial = gammaln(nn + 1) - gammaln(yy + 1) - gammaln(nn - yy + 1)  # log C(n, y)
    guess = binomial + nn * np.log(0.5)

    yi, ni = pairs[0], pairs[1]

    def loss(theta):
        mu, rho, pi = theta
        honest = _log_betabinom(yi, ni, mu, rho)  # the binomial at rho = 0, smooth there
        with np.errstate(divide="ignore"):
            ll = logsumexp(np.stack([np.log1p(-pi) + honest, np.log(pi) + guess]), axis=0)
        return -float((count * ll).sum() + np.log(mu) + np.log1p(-mu))

    best = None
    bounds = [(1e-9, 0.5), (0.0, MAX_DISPERSION), (0.0, 0.5)]  # natural scale: a boundary is reachable
    for rho0, pi0 in ((0.0, 0.0), (0.02, 0.02), (0.2, 0.2)):  # a mixture's likelihood can have several modes
        fit = minimize(loss, np.array([min(pooled, 0.45), rho0, pi0]), method="L-BFGS-B", bounds=bounds,
                       options={"ftol": 1e-13, "gtol": 1e-9})
        if best is None or fit.fun < best.fun:
            best = fit
    mu, rho, pi = best.x
    return float(mu), float(rho), float(pi)


def judgment_consistency(answers: pd.DataFrame, alpha: float = None, reference=None) -> pd.DataFrame:
    """Per worker: decisive answers to comparisons where one list dominates, how many of them
    prefer the dominated list, the other workers' share of such answers and how much it varies
    between them, the p-value and whether the worker is excluded for it.

    Over worker w's answers to pairs with a dominant list (``dominant`` +1 for A, -1 for B,
    :func:`dominance`), let n be the decisive ones ("a_better" or "b_better", canonical
    orientation) and y those naming the dominated list. A worker answering at random names it
    in half their decisive answers; attentive workers rarely do, whatever their leniency (a
    lenient or strict user changes how often they are decisive, not which list they prefer),
    but not equally rarely: honest workers differ, so their counts vary more than one shared
    binomial rate allows (a binomial null excludes the strictest honest workers far more often
    than its level says). The null is therefore beta-binomial over workers (Skellam 1948):
    each honest worker's rate is drawn from a beta distribution with mean mu and intra-worker
    correlation rho, so Var(y) = n mu (1 - mu) (1 + (n - 1) rho).

    mu and rho are estimated from the reference crowd (``reference``: in :func:`worker_table`,
    the workers the traps and the straight-lining test keep) by maximum likelihood of a mixture
    of those honest workers and guessers at Bin(n, 1/2) (:func:`honest_dispersion`): a guesser
    the earlier rules missed is then counted as a guesser, not as honest spread, so it widens
    neither the null it is tested against nor anyone else's (with a tenth of guessers in the
    crowd, a moment estimate of rho rose from 0.15 to 0.21-0.26 and caught 5% of them; the
    mixture's was 0.16). The
    p-value is P(Y >= y) for Y beta-binomial (n, mu, rho) (:func:`_betabinom_tail`; the exact
    binomial P(Bin(n, mu) >= y) when rho is 0). Excluded when p < ``alpha``.

    Parameters
    ----------
    answers : pandas.DataFrame
        Answers with ``worker_id``, ``answer`` (canonical) and ``dominant`` (without the last
        two nobody is tested).
    alpha : float or None, optional
        Level of the test (default ``CONSISTENCY_ALPHA``; 0 excludes nobody).
    reference : pandas.Series of bool or None, optional
        By worker id, the workers whose answers make the crowd's share (default all).

    Returns
    -------
    pandas.DataFrame
        ``dominance_decisive, dominated_preferred, dominated_crowd_share`` (mu),
        ``dominated_dispersion`` (rho), ``dominated_guessers`` (the mixture's share of
        guessers), ``consistency_p, inconsistent``, indexed by ``worker_id``.

    References
    ----------
    Skellam, J. G. (1948). A probability distribution derived from the binomial distribution
    by regarding the probability of success as variable between the sets of trials. Journal of
    the Royal Statistical Society B 10(2), 257-261.
    """
    return _judgment_consistency(answers, _worker_codes(answers), alpha, reference)


def _judgment_consistency(answers, codes, alpha=None, reference=None):
    """:func:`judgment_consistency` with the workers' codes (:func:`_worker_codes`) given."""
    alpha = CONSISTENCY_ALPHA if alpha is None else float(alpha)
    who, workers = codes  # codes in sorted order: the index
    out = pd.DataFrame(index=workers)
    out["dominance_decisive"] = 0
    out["dominated_preferred"] = 0
    out["dominated_crowd_share"] = np.nan
    out["dominated_dispersion"] = np.nan
    out["dominated_guessers"] = np.nan
    out["consistency_p"] = np.nan
    out["inconsistent"] = False
    if not {"answer", "dominant"} <= set(answers.columns) or not len(answers):
        return out
    dom = pd.to_numeric(answers["dominant"], errors="coerce").fillna(0).to_numpy()
    rows = np.flatnonzero(dom != 0)  # only pairs with a dominant list are read further
    code, names = pd.factorize(answers["answer"])  # once per distinct answer, not per row
    named = np.array([1 if v == "a_better" else -1 if v == "b_better" else 0 for v in names] + [0], dtype=np.int8)
    side = named[code[rows]]  # a missing answer (code -1) takes the trailing 0
    decisive = side != 0
    who = who[rows]
    n = np.bincount(who[decisive], minlength=len(workers))
    y = np.bincount(who[decisive & (side != dom[rows])], minlength=len(workers))
    ref = _reference_mask(reference, workers)

    mu, rho, pi = honest_dispersion(y[ref], n[ref])
    # P(Y >= y) under the fitted null, by the same log pmf the fit maximised (the exact
    # binomial at rho = 0); a worker without decisive answers on such pairs is not tested
    p = _betabinom_tail(y, n, mu, rho)
    p = np.where(n > 0, p, np.nan)
    q0, flagged = np.full(len(workers), mu), (n > 0) & (p < alpha)
    out["dominated_guessers"] = pi
    out["dominance_decisive"] = n
    out["dominated_preferred"] = y
    out["dominated_crowd_share"] = q0
    out["dominated_dispersion"] = rho
    out["consistency_p"] = p
    out["inconsistent"] = flagged
    return out


def crowd_likelihood(answers: pd.DataFrame, alpha: float = None, reference=None) -> pd.DataFrame:
    """Per worker: the answers scored against the crowd, the log likelihood ratio of answering
    at random against answering like the crowd, and whether the worker is excluded for it.

    For worker w's answer c to item j (an example or a trap, ``example_id``; canonical codes),
    let n_jc of N_j answers to j by the other workers of the reference crowd (``reference``: in
    :func:`worker_table`, those the earlier rules keep) be c, and p_jc = (n_jc + 1) / (N_j + 4)
    (one pseudo-answer a code: an item nobody else answered gives 1/4, no evidence either way).
    The evidence is

        L_w = sum_j log((1/4) / p_jc),

    the log likelihood ratio of "w answers uniformly over the four codes" against "w answers
    item j as the crowd does" (Neyman and Pearson 1933). The worker is excluded when
    L_w >= log(1 / alpha). Under the second hypothesis exp(L_w) has expectation 1, so by
    Markov's inequality a worker answering as the crowd does is excluded with probability at
    most ``alpha``, however many answers (Ville 1939; the universal bound of a likelihood
    ratio). Honest workers differ from the crowd (leniency, position bias), so the bound is a
    guide there, not a guarantee; a guesser's L_w grows with every item the crowd agrees on.

    Parameters
    ----------
    answers : pandas.DataFrame
        Answers with ``worker_id``, ``example_id`` and ``answer`` (canonical; without the last
        two nobody is tested).
    alpha : float or None, optional
        Level of the rule (default ``CROWD_ALPHA``; 0 excludes nobody).
    reference : pandas.Series of bool or None, optional
        By worker id, the workers whose answers make the crowd (default all).

    Returns
    -------
    pandas.DataFrame
        ``crowd_answers`` (answers to items the reference crowd answered, w aside),
        ``random_evidence`` (L_w) and ``random_like``, indexed by ``worker_id``.

    References
    ----------
    Neyman, J. and Pearson, E. S. (1933). On the problem of the most efficient tests of
    statistical hypotheses. Philosophical Transactions of the Royal Society A 231, 289-337.

    Ville, J. (1939). Étude critique de la notion de collectif. Gauthier-Villars, Paris.
    """
    return _crowd_likelihood(answers, _worker_codes(answers), alpha, reference)


def _crowd_likelihood(answers, codes, alpha=None, reference=None):
    """:func:`crowd_likelihood` with the workers' codes (:func:`_worker_codes`) given."""
    alpha = CROWD_ALPHA if alpha is None else float(alpha)
    who, workers = codes
    out = pd.DataFrame(index=workers)
    out["crowd_answers"] = 0
    out["random_evidence"] = 0.0
    out["random_like"] = False
    if not {"answer", "example_id"} <= set(answers.columns) or not len(answers):
        return out
    code, distinct = pd.factorize(answers["answer"])  # once per distinct answer, not per row
    known = np.array([ANSWER_CODES.index(v) if v in ANSWER_CODES else -1 for v in distinct] + [-1], dtype=np.int64)
    code = known[code]  # a missing answer (-1) takes the trailing -1
    item, _ = pd.factorize(answers["example_id"])  # ingest's ids are text already: no copy as str
    ref = _reference_mask(reference, workers)
    given = code >= 0
    own = (ref[who] & given).astype(float)  # the row counts in its item's crowd: taken out for w
    m = len(ANSWER_CODES)
    n_items = int(item.max()) + 1
    cell = item * m + np.maximum(code, 0)
    counts = np.bincount(cell, weights=own, minlength=n_items * m)
    totals = np.bincount(item, weights=own, minlength=n_items)
    others = totals[item] - own
    p = (counts[cell] - own + 1) / (others + m)
    evidence = np.where(given, np.log((1 / m) / p), 0.0)
    out["crowd_answers"] = np.bincount(who, weights=given & (others > 0), minlength=len(workers)).astype(int)
    out["random_evidence"] = np.bincount(who, weights=evidence, minlength=len(workers))
    out["random_like"] = (out["random_evidence"] >= np.log(1 / alpha)) if alpha > 0 else False
    return out


def screening(answers: pd.DataFrame, seconds: float = None, same_side: float = None) -> pd.DataFrame:
    """Per worker: ``seconds_per_answer`` (time on pages or tasks over the items answered on
    them, where the platform records times), ``same_side_share`` (the larger share of answers
    naming the side shown first, or the side shown second), and the flags ``too_fast`` (under
    ``seconds`` an item, default ``SCREEN_SECONDS``) and ``same_side`` (a share of at least
    ``same_side``, default ``SCREEN_SAME_SIDE``, over ``SCREEN_MIN_ANSWERS`` answers or more).

    With ``reading_seconds`` (each item's skimming time) the speed is also read against the
    load: ``reading_floor_per_answer`` is deciding plus skimming every word an answer's items
    show, a worker's pace is ``seconds_per_answer / reading_floor_per_answer``, and
    ``relative_speed`` is the timed workers' median pace over the worker's own (Leiner's
    relative speed index, RSI = median time / own time, with time per unit of reading load).
    ``too_fast`` then also flags RSI >= ``SCREEN_RELATIVE_SPEED`` (2: twice as fast as the
    typical worker on the same load), once ``SCREEN_MIN_TIMED_WORKERS`` workers are timed.
    The floor itself is not the rule: few people read every snippet of two result lists, and a
    floor every honest worker misses would flag everyone.

    References
    ----------
    Leiner, D. J. (2019). Too fast, too straight, too weird: non-reactive indicators for
    meaningless data in internet surveys. Survey Research Methods 13(3), 229-248.

    Parameters
    ----------
    answers : pandas.DataFrame
        Answers with ``worker_id``; ``seconds``, ``submitted_at``, ``answer_shown`` and
        ``reading_seconds`` are used when present.
    seconds : float or None, optional
        Seconds an item under which a worker is too fast.
    same_side : float or None, optional
        Share of answers for one side that flags a worker.

    Returns
    -------
    pandas.DataFrame
        Indexed by ``worker_id``.
    """
    return _screening(answers, _worker_codes(answers), seconds, same_side)


def _screening(answers, codes, seconds=None, same_side=None):
    """:func:`screening` with the workers' codes (:func:`_worker_codes`) given: grouped by the
    integer codes (in the workers' sorted order), not by the id strings."""
    seconds = SCREEN_SECONDS if seconds is None else seconds
    same_side = SCREEN_SAME_SIDE if same_side is None else same_side
    who, workers = codes
    a = answers.assign(worker_id=who)
    out = pd.DataFrame(index=workers)
    everyone = pd.RangeIndex(len(workers))
    if "seconds" in a.columns and pd.to_numeric(a["seconds"], errors="coerce").notna().any():
        timed = a.assign(seconds=pd.to_numeric(a["seconds"], errors="coerce")).dropna(subset=["seconds"])
        # the answers of one page share its time: count each page once
        page_keys = ["worker_id", "seconds"] + (["submitted_at"] if "submitted_at" in timed.columns else [])
        pages = timed.groupby(page_keys, as_index=False).size()
        per = pages.groupby("worker_id").agg(seconds=("seconds", "sum"), items=("size", "sum"))
        out["seconds_per_answer"] = (per["seconds"] / per["items"]).reindex(everyone).to_numpy()
    else:
        out["seconds_per_answer"] = np.nan
    out["too_fast"] = out["seconds_per_answer"] < seconds
    if ("reading_seconds" in a.columns and out["seconds_per_answer"].notna().any()
            and pd.to_numeric(a["reading_seconds"], errors="coerce").notna().any()):
        # calibrated to the reading load: a worker is too fast when their pages took less time
        # than the decision time of each item plus skimming the words it shows
        timed = a.assign(seconds=pd.to_numeric(a["seconds"], errors="coerce"),
                         floor=seconds + pd.to_numeric(a["reading_seconds"], errors="coerce").fillna(0.0))
        timed = timed.dropna(subset=["seconds"])
        floor = timed.groupby("worker_id")["floor"].sum()
        out["reading_floor_per_answer"] = (floor / timed.groupby("worker_id").size()).reindex(everyone).to_numpy()
        out["relative_speed"] = _relative_speed(out["seconds_per_answer"].to_numpy(float),
                                                out["reading_floor_per_answer"].to_numpy(float))
        out["too_fast"] = out["too_fast"] | (out["relative_speed"] >= SCREEN_RELATIVE_SPEED)
    else:   # the same columns whatever the answers hold (none, untimed, no reading load)
        out["reading_floor_per_answer"] = np.nan
        out["relative_speed"] = np.nan
    if "answer_shown" in a.columns:
        # once per distinct shown code, spread by the codes; counts by bincount over the workers
        code, distinct = pd.factorize(answers["answer_shown"])  # missing -> -1: neither side
        first = np.asarray([str(v) == "a_better" for v in distinct] + [False])[code]
        second = np.asarray([str(v) == "b_better" for v in distinct] + [False])[code]
        n = np.bincount(who, minlength=len(workers))
        with np.errstate(invalid="ignore", divide="ignore"):
            share = np.maximum(np.bincount(who[first], minlength=len(workers)) / n,
                               np.bincount(who[second], minlength=len(workers)) / n)
        out["same_side_share"] = share
        out["same_side"] = (share >= same_side) & (n >= SCREEN_MIN_ANSWERS)
    else:
        out["same_side_share"] = np.nan
        out["same_side"] = False
    return out


def empty_worker_table() -> pd.DataFrame:
    """The workers table of a study with no answers: :func:`worker_table`'s columns, no row.

    Returns
    -------
    pandas.DataFrame
    """
    return worker_table(pd.DataFrame({"worker_id": pd.Series(dtype=object), "is_trap": pd.Series(dtype=bool),
                                      "correct": pd.Series(dtype=bool)}))


def _relative_speed(seconds: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """Each worker's relative speed index on their own reading load (Leiner 2019): the crowd's
    median pace over the worker's, where a pace is the seconds an answer took over its reading
    floor (the seconds to decide plus those its items' words take to skim), so a heavy page and
    a light one are compared fairly. Infinite for a worker whose pages took 0 s; NaN where a
    worker is untimed or fewer than ``SCREEN_MIN_TIMED_WORKERS`` workers are timed: too few to
    say what a typical pace is."""
    with np.errstate(invalid="ignore", divide="ignore"):
        pace = np.where(floor > 0, seconds / floor, np.nan)
        timed = np.isfinite(pace) & (pace >= 0)
        out = np.full(len(pace), np.nan)
        if timed.sum() >= SCREEN_MIN_TIMED_WORKERS:
            typical = np.median(pace[timed])
            out[timed] = np.where(pace[timed] > 0, typical / np.where(pace[timed] > 0, pace[timed], 1.0), np.inf)
    return out


#: A trap whose accuracy among otherwise trusted workers is below this is flagged: most of the
#: workers the other traps trust miss it, so the trap, not the workers, is the likelier fault.
TRAP_SUSPECT_ACCURACY = 0.5
#: Otherwise trusted workers a trap needs before it can be flagged: the fewest at which the
#: binomial test below can reject at its level (0 of 5 right: p = 1/32).
TRAP_SUSPECT_MIN_ANSWERS = 5
#: Level of the one-sided exact binomial test that a flagged trap's accuracy among otherwise
#: trusted workers is below ``TRAP_SUSPECT_ACCURACY`` (a handful of answers below one half is
#: what a good trap often gets by chance).
TRAP_SUSPECT_ALPHA = 0.05


def trap_table(answers: pd.DataFrame, expected: pd.Series, threshold: float = 0.7, min_traps: int = 3,
               drop_traps=()) -> pd.DataFrame:
    """One row per trap: its expected answer(s), the answers it got, and its accuracy among the
    workers the *other* traps trust.

    A worker is *otherwise trusted* on trap t when their trust computed without t (correct
    answers to the other counted traps over the other traps seen, over at least ``min_traps``
    of them) is at least ``threshold``: a leave-one-out estimate, so a trap cannot vouch for
    itself. A trap that most otherwise trusted workers miss (accuracy below
    ``TRAP_SUSPECT_ACCURACY`` over ``TRAP_SUSPECT_MIN_ANSWERS`` or more of them, and
    significantly so: the one-sided exact binomial p-value ``suspect_p`` = P(X <= right) for
    X ~ Bin(trusted answers, ``TRAP_SUSPECT_ACCURACY``) below ``TRAP_SUSPECT_ALPHA``) is flagged
    ``suspect``: its expected answer is likely not what attentive people answer, and dropping it
    (``[quality] drop_traps`` in study.toml, or ``satcal ingest --drop-trap``) recomputes trust
    without it.

    Parameters
    ----------
    answers : pandas.DataFrame
        Every valid answer before exclusion, with ``example_id, worker_id, answer``
        (canonical orientation), ``is_trap`` and ``correct``.
    expected : pandas.Series
        The expected answer(s) of each trap (``;``-separated), indexed by trap id.
    threshold : float, default 0.7
        Trust in [0, 1] a worker needs on the other traps to count as otherwise trusted
        (``[quality] trust_threshold``).
    min_traps : int, default 3
        Other counted traps a worker must have answered to be otherwise trusted (at least 1).
    drop_traps : iterable of str, default ()
        Trap ids left out of every worker's trust; their rows stay, marked ``dropped``.

    Returns
    -------
    DataFrame ``trap_id, expected, answers, correct, accuracy, trusted_answers,
    trusted_accuracy, most_common_answer, suspect_p, suspect, dropped``;
    ``most_common_answer`` is the otherwise trusted workers' (all workers' where none is).
    """
    is_trap = answers["is_trap"]
    # bool, or read back from CSV as text (a bool column as is: no string made per answer)
    a = answers[is_trap.to_numpy() if is_trap.dtype == bool else (is_trap.astype(str) == "True").to_numpy()]
    a = a.assign(ok=a["correct"].astype(str) == "True", trap=a["example_id"].astype(str))
    drop = {str(t) for t in drop_traps}
    counted = ~a["trap"].isin(drop)
    per_worker = a[counted].groupby("worker_id")["ok"].agg(["sum", "size"])
    s = per_worker["sum"].reindex(a["worker_id"]).fillna(0).to_numpy()
    n = per_worker["size"].reindex(a["worker_id"]).fillna(0).to_numpy()
    own = counted.to_numpy()
    # leave this trap out (when it counts at all)
    s_other, n_other = s - (a["ok"].to_numpy() & own), n - own
    with np.errstate(invalid="ignore", divide="ignore"):
        trust_other = np.where(n_other > 0, s_other / np.maximum(n_other, 1), np.nan)
    trusted = (n_other >= max(min_traps, 1)) & (trust_other >= threshold)
    a = a.assign(trusted=trusted)
    ids = pd.Index(sorted(set(map(str, expected.index)) | set(a["trap"])), name="trap_id")
    g = a.groupby("trap")
    t = a[a["trusted"]].groupby("trap")
    out = pd.DataFrame(index=ids)
    out["expected"] = pd.Series(expected.to_numpy(), index=expected.index.astype(str)).reindex(ids).fillna("")
    out["answers"] = g.size().reindex(ids).fillna(0).astype(int)
    out["correct"] = g["ok"].sum().reindex(ids).fillna(0).astype(int)
    out["accuracy"] = (out["correct"] / out["answers"].where(out["answers"] > 0)).round(4)
    out["trusted_answers"] = t.size().reindex(ids).fillna(0).astype(int)
    trusted_correct = t["ok"].sum().reindex(ids).fillna(0)
    out["trusted_accuracy"] = (trusted_correct / out["trusted_answers"].where(out["trusted_answers"] > 0)).round(4)
    def modal(rows):
        """Per trap, the commonest answer (ties: the first in sorted order): the (trap, answer)
        counts in sorted order, the first largest of each trap (``value_counts().sort_index()
        .idxmax()`` per trap, without a Python call per trap).

        Parameters
        ----------
        rows : pandas.DataFrame
            Answers with ``trap`` and ``answer``.
        """
        counts = rows.groupby(["trap", "answer"], observed=True).size()
        if not len(counts):
            return pd.Series(dtype=object)
        # the dtype pandas infers, as for the per-trap calls' results
        return pd.Series([answer for _, answer in counts.groupby(level=0).idxmax()],
                         index=counts.index.unique(level=0))
    common = modal(a[a["trusted"]]).reindex(ids)
    out["most_common_answer"] = common.fillna(modal(a).reindex(ids)).fillna("")
    n_trusted = out["trusted_answers"].to_numpy()
    out["suspect_p"] = np.where(n_trusted > 0, binom_cdf(trusted_correct.to_numpy().astype(int), n_trusted,
                                                         TRAP_SUSPECT_ACCURACY), np.nan).round(6)
    out["suspect"] = ((out["trusted_answers"] >= TRAP_SUSPECT_MIN_ANSWERS)
                      & (out["trusted_accuracy"] < TRAP_SUSPECT_ACCURACY)
                      & (out["suspect_p"] < TRAP_SUSPECT_ALPHA))
    out["dropped"] = out.index.isin(list(drop))
    return out.reset_index()


def reading_seconds(items: pd.DataFrame, k: int, words_per_minute: float = SKIM_WORDS_PER_MINUTE) -> pd.Series:
    """Seconds to skim each item of a batch (items.csv): the words it shows (query, its
    description, and the title, address and snippet of each of the 2k results) at
    ``words_per_minute`` (:data:`SKIM_WORDS_PER_MINUTE`, Rayner et al. 2016). Indexed by
    ``item_id``.

    Parameters
    ----------
    items : pandas.DataFrame
        items.csv.
    k : int
        List length.
    words_per_minute : float, optional
        Skimming speed.

    Returns
    -------
    pandas.Series

    References
    ----------
    Rayner, K., Schotter, E. R., Masson, M. E. J., Potter, M. C. and Treiman, R. (2016). So
    much to read, so little time: how do we read, and can speed reading help? Psychological
    Science in the Public Interest 17(1), 4-34.
    """
    # the texts :func:`satcal.platforms.item_view` shows, column by column: each distinct
    # cell unescaped and its words counted once (a document shown in many items is counted
    # once), then summed per item
    def plain(column: str) -> np.ndarray:
        """Each row's cell of ``column`` as the plain text a worker sees ('' when missing)."""
        if column not in items.columns:
            return np.full(len(items), "", dtype=object)
        cells = items[column].to_numpy(dtype=object)
        text = np.array([str(v) for v in cells], dtype=object)
        codes, distinct = pd.factorize(text)
        out = np.array([html.unescape(v) for v in distinct], dtype=object)[codes]
        out[pd.isna(cells)] = ""
        return out

    def words(text: np.ndarray) -> np.ndarray:
        codes, distinct = pd.factorize(text)
        return np.array([len(v.split()) for v in distinct], dtype=np.int64)[codes] if len(text) else \
            np.zeros(0, dtype=np.int64)

    def either(first: np.ndarray, fallback: np.ndarray) -> np.ndarray:
        return np.where(first != "", first, fallback).astype(object)

    total = words(either(plain("query_title"), plain("query"))) + words(plain("query_description"))
    for side in ("A", "B"):
        for i in range(1, k + 1):
            doc = f"{side}{i}"
            total = total + words(either(plain(f"{doc}_title"), plain(doc))) \
                + words(plain(f"{doc}_url_text")) + words(plain(f"{doc}_snippet"))
    per_item = dict(zip((str(v) for v in items["item_id"]), total.tolist()))
    return pd.Series(per_item, dtype=float, name="reading_seconds") * 60.0 / words_per_minute


def attention_failures(rows: pd.DataFrame) -> pd.Series:
    """Failed attention checks per worker, from raw rows that carry ``attention_passed``
    (``"no"`` for a failed check; the hosted study's snapshots). Workers without a failure
    are absent.

    Parameters
    ----------
    rows : pandas.DataFrame
        Raw rows with ``worker_id``.

    Returns
    -------
    pandas.Series
        ``attention_failed`` by worker id (empty without the column).
    """
    if "attention_passed" not in rows.columns:
        return pd.Series(dtype=int, name="attention_failed")
    failed = rows["attention_passed"].fillna("").astype(str).str.strip() == "no"
    return rows.loc[failed].groupby("worker_id").size().rename("attention_failed")


def exclude_failed_attention(workers: pd.DataFrame, failures: pd.Series, limit: int | None) -> pd.DataFrame:
    """``workers`` (:func:`worker_table`) with ``attention_failed`` and, when ``limit`` is not
    None, workers who failed ``limit`` or more attention checks excluded (the reason says so).
    An attention check has one right answer the page itself states, so failing it is evidence
    of not reading, unlike a missed trap (Prolific's attention-check policy).

    Parameters
    ----------
    workers : pandas.DataFrame
        The workers table.
    failures : pandas.Series
        Failed checks by worker id (:func:`attention_failures`).
    limit : int or None
        Failures that exclude a worker; None excludes none.

    Returns
    -------
    pandas.DataFrame
        A copy.
    """
    out = workers.copy()
    out["attention_failed"] = out["worker_id"].map(failures).fillna(0).astype(int)
    if limit is not None:
        hit = (out["attention_failed"] >= limit) & ~out["excluded"].astype(bool)
        out.loc[hit, "reason"] = [f"failed {n} attention check{'s' if n != 1 else ''} (limit {limit})"
                                  for n in out.loc[hit, "attention_failed"]]
        out.loc[hit, "excluded"] = True
    return out


class Agreement(ResultTables):
    """Agreement between workers on the examples answered more than once.

    ``alpha`` is Krippendorff's alpha for nominal data over the four answer codes (1 = perfect
    agreement, 0 = what chance would give, below 0 = systematic disagreement), computed by the
    ``krippendorff`` package from the per-example answer counts; ``observed`` is the share of
    pairs of answers to the same example that agree. Only examples with two or more answers
    count; ``examples`` is how many there are.

    Parameters
    ----------
    alpha : float
        Krippendorff's alpha (nominal), at most 1; NaN when every answer has the same code.
    observed : float
        Observed agreement in [0, 1]: agreeing pairs of answers to the same example over all
        such pairs, pooled over the examples.
    examples : int
        Examples with two or more answers.
    answers : int
        Answers to those examples.
    per_example : float
        Mean answers per example among them (at least 2).

    References
    ----------
    Krippendorff, K. (2004). Content Analysis: An Introduction to Its Methodology, 2nd ed.
    Sage, Thousand Oaks, CA (alpha, from the coincidence matrix of the answers).
    """

    def __init__(self, alpha: float, observed: float, examples: int, answers: int, per_example: float):
        self.alpha, self.observed, self.examples = alpha, observed, examples
        self.answers, self.per_example = answers, per_example

    def __repr__(self) -> str:
        return (f"<Agreement alpha={self.alpha:.3f}, pairwise {self.observed:.3f} over {self.examples} "
                f"examples with 2+ answers ({self.per_example:.2f} answers each)>")

    def as_dict(self) -> dict:
        """The figures as a plain dict (what calibration.json records)."""
        return {"krippendorff_alpha": self.alpha, "pairwise_agreement": self.observed,
                "examples": self.examples, "answers": self.answers, "answers_per_example": self.per_example}

    def tables(self) -> dict:
        """``{"agreement": one row of :meth:`as_dict`}``, the results protocol's table."""
        return {"agreement": pd.DataFrame([self.as_dict()])}

    def summary(self) -> str:
        """One line: alpha, pairwise agreement and the examples they rest on."""
        return (f"Krippendorff's alpha (nominal) {self.alpha:.3f}; pairwise agreement {self.observed:.3f} over "
                f"{self.examples} examples with 2+ answers ({self.per_example:.2f} answers each)")


def agreement(answers: pd.DataFrame) -> Agreement | None:
    """Krippendorff's alpha (nominal) of the answers to examples answered two or more times
    (``example_id, answer``, canonical orientation); None when no example has two answers.

    Parameters
    ----------
    answers : pandas.DataFrame
        Answers with ``example_id`` and ``answer``.

    Returns
    -------
    Agreement or None
    """
    from .answers import ANSWER_CODES
    # the crosstab of example by answer code (examples sorted, as pd.crosstab sorts them),
    # counted on integer codes; a categorical column (an ingest's summary) by its codes, the
    # categories its rows hold ranked as factorising the text ranks them: the same numbers
    examples, ids = _sorted_codes_of(answers["example_id"])
    said = answers["answer"]
    if isinstance(said.dtype, pd.CategoricalDtype):
        at = said.cat.codes.to_numpy()
        code = np.append(pd.Index(list(ANSWER_CODES)).get_indexer(said.cat.categories), -1)[at]  # -1: missing
    else:
        code = pd.Index(list(ANSWER_CODES)).get_indexer(said)
    kept = (examples >= 0) & (code >= 0)
    width = len(ANSWER_CODES)
    counts = np.bincount(examples[kept] * width + code[kept], minlength=len(ids) * width).reshape(len(ids), width)
    m = counts[counts.sum(axis=1) >= 2].astype(float)
    if not len(m):
        return None
    import krippendorff
    pairs = (m * (m - 1)).sum(axis=1)
    totals = m.sum(axis=1)
    observed = float(pairs.sum() / (totals * (totals - 1)).sum())
    alpha = float(krippendorff.alpha(value_counts=m, level_of_measurement="nominal")) \
        if (m.sum(axis=0) > 0).sum() > 1 else float("nan")
    return Agreement(alpha, observed, len(m), int(totals.sum()), float(totals.mean()))


def require_crowdkit():
    """The optional crowd-kit package, or a one-line error saying how to install it."""
    try:
        from crowdkit.aggregation import DawidSkene
    except ImportError:
        raise SatcalError("Dawid-Skene needs the optional crowd-kit package: "
                          "pip install 'satcal[crowd]'") from None
    return DawidSkene


def dawid_skene(answers: pd.DataFrame, n_iter: int = 100) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Dawid-Skene worker models (crowd-kit, an optional extra), over example and trap answers;
    the traps' expected answers are passed as known labels where crowd-kit accepts them. Only
    meaningful when examples were answered by several workers.

    Returns the aggregated label of each example and each worker's estimated accuracy (the
    trace of their confusion matrix weighted by the label priors).

    Parameters
    ----------
    answers : pandas.DataFrame
        Answers with ``example_id``, ``worker_id``, ``answer`` and, for the traps,
        ``is_trap`` and ``correct``.
    n_iter : int, optional
        EM iterations (default 100).

    Returns
    -------
    tuple of (pandas.DataFrame, pandas.DataFrame)
        The labels by example and the accuracy by worker.

    Raises
    ------
    SatcalError
        crowd-kit is not installed.

    References
    ----------
    Dawid, A. P. and Skene, A. M. (1979). Maximum likelihood estimation of observer error-rates
    using the EM algorithm. Journal of the Royal Statistical Society, Series C (Applied
    Statistics) 28(1), 20-28.
    """
    DawidSkene = require_crowdkit()
    data = answers.rename(columns={"example_id": "task", "worker_id": "worker", "answer": "label"})
    model = DawidSkene(n_iter=n_iter)
    # traps are items with known labels: crowd-kit (>= 1.2) anchors the worker models on them
    known = None
    if "is_trap" in answers.columns and "correct" in answers.columns:
        traps = answers[answers["is_trap"].astype(str) == "True"]
        right = traps[traps["correct"].astype(str) == "True"]
        known = right.drop_duplicates("example_id").set_index("example_id")["answer"]
    import inspect
    import warnings
    with warnings.catch_warnings():  # crowd-kit's own pandas deprecations, hundreds a fit
        warnings.filterwarnings("ignore", module="crowdkit")
        if known is not None and len(known) and "true_labels" in inspect.signature(model.fit).parameters:
            ds = model.fit(data[["task", "worker", "label"]], true_labels=known)
        else:
            ds = model.fit(data[["task", "worker", "label"]])
    labels = ds.labels_.rename("label").reset_index()
    errors = ds.errors_
    priors = ds.priors_
    acc = {}
    for worker in errors.index.get_level_values(0).unique():
        m = errors.loc[worker]
        acc[worker] = float(sum(priors.get(c, 0) * m.loc[c, c] for c in m.columns if c in m.index))
    return labels, pd.DataFrame({"worker_id": list(acc), "ds_accuracy": list(acc.values())})
