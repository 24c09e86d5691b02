"""The coverage generator: examples that fill every phi and |dphi| cell of every formulation.

An example is a query and two lists A and B of k judged documents. Under the study's ``max``
normalisation a list's phi depends only on its relevance pattern, so the generator works on
*pattern pairs* first and picks documents last:

1. candidate patterns: all L^k patterns when that is small (243 for the study), otherwise a
   seeded sample spread over the score range (no enumeration that would explode);
2. candidate pairs (A, B) buildable from at least one query's judged documents under the
   overlap policy, and the cell incidence matrix: which phi-cells (two lists) and which
   |dphi|-cell (one) of every formulation each pair lands in;
3. a selection of pairs, with repetition, that gives every feasible cell ``min_per_cell``:

   - ``published`` (Urbano and Marrero, ECIR 2015, section 3): repeat { take the (formulation, cell) with the
     fewest so far; add a random example landing in it } until all cells are full;
   - ``greedy``: the same, but among the candidates landing in the neediest cell take the one
     that fills the most open deficits across all formulations;
   - ``optimal`` (default): solve the covering LP (minimise examples subject to every cell's
     count >= min_per_cell; scipy/HiGHS), round down, repair the remaining deficits greedily and
     prune examples that no cell needs;

4. documents: each selected pair goes to a query able to build it, the least used so far
   (queries used evenly), and its positions are filled with random documents of the right
   level, never one twice in a list; a concrete example is never repeated.

The *cell floor* is ``min_per_cell * max_f (feasible |dphi|-cells of f)``: each example puts
exactly one |dphi| value in each formulation's cells, so no batch that fills every cell is
smaller (``lower_bound``). It is a floor for covering the cells, not for a query share: a batch
capped by ``max_query_share`` can fall below it, leaving cells short (reported).

Measures beyond the DCG family (``Design.extra``: RBP, ERR, RR, P) are covered only when asked
(``cover_extra``), as every covered cell is paid for; either way the generator selects both
ways and reports what covering them costs, and how many of their cells the DCG examples alone
leave short. Pool-based measures (AP) are never placed: their scores depend on the query's
pool, not on the relevance pattern alone.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from ._results import ResultTables
from .errors import SatcalError, check_seed, is_whole
from .judgments import Judgments
from .measures import resolve_formulations, bin_index, score_lists

__all__ = ["Design", "GenerationResult", "generate", "METHODS", "OVERLAP_POLICIES", "coverage_heatmap",
           "pairing_correlation", "ECIR2015_PAIRING_CORRELATION"]

METHODS = ("optimal", "greedy", "published")
OVERLAP_POLICIES = ("allow", "disjoint")
MAX_ENUMERATED_PATTERNS = 4096
SAMPLED_PATTERNS = 3000
MAX_PAIRS = 80_000
MAX_LP_COLUMNS = 8000
#: corr(phi_A, phi_B) of the ECIR 2015 pairs (Urbano and Marrero, ECIR 2015), median over the 36 formulations
#: (lin-const: -0.06); tests/test_joint.py recomputes it from the embedded answers.
ECIR2015_PAIRING_CORRELATION = -0.08


def pairing_correlation(phi_a, phi_b, weights=None) -> np.ndarray:
    """The pairing correlation of a design: Pearson corr(phi_A, phi_B) over its examples, one
    per formulation (column).

    The paper's P(Sat|phi) depends on it (a list's partner shapes the both_good/both_bad
    answers it gets), the per-list curve s(phi) does not.

    Parameters
    ----------
    phi_a, phi_b : (n, F) or (n,) arrays
        Scores of lists A and B of each example.
    weights : (n,) array, optional
        How often each row counts (e.g. its answers); default 1.

    Returns
    -------
    (F,) array (a float for 1-d input); NaN where a side's scores do not vary.
    """
    a, b = np.asarray(phi_a, float), np.asarray(phi_b, float)
    single = a.ndim == 1
    a, b = a.reshape(len(a), -1), b.reshape(len(b), -1)
    w = np.ones(len(a)) if weights is None else np.asarray(weights, float)
    w = w / w.sum()
    da, db = a - w @ a, b - w @ b
    va, vb = w @ da ** 2, w @ db ** 2
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where((va > 0) & (vb > 0), (w @ (da * db)) / np.sqrt(va * vb), np.nan)
    return float(r[0]) if single else r


def _whole_level(value) -> bool:
    """A relevance level: an integer, or a float or string that is one (2.0 from a float array)."""
    try:
        return is_whole(value) or float(value).is_integer()
    except (TypeError, ValueError):
        return False


@dataclass
class Design:
    """What the generator must achieve.

    Parameters
    ----------
    k : int
        Documents per list.
    levels : sequence of int
        The relevance levels lists are built from (default 0..2); the top one is L-1 of ``max``.
    formulations : list, optional
        Defaults to the 36 study formulations.
    n_bins : int
        Equal bins over [0, 1] (10 in the study).
    min_per_cell : int
        Target count for every feasible cell (200 in the study).
    overlap : {"allow", "disjoint"}
        Whether A and B may share documents.
    method : {"optimal", "greedy", "published"}
        How examples are selected: ``optimal`` (fewest examples), ``greedy``, or ``published``
        (the algorithm of Urbano & Marrero 2015).
    seed : int
        Seed of every random draw of the generator.
    extra : list, optional
        Measures beyond the crossed family (ids or formulations, e.g. ``["lin-geo0.8", "err"]``):
        their cells are reported in the coverage table, and covered when ``cover_extra``.
    cover_extra : bool
        Fill the cells of ``extra`` too (pool-based measures are refused then: the generator
        places lists by their relevance pattern alone). The cost, in examples, is reported
        either way.
    max_query_share : float
        Limit on any one query's examples, as a share of the batch placed (0 = no limit): the
        cap, first set on the batch the selection asks for, is lowered while the placed batch is
        smaller than asked, unless honouring the share would keep under half the batch (then
        the shortfall is reported, in ``GenerationResult.warnings``). Examples that only a few queries can host (lists needing many highly
        relevant documents) otherwise pile up on those queries; with a limit, the generator
        picks other examples for the cells they would have filled. The cost is reported: the
        examples added (``query_cap_extra_examples``, negative when pairs had no other host)
        and the cells left short of ``min_per_cell`` (``query_cap_short_cells``).

    Raises
    ------
    SatcalError
        A bad field, in one line: a count (``k``, ``n_bins``, ``min_per_cell``) that is not a
        whole number or too small, a level that is not a whole number, a bad seed, an unknown
        ``overlap`` or ``method``, a share outside [0, 1], a formulation not of the ``max``
        normalisation.
    """

    k: int = 5
    levels: Sequence[int] = (0, 1, 2)
    formulations: list = None
    n_bins: int = 10
    min_per_cell: int = 200
    overlap: str = "allow"
    method: str = "optimal"
    seed: int = 2015
    max_query_share: float = 0.0
    extra: list = ()
    cover_extra: bool = False

    def __post_init__(self):
        self.formulations = resolve_formulations(self.formulations)
        self.extra = resolve_formulations(self.extra) if self.extra else []
        known = {f.id for f in self.formulations}
        self.extra = [f for f in self.extra if f.id not in known]
        problems = []
        # a level of 1.5 would be truncated to 1 by int(): said, not silently moved
        fractional = [v for v in self.levels if not _whole_level(v)]
        if fractional:
            raise SatcalError(f"levels must be whole numbers, got {fractional[0]!r}")
        self.levels = tuple(sorted(int(float(v)) for v in self.levels))
        # counts: whole numbers (2.5 examples per cell, a list of 4.0 documents are mistakes)
        for name, least in (("k", 1), ("n_bins", 2), ("min_per_cell", 1)):
            value = getattr(self, name)
            if not is_whole(value) or value < least:
                problems.append(f"{name} must be a whole number, at least {least}, got {value!r}")
        if len(self.levels) < 2:
            problems.append(f"levels needs at least two levels, got {list(self.levels)}")
        if self.overlap not in OVERLAP_POLICIES:
            problems.append(f"overlap must be one of {', '.join(OVERLAP_POLICIES)}, got {self.overlap!r}")
        if self.method not in METHODS:
            problems.append(f"method must be one of {', '.join(METHODS)}, got {self.method!r}")
        try:
            check_seed(self.seed)
        except SatcalError as err:   # said with the other problems, in one line
            problems.append(str(err))
        if not 0 <= self.max_query_share <= 1:
            problems.append(f"max_query_share must be a share in [0, 1] (0: no limit), got {self.max_query_share}")
        for f in self.formulations + (self.extra if self.cover_extra else []):
            if f.normalization != "max":
                problems.append(f"formulation {f.id} uses normalisation {f.normalization!r}; the "
                                "generator places lists by the study's 'max' normalisation, which "
                                "depends on the relevance pattern only")
                break
        if problems:
            raise SatcalError("; ".join(problems))

    @property
    def top_level(self) -> int:
        """The highest of the design's levels."""
        return max(self.levels)

    @property
    def placeable_extra(self) -> list:
        """The extra measures the generator can place (scored from the pattern alone)."""
        return [f for f in self.extra if f.normalization == "max"]


@dataclass(repr=False)
class GenerationResult(ResultTables):
    """Examples, their scores and the coverage they reach.

    Attributes
    ----------
    examples : pandas.DataFrame
        One row per example: ``example_id, query, a1..a<k>, b1..b<k>, ra1..ra<k>, rb1..rb<k>``.
    scores : pandas.DataFrame
        phi of both lists of every example under every formulation (long).
    coverage : pandas.DataFrame
        Per formulation, kind (phi or |dphi|) and bin: the count, whether the cell is feasible
        and covered.
    design : Design
        What the generator was asked to achieve.
    lower_bound : int
        The cell floor: the fewest examples that can fill every cell.
    method : str
        The selection method that ran (``design.method``).
    candidates : dict
        Statistics of the candidates and the selection (queries used, query share, ...).
    warnings : list of str
        Sentences a researcher should read before using the batch.
    """

    examples: pd.DataFrame
    scores: pd.DataFrame
    coverage: pd.DataFrame
    design: Design
    lower_bound: int
    method: str
    candidates: dict = field(default_factory=dict)
    #: sentences a researcher should read before using the batch (query concentration, the
    #: query share asked and got, a level too rare to reach phi's upper range)
    warnings: list = field(default_factory=list)

    @property
    def n_examples(self) -> int:
        """The number of examples built."""
        return len(self.examples)

    @property
    def infeasible(self) -> pd.DataFrame:
        """The cells no buildable example lands in (rows of :attr:`coverage`)."""
        return self.coverage[~self.coverage["feasible"]].reset_index(drop=True)

    @property
    def complete(self) -> bool:
        """Every feasible cell the design covers holds ``min_per_cell``."""
        c = self.coverage[self.coverage["feasible"] & self.coverage["covered"]]
        return bool((c["count"] >= self.design.min_per_cell).all())

    def pairing_correlation(self) -> pd.Series:
        """corr(phi_A, phi_B) of the examples per formulation of the design's family
        (:func:`pairing_correlation`).

        Returns
        -------
        pandas.Series
            Indexed by formulation id.
        """
        ids = [f.id for f in self.design.formulations]
        wide = self.scores[self.scores["formulation"].isin(ids)].pivot(
            index="example_id", columns="formulation", values=["phi_a", "phi_b"])
        return pd.Series(pairing_correlation(wide["phi_a"][ids].to_numpy(), wide["phi_b"][ids].to_numpy()),
                         index=ids)

    def plot(self, ax=None):
        """The coverage heat map, formulations x bins, for phi and |dphi|.

        Parameters
        ----------
        ax : sequence of two matplotlib Axes, optional
            A new figure when omitted.

        Returns
        -------
        matplotlib.figure.Figure
        """
        return coverage_heatmap(self.coverage, self.design.min_per_cell, ax=ax)

    def figures(self) -> dict:
        """The coverage heat map (``coverage.png`` in :meth:`save`).

        Returns
        -------
        dict of str to matplotlib.figure.Figure
        """
        return {"coverage_figure": self.plot()}

    def _file_stem(self, name: str) -> str:
        return "coverage" if name == "coverage_figure" else name

    def tables(self) -> dict[str, pd.DataFrame]:
        """The examples, their scores under every formulation and the coverage of each cell.

        Returns
        -------
        dict of str to pandas.DataFrame
        """
        return {"examples": self.examples, "scores": self.scores, "coverage": self.coverage}

    def summary(self) -> str:
        """Examples against the cell floor, infeasible cells, completeness and warnings, as text.

        Returns
        -------
        str
        """
        s = self.as_dict()
        lines = [f"<GenerationResult: {s['examples']} examples (cell floor {s['lower_bound']}, ratio "
                 f"{s['ratio_to_bound']:.2f}); method {s['method']}; {s['infeasible_cells']} infeasible cells; "
                 f"every feasible cell has >= {self.design.min_per_cell}: {'yes' if s['complete'] else 'NO'}>"]
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def as_dict(self) -> dict:
        """The counts of the generation (examples, cell floor, method, infeasible cells,
        completeness, and the candidates' statistics), as recorded in the study's log.

        Returns
        -------
        dict
        """
        return {"examples": self.n_examples, "lower_bound": self.lower_bound, "method": self.method,
                "ratio_to_bound": round(self.n_examples / max(self.lower_bound, 1), 4),
                "infeasible_cells": int((~self.coverage["feasible"]).sum()),
                "complete": self.complete, **self.candidates}


# --------------------------------------------------------------------------------------------
# Candidates
# --------------------------------------------------------------------------------------------
def _availability(judgments: Judgments, levels: Sequence[int]):
    """Queries and their judged document counts at each design level, (Q, L)."""
    t = judgments.table[judgments.table["level"].isin(levels)]
    counts = pd.crosstab(t["query"], t["level"]).reindex(columns=list(levels), fill_value=0)
    return counts.index.to_numpy(), counts.to_numpy()


def _requirements(patterns: np.ndarray, levels: Sequence[int]) -> np.ndarray:
    """(P, L) documents each pattern needs at each level."""
    return np.stack([(patterns == lv).sum(axis=1) for lv in levels], axis=1)


def _log_arrangements(avail: np.ndarray, need: np.ndarray) -> np.ndarray:
    """log of the number of ordered choices of ``need`` distinct documents out of ``avail``,
    per level, summed: log prod_l avail_l! / (avail_l - need_l)!  (-inf where impossible)."""
    from scipy.special import gammaln
    ok = (need <= avail).all(axis=-1)
    val = (gammaln(avail + 1.0) - gammaln(np.maximum(avail - need, 0) + 1.0)).sum(axis=-1)
    return np.where(ok, val, -np.inf)


def _candidate_patterns(design: Design, avail: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, bool]:
    """Every pattern if there are few, else a seeded sample spread over the score range."""
    levels = np.array(design.levels)
    n_all = len(levels) ** design.k
    if n_all <= MAX_ENUMERATED_PATTERNS:
        pats = np.array(list(itertools.product(levels, repeat=design.k)), dtype=np.int64)
        exhaustive = True
    else:
        # Mixtures with a random share of each level (Dirichlet(0.4): many extreme lists),
        # plus the constant lists, so both ends of every scale are reached.
        shares = rng.dirichlet(np.full(len(levels), 0.4), size=SAMPLED_PATTERNS)
        draws = np.array([rng.choice(levels, size=design.k, p=s) for s in shares])
        const = np.repeat(levels[:, None], design.k, axis=1)
        pats = np.unique(np.vstack([const, draws]), axis=0)
        exhaustive = False
    need = _requirements(pats, design.levels)
    buildable = (need[:, None, :] <= avail[None, :, :]).all(axis=2).any(axis=1)
    return pats[buildable], exhaustive


def _candidate_pairs(need: np.ndarray, avail: np.ndarray, overlap: str, rng, exhaustive: bool):
    """Unordered pairs (a <= b) of patterns some query can build together."""
    p = len(need)
    can = (need[:, None, :] <= avail[None, :, :]).all(axis=2)                 # (P, Q)
    if p * (p + 1) // 2 <= MAX_PAIRS:
        a, b = np.triu_indices(p)
    else:
        m = MAX_PAIRS
        a, b = rng.integers(0, p, m), rng.integers(0, p, m)
        a, b = np.minimum(a, b), np.maximum(a, b)
        ab = np.unique(np.stack([a, b], 1), axis=0)
        a, b = ab[:, 0], ab[:, 1]
        exhaustive = False
    if overlap == "allow":
        ok = (can[a] & can[b]).any(axis=1)
    else:
        ok = np.zeros(len(a), dtype=bool)
        for start in range(0, len(a), 4096):
            sl = slice(start, start + 4096)
            joint = need[a[sl]] + need[b[sl]]
            ok[sl] = (joint[:, None, :] <= avail[None, :, :]).all(axis=2).any(axis=1)
    return a[ok], b[ok], can, exhaustive


def _incidence(bins_a: np.ndarray, bins_b: np.ndarray, dbins: np.ndarray, n_bins: int):
    """Dense (cells, pairs) counts: rows are F*n_bins |dphi|-cells then F*n_bins phi-cells."""
    n_pairs, n_f = dbins.shape
    n_cells = 2 * n_f * n_bins
    mat = np.zeros((n_cells, n_pairs), dtype=np.int16)
    cols = np.arange(n_pairs)
    f_off = np.arange(n_f) * n_bins
    np.add.at(mat, ((f_off + dbins).T.ravel(), np.tile(cols, n_f)), 1)
    phi_off = n_f * n_bins + f_off
    np.add.at(mat, ((phi_off + bins_a).T.ravel(), np.tile(cols, n_f)), 1)
    np.add.at(mat, ((phi_off + bins_b).T.ravel(), np.tile(cols, n_f)), 1)
    return mat


# --------------------------------------------------------------------------------------------
# Selection
# --------------------------------------------------------------------------------------------
def _select_published(mat, need, capacity, rng, progress, info):
    counts = np.zeros(mat.shape[0], dtype=np.int64)
    chosen = np.zeros(mat.shape[1], dtype=np.int64)
    open_cells = need > 0
    while True:
        deficit_cells = np.flatnonzero(open_cells & (counts < need))
        if deficit_cells.size == 0:
            break
        c = deficit_cells[np.argmin(counts[deficit_cells])]
        cand = np.flatnonzero((mat[c] > 0) & (chosen < capacity))
        if cand.size == 0:
            open_cells[c] = False  # capacity exhausted: reported as short, not chased
            continue
        j = rng.choice(cand)
        chosen[j] += 1
        counts += mat[:, j]
        progress(1)
    return chosen


def _select_greedy(mat, need, capacity, rng, progress, info=None, chosen=None, sample: int = 600):
    counts = mat @ (chosen if chosen is not None else np.zeros(mat.shape[1], np.int64))
    chosen = np.zeros(mat.shape[1], dtype=np.int64) if chosen is None else chosen.copy()
    open_cells = need > 0
    matf = mat.astype(np.float32)
    while True:
        deficit = np.where(open_cells, np.maximum(need - counts, 0), 0)
        deficit_cells = np.flatnonzero(deficit > 0)
        if deficit_cells.size == 0:
            break
        c = deficit_cells[np.argmin(counts[deficit_cells])]
        cand = np.flatnonzero((mat[c] > 0) & (chosen < capacity))
        if cand.size == 0:
            open_cells[c] = False
            continue
        if cand.size > sample:
            cand = rng.choice(cand, sample, replace=False)
        # Value of a candidate: the open deficits it fills, each capped by what is left.
        gain = np.minimum(matf[np.ix_(deficit_cells, cand)], deficit[deficit_cells, None]).sum(axis=0)
        best = cand[np.flatnonzero(gain == gain.max())]
        j = rng.choice(best)
        chosen[j] += 1
        counts += mat[:, j]
        progress(1)
    return chosen


def _prune(mat, need, chosen, rng):
    """Drop examples no cell needs (largest surplus first), keeping every cell at its target."""
    counts = mat.astype(np.int64) @ chosen
    order = rng.permutation(np.flatnonzero(chosen))
    for j in order:
        col = mat[:, j]
        while chosen[j] > 0 and np.all(counts - col >= np.minimum(need, counts)):
            chosen[j] -= 1
            counts -= col
    return chosen


def _select_optimal(mat, need, capacity, rng, progress, info):
    """LP relaxation of the covering problem on the |dphi| cells, rounded down, then repaired.

    The |dphi| cells bind (each example gives each formulation exactly one |dphi| value, but
    two phi values), so the LP is solved over them alone, on pairs merged by their |dphi|
    signature: 7,415 columns instead of 29,646 x 720 cells for the study, 1.4 s instead of
    110 s. Members of each signature then share its count at random; a greedy pass fills what
    rounding and the phi cells still lack, and a pruning pass drops examples no cell needs.
    """
    from scipy.optimize import linprog
    from scipy.sparse import csc_matrix

    n_dphi = mat.shape[0] // 2
    rows = np.flatnonzero(need[:n_dphi] > 0)
    signatures, group = np.unique(mat[rows].T, axis=0, return_inverse=True)
    group = group.ravel()
    if len(signatures) > MAX_LP_COLUMNS:
        # A large sampled space: the LP keeps a random subset of signatures that still
        # reaches every cell (HiGHS time grows fast with columns); the greedy repairs the rest.
        keep = np.zeros(len(signatures), dtype=bool)
        for r in range(len(rows)):
            hits = np.flatnonzero(signatures[:, r])
            keep[rng.choice(hits, min(20, hits.size), replace=False)] = True
        rest = np.flatnonzero(~keep)
        extra = MAX_LP_COLUMNS - int(keep.sum())
        if extra > 0:
            keep[rng.choice(rest, min(extra, rest.size), replace=False)] = True
        remap = np.full(len(signatures), -1)
        remap[keep] = np.arange(int(keep.sum()))
        signatures, group = signatures[keep], remap[group]
    in_lp = group >= 0
    group_cap = np.bincount(group[in_lp], weights=capacity[in_lp].astype(float), minlength=len(signatures))
    res = linprog(np.ones(len(signatures)), A_ub=-csc_matrix(signatures.T.astype(float)),
                  b_ub=-need[rows].astype(float), bounds=np.stack([np.zeros(len(signatures)), group_cap], 1),
                  method="highs-ipm")
    chosen = np.zeros(mat.shape[1], dtype=np.int64)
    if res.status == 0:
        if len(signatures) == len(np.unique(group)):
            # ceil of the LP optimum over all candidate pairs: a lower bound no design can
            # beat when the candidates are exhaustive.
            info["lp_bound"] = int(np.ceil(res.fun - 1e-6))
        take = np.floor(res.x + 1e-7).astype(np.int64)
        order = np.argsort(group, kind="stable")
        order = order[group[order] >= 0]
        starts = np.searchsorted(group[order], np.arange(len(signatures)))
        ends = np.append(starts[1:], len(order))
        # Members of a signature differ only in their phi cells: pick, one at a time, the
        # member (of a sample) that fills the most open phi deficits.
        counts = np.zeros(mat.shape[0], dtype=np.int64)
        phi_rows = np.arange(n_dphi, mat.shape[0])
        picks = np.repeat(np.flatnonzero(take), take[take > 0])
        for g in rng.permutation(picks):
            members = order[starts[g]:ends[g]]
            members = members[chosen[members] < capacity[members]]
            if members.size == 0:
                continue
            if members.size > 64:
                members = rng.choice(members, 64, replace=False)
            deficit = np.maximum(need[phi_rows] - counts[phi_rows], 0)
            gain = np.minimum(mat[np.ix_(phi_rows, members)], deficit[:, None]).sum(axis=0)
            j = rng.choice(members[gain == gain.max()])
            chosen[j] += 1
            counts += mat[:, j]
        progress(int(chosen.sum()))
    chosen = _select_greedy(mat, need, capacity, rng, progress, chosen=chosen)
    return _prune(mat, need, chosen, rng)


_SELECTORS: dict[str, Callable] = {"published": _select_published, "greedy": _select_greedy,
                                   "optimal": _select_optimal}


# --------------------------------------------------------------------------------------------
# Documents
# --------------------------------------------------------------------------------------------
def _realise(pairs_a, pairs_b, chosen, patterns, can, queries, docs_by_level, design, rng,
             cap: int | None = None, state=None):
    """Turn selected pattern pairs into concrete examples with real documents.

    Queries are used evenly; with ``cap``, a query that holds ``cap`` examples takes no more,
    and a pair no other query can host is left out (returned in ``dropped``). ``state`` (query
    uses and examples seen) carries over between calls. Returns (records, duplicates, dropped).
    """
    pair_ids = np.repeat(np.arange(len(chosen)), chosen)
    rng.shuffle(pair_ids)
    uses, seen = state if state is not None else (np.zeros(len(queries), dtype=np.int64), set())
    records, dropped = [], []
    duplicates = False
    for pid in pair_ids:
        pa, pb = patterns[pairs_a[pid]], patterns[pairs_b[pid]]
        if rng.random() < 0.5:  # which pattern is A is arbitrary: spread it
            pa, pb = pb, pa
        ok = can[pairs_a[pid]] & can[pairs_b[pid]]
        if design.overlap == "disjoint":
            joint = _requirements(np.vstack([np.concatenate([pa, pb])]), design.levels)[0]
            ok &= np.array([all(len(docs_by_level[q].get(lv, ())) >= n for lv, n in zip(design.levels, joint))
                            for q in queries])
        if cap is not None:
            ok &= uses < cap
        candidates = np.flatnonzero(ok)
        if candidates.size == 0:
            dropped.append(pid)
            continue
        for _attempt in range(20):
            least = candidates[uses[candidates] == uses[candidates].min()]
            qi = rng.choice(least)
            a_docs, b_docs = _fill(pa, pb, docs_by_level[queries[qi]], design.overlap, rng)
            key = (queries[qi], tuple(a_docs), tuple(b_docs))
            if key not in seen:
                break
        duplicates |= key in seen
        seen.add(key)
        uses[qi] += 1
        records.append((queries[qi], a_docs, b_docs, pa, pb, pid))
    return records, duplicates, dropped


def _examples_table(records, k) -> pd.DataFrame:
    n = len(records)
    width = len(str(max(n, 1)))
    ex = pd.DataFrame({"example_id": [f"ex{i + 1:0{width}d}" for i in range(n)],
                       "query": [r[0] for r in records]})
    for side, idx in (("a", 1), ("b", 2)):
        docs = np.array([r[idx] for r in records], dtype=object).reshape(n, k)
        for i in range(k):
            ex[f"{side}{i + 1}"] = docs[:, i]
    for side, idx in (("a", 3), ("b", 4)):
        lv = np.array([r[idx] for r in records], dtype=np.int64).reshape(n, k)
        for i in range(k):
            ex[f"r{side}{i + 1}"] = lv[:, i]
    return ex


def _realise_capped(pa, pb, chosen, patterns, can, queries, docs_by_level, design, rng, mat, need,
                    capacity, select):
    """Realise under the query cap, honouring ``max_query_share`` on the batch actually placed.

    The cap starts as the share of the batch the selection asks for. Pairs that only saturated
    queries could host are replaced by a new selection for the cells they leave short; when the
    placed batch ends smaller than asked (pairs with no other host are left out), the cap is
    lowered to the share of what was placed and the batch realised again, until the busiest
    query holds at most the share or the cap is one example. Returns (records, duplicates,
    placed, info).
    """
    before = int(chosen.sum())
    target = design.max_query_share
    cap = max(1, int(np.ceil(target * before)))
    busiest_of = lambda recs: int(pd.Series([r[0] for r in recs]).value_counts().max()) if recs else 0
    first = None
    for attempt in range(8):
        records, duplicates, placed, used_cap = _realise_capped_once(
            pa, pb, chosen, patterns, can, queries, docs_by_level, design, rng, mat, need, capacity, select,
            cap, grow=attempt == 0)
        first = first or (records, duplicates, placed, used_cap)
        if busiest_of(records) <= target * len(records) + 1e-9:
            break
        lower = max(1, int(np.floor(target * len(records))))
        if lower >= used_cap:
            break
        cap = lower
    honoured = reachable = busiest_of(records) <= target * len(records) + 1e-9
    # a lower cap places fewer examples, which lowers the cap again: when honouring the share
    # would keep under half the batch, keep the first realisation and report the shortfall
    collapsed = len(records) < 0.5 * len(first[0])
    honoured_size = len(records)
    if not honoured or collapsed:
        records, duplicates, placed, used_cap = first
        honoured = busiest_of(records) <= target * len(records) + 1e-9
    short_rows = np.flatnonzero(np.maximum(need - mat.astype(np.int64) @ placed, 0) > 0)
    hosts = np.zeros(0, dtype=np.int64)
    if short_rows.size:
        # per short cell, the queries able to host any of its candidate examples
        pair_hosts = can[pa] & can[pb]                                             # (pairs, Q)
        hosts = np.array([int(pair_hosts[mat[c] > 0].any(axis=0).sum()) for c in short_rows])
    info = {"query_cap": used_cap, "query_cap_extra_examples": len(records) - before,
            "query_cap_short_cells": int(short_rows.size),
            "query_cap_short_cell_hosts": int(np.median(hosts)) if hosts.size else 0,
            "query_cap_short_cell_hosts_min": int(hosts.min()) if hosts.size else 0,
            "query_share_honoured": bool(honoured), "query_cap_asked_on": before,
            "query_share_honoured_examples": int(honoured_size) if reachable else 0}
    return records, duplicates, placed, info


def _realise_capped_once(pa, pb, chosen, patterns, can, queries, docs_by_level, design, rng, mat, need,
                         capacity, select, cap: int, grow: bool):
    """One realisation under ``cap`` (raised with the batch when ``grow``): see
    :func:`_realise_capped`. Returns (records, duplicates, placed, the cap in the end)."""
    state = (np.zeros(len(queries), dtype=np.int64), set())
    records, duplicates, dropped = _realise(pa, pb, chosen, patterns, can, queries, docs_by_level,
                                            design, rng, cap, state)
    capacity = capacity.copy()
    for _round in range(8):
        if not dropped:
            break
        # a pair that could not be placed now will not be placed later: the queries only fill up
        capacity[np.unique(dropped)] = 0
        placed = np.bincount([r[5] for r in records], minlength=len(chosen))
        short = np.maximum(need - mat.astype(np.int64) @ placed, 0)
        if not short.any():
            break
        extra = select(mat, short, capacity)
        if extra.sum() == 0:
            break
        if grow:
            cap = max(cap, int(np.ceil(design.max_query_share * (len(records) + extra.sum()))))
        more, dup, dropped = _realise(pa, pb, extra, patterns, can, queries, docs_by_level, design, rng, cap, state)
        records += more
        duplicates |= dup
    placed = np.bincount([r[5] for r in records], minlength=len(chosen))
    return records, duplicates, placed, cap


def _fill(pa, pb, by_level, overlap, rng):
    """Random documents of the pattern's levels, none twice in a list (nor across, if disjoint)."""
    def draw(pattern, exclude):
        """One document id for each position of ``pattern``, at its level, never twice.

        Parameters
        ----------
        pattern : numpy.ndarray
            The level at each rank.
        exclude : collection
            Document ids not to draw (the other list's, when the lists are disjoint).
        """
        out = np.empty(len(pattern), dtype=object)
        for lv in np.unique(pattern):
            pos = np.flatnonzero(pattern == lv)
            pool = by_level[int(lv)]
            if exclude:
                pool = np.array([d for d in pool if d not in exclude], dtype=object)
            out[pos] = rng.choice(pool, size=pos.size, replace=False)
        return list(out)
    a = draw(pa, None)
    b = draw(pb, set(a) if overlap == "disjoint" else None)
    return a, b


# --------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------
def generate(judgments: Judgments, design: Design | None = None, progress: bool = False,
             **kwargs) -> GenerationResult:
    """Build examples covering every feasible cell of every formulation (see module docstring).

    Parameters
    ----------
    judgments : Judgments
    design : Design, optional
        Or pass its fields as keyword arguments (``k=5, min_per_cell=200, ...``).
    progress : bool
        Show a progress bar.
    **kwargs
        Without ``design``: the fields of a :class:`Design` (``k``, ``levels``,
        ``formulations``, ``n_bins``, ``min_per_cell``, ``overlap``, ``method``, ``seed``, ...);
        ignored when ``design`` is given.

    Raises
    ------
    SatcalError
        Before any work, when no query has enough judged documents to build a list, or when a
        feasible cell cannot hold ``min_per_cell`` distinct examples.

    Returns
    -------
    GenerationResult

    References
    ----------
    Urbano, J. and Marrero, M. (2015). How do gain and discount functions affect the
    correlation between DCG and user satisfaction? ECIR 2015 (the cells: ten bins of phi
    and of |dphi| per formulation).
    """
    design = design or Design(**kwargs)
    rng = np.random.default_rng(design.seed)
    queries, avail = _availability(judgments, design.levels)
    if len(queries) == 0 or avail.sum(axis=1).max() < design.k:
        most = int(avail.sum(axis=1).max()) if len(queries) else 0
        raise SatcalError(f"no query has {design.k} judged documents at levels "
                          f"{list(design.levels)} (the most any query has is {most}); lower k or "
                          "add judgments")
    if design.overlap == "disjoint" and avail.sum(axis=1).max() < 2 * design.k:
        raise SatcalError(f"overlap = 'disjoint' needs a query with {2 * design.k} judged documents; "
                          "none has: use overlap = 'allow' or lower k")
    patterns, exhaustive = _candidate_patterns(design, avail, rng)
    need_pat = _requirements(patterns, design.levels)
    base, extra = design.formulations, design.placeable_extra
    forms = base + extra
    scores = score_lists(patterns, forms, top_level=design.top_level)        # (P, F)
    pbins = bin_index(scores, design.n_bins)
    pa, pb, can, exhaustive = _candidate_pairs(need_pat, avail, design.overlap, rng, exhaustive)
    dbins = bin_index(np.abs(scores[pa] - scores[pb]), design.n_bins)
    mat = _incidence(pbins[pa], pbins[pb], dbins, design.n_bins)
    n_f, nb = len(forms), design.n_bins
    feasible = mat.any(axis=1)
    is_extra = _cell_rows(np.arange(n_f) >= len(base), nb)
    covered = ~is_extra | design.cover_extra
    need = np.where(feasible & covered, design.min_per_cell, 0)

    # Distinct concrete examples each pair can give (capped): a cell whose candidates cannot
    # supply min_per_cell distinct examples is refused up front.
    log_arr = _log_arrangements(avail[None, :, :], need_pat[:, None, :])      # (P, Q)
    with np.errstate(over="ignore"):
        per_query = np.exp(np.minimum(log_arr[pa] + log_arr[pb], 50.0))
    capacity = np.minimum(per_query.sum(axis=1), 1e9).astype(np.int64)
    cell_capacity = mat.astype(float) @ np.minimum(capacity, design.min_per_cell * 4).astype(float)
    short = np.flatnonzero(feasible & covered & (cell_capacity < design.min_per_cell))
    if short.size:
        kind, f, b = _cell_name(short[0], n_f, nb)
        raise SatcalError(f"min_per_cell = {design.min_per_cell} is unreachable: the {kind} cell "
                          f"{b} of {forms[f].id} can hold at most {int(cell_capacity[short[0]])} "
                          f"distinct examples from these judgments ({short.size} such cells); lower "
                          "min_per_cell or add judgments")

    total_hint = design.min_per_cell * nb * 2
    bar = _progress_bar(progress, total_hint, f"selecting examples ({design.method})")
    selection: dict = {}
    chosen = _SELECTORS[design.method](mat, need, capacity, rng, lambda n: bar.update(n), selection)
    # the total was a guess (min_per_cell x bins x 2): the bar ends full at what was selected,
    # not at 65% of the guess as if the selection had stopped short
    bar.total = bar.n
    bar.refresh()
    bar.close()
    if extra:
        selection.update(_extra_cost(design, mat, need, feasible, is_extra, capacity, chosen))
    docs_by_level = judgments.docs_by_level()
    cap_info: dict = {}
    if design.max_query_share > 0:
        select = lambda m, n, c: _SELECTORS[design.method](m, n, c, rng, lambda _: None, {})
        records, duplicates, chosen, cap_info = _realise_capped(pa, pb, chosen, patterns, can, queries,
                                                                docs_by_level, design, rng, mat, need,
                                                                capacity, select)
    else:
        records, duplicates, _ = _realise(pa, pb, chosen, patterns, can, queries, docs_by_level, design, rng)
    examples = _examples_table(records, design.k)
    counts = mat.astype(np.int64) @ chosen
    coverage = _coverage_table(counts, feasible, forms, nb, covered)
    score_table = _score_table(examples, forms, design)
    covered_dphi = (feasible & covered)[: n_f * nb].reshape(n_f, nb)
    lower = design.min_per_cell * int(covered_dphi.sum(axis=1).max())
    info = {"candidate_patterns": int(len(patterns)), "candidate_pairs": int(len(pa)),
            "exhaustive": bool(exhaustive), "queries_used": int(examples["query"].nunique()),
            "duplicates": bool(duplicates),
            "max_query_share": round(float(examples["query"].value_counts(normalize=True).max()), 4)
            if len(examples) else 0.0, **cap_info}
    info.update(selection)
    info["floor_cells"] = int(covered_dphi.sum(axis=1).max())
    hosts = int((can[pa] & can[pb]).any(axis=0).sum()) if len(pa) else 0
    warnings = _query_warnings(examples, hosts, design, info)
    hint = _merge_hint(avail, design, feasible[n_f * nb:(n_f + len(base)) * nb].reshape(len(base), nb),
                       base, np.random.default_rng([design.seed, 3]))
    if hint:
        warnings.append(hint)
    return GenerationResult(examples, score_table, coverage, design, lower, design.method, info, warnings)


#: A batch is concentrated when at most this share of the queries able to host examples (and
#: at least 2 of them) hold half of its examples or more.
CONCENTRATED_QUERIES = 0.1


def _query_warnings(examples: pd.DataFrame, hosts: int, design: Design, info: dict) -> list[str]:
    """The query share asked and got, and a warning when a few queries hold most examples."""
    out = []
    if not len(examples):
        return out
    share = examples["query"].value_counts(normalize=True).to_numpy()
    cum = np.cumsum(share)
    few = int(np.searchsorted(cum, 0.5 - 1e-12) + 1)  # fewest queries holding half the batch
    if design.max_query_share > 0:
        target, got, n = design.max_query_share, info.get("max_query_share", float(share[0])), len(examples)
        short, cap = info.get("query_cap_short_cells", 0), info.get("query_cap", 0)
        floor = design.min_per_cell * info.get("floor_cells", 0)
        if not short:
            cost = ""
        elif cap * hosts < floor:
            cost = (f"; {short} cells hold fewer than min_per_cell = {design.min_per_cell}: at most {cap} example(s) a "
                    f"query, the {hosts} queries hold at most {cap * hosts}, below the cell floor {floor}")
        else:
            cost = (f"; {short} cells hold fewer than min_per_cell = {design.min_per_cell}: their examples can "
                    f"be built from a median of {info.get('query_cap_short_cell_hosts', 0)} queries (as few as "
                    f"{info.get('query_cap_short_cell_hosts_min', 0)}), at most {cap} examples each")
        if info.get("query_share_honoured"):
            out.append(f"max_query_share = {target:g} honoured: the busiest query holds {100 * got:.1f}% of the "
                       f"{n} examples{cost}")
        else:
            out.append(f"max_query_share = {target:g} not reached: the busiest query holds {100 * got:.1f}% of the "
                       f"{n} examples, as the cap of {cap} a query was set on the {info['query_cap_asked_on']} "
                       f"examples the selection asked for and only {n} could be placed under it ("
                       + (f"lowering the cap to reach {100 * target:g}% would keep "
                          f"{info['query_share_honoured_examples']} examples" if info["query_share_honoured_examples"]
                          else f"even one example a query is more than {100 * target:g}% of what a lower cap places")
                       + f"){cost}")
    elif hosts >= 5 and few <= max(2, int(CONCENTRATED_QUERIES * hosts)):
        out.append(f"{few} of the {hosts} queries able to host examples hold {100 * cum[few - 1]:.0f}% of them "
                   "(their judgments have the documents many cells need): the calibration rests on those "
                   "topics; [generator] max_query_share (e.g. 0.05) spreads the examples, at the cost of "
                   "cells left short")
    return out


def _merge_hint(avail: np.ndarray, design: Design, phi_feasible: np.ndarray, forms: list, rng) -> str:
    """A hint to merge the top level into the one below when it is too rare for any list of k
    documents at the top (no query has k of them) and merging would make a larger share of the
    phi cells reachable. ``phi_feasible`` is (formulations, bins) for the current levels."""
    levels = list(design.levels)
    if len(levels) < 3 or avail[:, -1].max() >= design.k or phi_feasible.all():
        return ""
    from types import SimpleNamespace
    merged_avail = np.hstack([avail[:, :-2], avail[:, -2:].sum(axis=1, keepdims=True)])
    merged = SimpleNamespace(levels=tuple(levels[:-1]), k=design.k)
    pats, _ = _candidate_patterns(merged, merged_avail, rng)
    if not len(pats):
        return ""
    bins = bin_index(score_lists(pats, forms, top_level=levels[-2]), design.n_bins)   # (P, F)
    after = np.zeros_like(phi_feasible)
    for f in range(len(forms)):
        after[f, np.unique(bins[:, f])] = True
    upper = int(np.ceil(0.6 * design.n_bins))  # bins of phi >= 0.6
    now_share, then_share = phi_feasible.mean(), after.mean()
    if then_share < now_share + 0.05:
        return ""
    top, below = levels[-1], levels[-2]
    most = int(avail[:, -1].max())
    return (f"level {top} is rare (at most {most} document(s) a query, k = {design.k}): {100 * now_share:.0f}% of "
            f"the phi cells are reachable, and phi of 0.6 or more for {int(phi_feasible[:, upper:].any(axis=1).sum())} "
            f"of {len(forms)} formulations; merging levels {below} and {top} (relabel {top} as {below} in the "
            f"judgments, study.levels without {top}) would make {100 * then_share:.0f}% reachable, and phi of 0.6 "
            f"or more for {int(after[:, upper:].any(axis=1).sum())} of {len(forms)}")


def _cell_name(cell: int, n_f: int, nb: int):
    kind = "|dphi|" if cell < n_f * nb else "phi"
    cell = cell % (n_f * nb)
    return kind, cell // nb, cell % nb


def _cell_rows(per_formulation: np.ndarray, nb: int) -> np.ndarray:
    """A per-formulation flag spread over its cells, in the incidence matrix's row order
    (every formulation's |dphi| cells, then every formulation's phi cells)."""
    per_cell = np.repeat(np.asarray(per_formulation, bool), nb)
    return np.concatenate([per_cell, per_cell])


def _extra_cost(design, mat, need, feasible, is_extra, capacity, chosen) -> dict:
    """What covering the extra measures costs: the selection made the other way (with a
    stream of its own, so the design's examples do not depend on it), in examples."""
    other_need = np.where(feasible & (~is_extra | (not design.cover_extra)), design.min_per_cell, 0)
    rng = np.random.default_rng([design.seed, 1])
    other = _SELECTORS[design.method](mat, other_need, capacity, rng, lambda _n: None, {})
    with_extra, without = (chosen, other) if design.cover_extra else (other, chosen)
    counts_without = mat.astype(np.int64) @ without
    short = feasible & is_extra & (counts_without < design.min_per_cell)
    return {"extra_covered": bool(design.cover_extra),
            "examples_without_extra": int(without.sum()), "examples_with_extra": int(with_extra.sum()),
            "extra_cost_examples": int(with_extra.sum() - without.sum()),
            "extra_cells_short_without": int(short.sum())}


def _coverage_table(counts, feasible, forms, nb, covered) -> pd.DataFrame:
    n_f = len(forms)
    rows = []
    for kind, off in (("phi", n_f * nb), ("dphi", 0)):
        for j, f in enumerate(forms):
            for b in range(nb):
                c = off + j * nb + b
                rows.append((f.id, kind, b, int(counts[c]), bool(feasible[c]), bool(covered[c])))
    return pd.DataFrame(rows, columns=["formulation", "kind", "bin", "count", "feasible", "covered"])


def _score_table(examples: pd.DataFrame, forms, design) -> pd.DataFrame:
    k = design.k
    la = examples[[f"ra{i}" for i in range(1, k + 1)]].to_numpy()
    lb = examples[[f"rb{i}" for i in range(1, k + 1)]].to_numpy()
    sa = score_lists(la, forms, top_level=design.top_level)
    sb = score_lists(lb, forms, top_level=design.top_level)
    n, f = sa.shape
    return pd.DataFrame({"example_id": np.repeat(examples["example_id"].to_numpy(), f),
                         "formulation": np.tile([x.id for x in forms], n),
                         "phi_a": sa.ravel(), "phi_b": sb.ravel()})


def _progress_bar(enabled: bool, total: int, desc: str):
    from tqdm.auto import tqdm
    return tqdm(total=total, desc=desc, unit="example", disable=not enabled)


def coverage_heatmap(coverage: pd.DataFrame, min_per_cell: int, path=None, ax=None):
    """Heat map of counts, formulations x bins, for phi and |dphi| (infeasible cells hatched).

    Parameters
    ----------
    coverage : pandas.DataFrame
        :attr:`GenerationResult.coverage`.
    min_per_cell : int
        The floor each cell is coloured against.
    path : path-like, optional
        Save the figure as ``path.png`` and ``path.pdf``.
    ax : sequence of two matplotlib Axes, optional
        Draw the phi and |dphi| panels there; a new figure when omitted.

    Returns
    -------
    matplotlib.figure.Figure, or the list of the two paths written when ``path`` is given
    """
    from .fileio import panel_axes

    forms = list(dict.fromkeys(coverage["formulation"]))
    nb = int(coverage["bin"].max()) + 1
    fig, axes, new = panel_axes(ax, 2, 1, 2, figsize=(12, max(4, 0.26 * len(forms) + 1.5)), sharey=True,
                                layout="constrained")  # room for the colour bar and long formulation ids
    for ax, kind, title in ((axes[0], "phi", "phi cells (lists)"), (axes[1], "dphi", "|dphi| cells (examples)")):
        c = coverage[coverage["kind"] == kind]
        grid = c.pivot(index="formulation", columns="bin", values="count").reindex(forms).to_numpy(float)
        feas = c.pivot(index="formulation", columns="bin", values="feasible").reindex(forms).to_numpy(bool)
        shown = np.ma.masked_where(~feas, np.minimum(grid / min_per_cell, 2.0))
        im = ax.imshow(shown, aspect="auto", cmap="viridis", vmin=0, vmax=2)
        ys, xs = np.nonzero(~feas)
        ax.scatter(xs, ys, marker="x", color="0.5", s=18, label="infeasible")
        ax.set_xticks(range(nb), [f"{(b + 0.5) / nb:.2f}" for b in range(nb)], rotation=90)
        ax.set_title(title)
        ax.set_xlabel("bin midpoint")
    axes[0].set_yticks(range(len(forms)), forms, fontsize=7)
    cb = fig.colorbar(im, ax=axes, shrink=0.8)
    cb.set_label(f"count / min_per_cell ({min_per_cell}); capped at 2")
    if new:
        fig.suptitle("Coverage of every formulation's cells (x: infeasible)")
    if path is not None:
        from .fileio import save_figure
        return save_figure(fig, path)
    return fig
