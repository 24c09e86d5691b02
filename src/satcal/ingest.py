"""Answers in: the canonical answers table and external studies.

An *external study* is a CSV with ``query``, ``a1..a<k>``, ``b1..b<k>`` (document ids in rank
order), ``answer`` (one of the four codes) and optionally ``worker_id``, analysed against a
judgments file (SPEC section 6).
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .answers import ANSWER_ALIASES, ANSWER_CODES, StudyData, normalise_answers
from .errors import InputFileError, SatcalError
from .judgments import Judgments

__all__ = ["ANSWER_CODES", "ANSWER_ALIASES", "StudyData", "read_external_study", "normalise_answers"]

def _list_columns(columns, side: str) -> list[str]:
    found = sorted((int(m.group(1)), c) for c in columns if (m := re.fullmatch(rf"{side}(\d+)", c)))
    return [c for _, c in found]


def read_external_study(path: "str | os.PathLike", judgments: Judgments, k: int | None = None,
                        n_levels: int | None = None, unjudged: str = "error") -> StudyData:
    """Read an external study's answers and attach the levels of every listed document.

    Parameters
    ----------
    path : path-like
        CSV with ``query``, ``a1..a<k>``, ``b1..b<k>``, ``answer`` and optional ``worker_id``.
    judgments : Judgments
    k : int, optional
        Documents per list; by default the number of ``a<i>`` columns.
    n_levels : int, optional
        L of the scale (top level L-1); by default the judgments' own.
    unjudged : {"error", "zero"}
        A listed document with no judgment is an error (the default, so nothing is silently
        assumed) or counts as level 0 (the usual IR convention).
    """
    if unjudged not in ("error", "zero"):
        raise SatcalError(f"unjudged must be 'error' or 'zero', got {unjudged!r}")
    from .fileio import read_csv_strings
    path = Path(path)
    table = read_csv_strings(path, "columns query, a1..a<k>, b1..b<k>, answer")
    table.columns = [c.strip() for c in table.columns]
    a_cols = _list_columns(table.columns, "a")
    k = k or len(a_cols)
    expected_a, expected_b = [f"a{i}" for i in range(1, k + 1)], [f"b{i}" for i in range(1, k + 1)]
    missing = [c for c in ["query", *expected_a, *expected_b, "answer"] if c not in table.columns]
    if missing or k == 0:
        raise InputFileError(path, f"missing column(s) {', '.join(missing) or 'a1'}: expected query, "
                                   f"a1..a{k or '<k>'}, b1..b{k or '<k>'}, answer", 1)
    if table.empty:
        raise InputFileError(path, "has a header but no answers")
    answers = normalise_answers(table["answer"], path)
    levels = {}
    for side, cols in (("a", expected_a), ("b", expected_b)):
        docs = table[cols].apply(lambda s: s.str.strip()).to_numpy()
        _check_lists(docs, cols, path)
        lv = judgments.lookup(table["query"].str.strip(), docs)
        if np.isnan(lv).any():
            r, c = map(int, np.argwhere(np.isnan(lv))[0])
            if unjudged == "error" or docs[r, c] == "":
                raise InputFileError(path, f"document {docs[r, c]!r} of query {table['query'].iloc[r]!r} "
                                           f"is not in the judgments (use --unjudged zero to count "
                                           f"unjudged documents as level 0)", r + 2, cols[c])
            lv = np.nan_to_num(lv, nan=0.0)
        if n_levels is not None and (lv > n_levels - 1).any():
            r, c = map(int, np.argwhere(lv > n_levels - 1)[0])
            raise InputFileError(path, f"document {docs[r, c]!r} of query {table['query'].iloc[r]!r} "
                                       f"is judged {int(lv[r, c])}, above the top level {n_levels - 1} of "
                                       f"--levels {n_levels} (levels 0..{n_levels - 1})", r + 2, cols[c])
        levels[side] = lv.astype(int)
    out = pd.DataFrame({"example_id": [str(i + 1) for i in range(len(table))],
                        "query": table["query"].str.strip()})
    for side, cols in (("a", expected_a), ("b", expected_b)):
        for i, c in enumerate(cols):
            out[c] = table[c].str.strip()
        for i in range(k):
            out[f"r{side}{i + 1}"] = levels[side][:, i]
    out["answer"] = answers.to_numpy()
    if "worker_id" in table.columns:
        out["worker_id"] = table["worker_id"].str.strip()
    n_levels = n_levels or judgments.n_levels
    return StudyData(out, k, n_levels, judgments, name=path.stem)


def _check_lists(docs: np.ndarray, cols: list[str], path) -> None:
    """A list never repeats a document and has no empty position."""
    empty = docs == ""
    if empty.any():
        r, c = map(int, np.argwhere(empty)[0])
        raise InputFileError(path, "empty document id", r + 2, cols[c])
    srt = np.sort(docs, axis=1)
    dup = (srt[:, 1:] == srt[:, :-1]).any(axis=1)
    if dup.any():
        r = int(np.flatnonzero(dup)[0])
        raise InputFileError(path, f"list {cols[0][0].upper()} repeats a document", r + 2)


# --------------------------------------------------------------------------------------------
# Workspace ingest: result files in, one answers table out (SPEC section 6)
# --------------------------------------------------------------------------------------------
ANSWER_TABLE_COLUMNS = ["example_id", "worker_id", "answer", "is_trap", "correct", "submitted_at",
                        "source_file", "row_id", "item_id", "swapped", "line", "example_hash", "seconds"]
REJECT_TABLE_COLUMNS = ["source_file", "line", "row_id", "item_id", "worker_id", "answer", "reason"]


@dataclass
class IngestReport:
    """Row accounting of an ingest: every row read is an answer or a reject."""

    files: pd.DataFrame      # per raw file: rows, answers, rejects, new (this call) or not
    reasons: pd.Series       # rejects by reason
    workers: pd.DataFrame
    answers: pd.DataFrame
    rejects: pd.DataFrame
    #: every valid answer before workers are excluded (what worker models are estimated on)
    before_exclusion: pd.DataFrame = None
    #: per trap: answers and accuracy among otherwise trusted workers (traps_report.csv)
    traps: pd.DataFrame = None

    def lines(self) -> list[str]:
        out = []
        for r in self.files.itertuples():
            tag = "new" if r.new else "already ingested"
            out.append(f"{r.source_file} ({r.platform}, {tag}): {r.rows} rows = {r.answers} answers "
                       f"+ {r.rejects} rejects")
        out.append(f"total: {int(self.files['rows'].sum())} rows = {len(self.answers)} answers "
                   f"({int(self.answers['is_trap'].sum())} on traps) + {len(self.rejects)} rejects")
        for reason, n in self.reasons.items():
            out.append(f"  {n} rows rejected: {reason}")
        excl = self.workers[self.workers["excluded"]]
        attention = excl["reason"].astype(str).str.startswith("failed") if len(excl) else pd.Series(dtype=bool)
        why = (f"{len(excl) - int(attention.sum())} trust below threshold, {int(attention.sum())} failed attention "
               "checks" if attention.any() else "trust below threshold")
        out.append(f"workers: {len(self.workers)}, excluded {len(excl)} ({why}), kept {len(self.workers) - len(excl)}")
        out.extend(self.warnings())
        for flag, what in (("too_fast", "answered faster than their pages can be skimmed"),
                           ("same_side", "nearly always chose the same side as shown")):
            if flag in self.workers.columns and self.workers[flag].astype(bool).any():
                out.append(f"  screening: {int(self.workers[flag].astype(bool).sum())} workers {what} "
                           "(see workers.csv)")
        out += _trap_lines(self.traps)
        from .quality import agreement
        examples = self.answers[~self.answers["is_trap"].astype(bool)]
        agreed = agreement(examples) if len(examples) else None
        if agreed is not None:
            out.append(f"agreement: Krippendorff's alpha {agreed.alpha:.3f} (pairwise {agreed.observed:.3f}) "
                       f"over {agreed.examples} examples answered {agreed.per_example:.2f} times on average")
        return out

    def warnings(self) -> list[str]:
        """What the reader of an ingest must not miss: most workers unscored (too few traps),
        and simulated participants among the workers."""
        out = []
        w = self.workers
        if len(w) and "trust_source" in w.columns:
            unscored = int((w["trust_source"] == "none").sum())
            if unscored > len(w) / 2:
                out.append(f"  warning: {unscored} of {len(w)} workers answered too few traps to be scored "
                           "(quality.min_traps): they are kept whatever they answered. Give every worker more "
                           "traps ([serve] traps_on_top, more [traps] count or pages per worker)")
        if "simulated" in w.columns and w["simulated"].astype(bool).any():
            n = int(w["simulated"].astype(bool).sum())
            share = float(self.answers["worker_id"].isin(set(w.loc[w["simulated"].astype(bool), "worker_id"])).mean()) \
                if len(self.answers) else 0.0
            out.append(f"  warning: {n} of {len(w)} workers are simulated (satcal simulate --serve), "
                       f"{100 * share:.0f}% of the answers: the analysis will be reported as simulated")
        return out


def _trap_lines(traps) -> list[str]:
    """The traps most otherwise trusted workers miss, and those dropped (traps_report.csv)."""
    if traps is None or not len(traps):
        return []
    out = []
    for r in traps[traps["suspect"] & ~traps["dropped"]].itertuples():
        out.append(f"  trap {r.trap_id} (expected {r.expected}): {100 * r.trusted_accuracy:.0f}% of "
                   f"{r.trusted_answers} otherwise trusted workers got it right (most answered "
                   f"{r.most_common_answer}); check it, and drop it with --drop-trap {r.trap_id} or "
                   "[quality] drop_traps in study.toml")
    dropped = traps.loc[traps["dropped"], "trap_id"].tolist()
    if dropped:
        out.append(f"  traps dropped from trust: {', '.join(dropped)}")
    return out


def _normalise_shown(values: pd.Series) -> pd.Series:
    key = values.fillna("").astype(str).str.strip().str.lower().str.replace("-", "_")
    return key.map(lambda v: ANSWER_ALIASES.get(v, ANSWER_ALIASES.get(v.replace("_", " "), "")))


def resolve_rows(rows: pd.DataFrame, key: pd.DataFrame, example_ids: set[str], threshold: float,
                 min_traps: int, screen: dict | None = None, reading: pd.Series | None = None,
                 attention_limit: int | None = None):
    """Raw rows -> (answers, rejects, workers), in canonical orientation.

    ``reading`` (seconds to skim each item, by item id: :func:`satcal.quality.reading_seconds`)
    calibrates the "too fast" flag to each page's reading load; ``attention_limit`` excludes
    workers who failed that many attention checks (rows with ``attention_passed``, the hosted
    study's), None keeps them. Rows with ``simulated`` ("yes": the hosted study's dry run) mark
    their workers ``simulated`` in the workers table.

    Reasons, in order of precedence: platform status (tainted, rejected, cancelled), missing
    worker id, unknown item id, malformed answer, duplicate / conflicting duplicate of an
    earlier row (same worker and example), excluded worker. The fourth table returned holds
    every valid answer before workers are excluded, excluded workers' included.
    """
    from .platforms import swap_answer
    from .platforms.ecir2015 import PREFIX
    from .quality import attention_failures, exclude_failed_attention, worker_table

    r = rows.reset_index(drop=True).copy()
    k = key.set_index("item_id")
    is_ecir = r["item_id"].astype(str).str.startswith(PREFIX)
    known = r["item_id"].isin(k.index)
    r["example_id"] = np.where(known, r["item_id"].map(k["source_id"]),
                               np.where(is_ecir, r["item_id"].astype(str).str[len(PREFIX):], ""))
    r["is_trap"] = np.where(known, r["item_id"].map(k["is_trap"]).astype(str) == "True", False)
    r["swapped"] = np.where(known, r["item_id"].map(k["swapped"]).astype(str) == "True", False)
    hashes = k["example_hash"] if "example_hash" in k.columns else pd.Series(dtype=object)
    r["example_hash"] = r["item_id"].map(hashes).fillna("").astype(str)
    expected = np.where(known, r["item_id"].map(k["expected"]).fillna("").astype(str), "")
    shown = _normalise_shown(r["answer"])
    r["answer_canonical"] = [swap_answer(a) if s else a for a, s in zip(shown, r["swapped"])]

    reason = pd.Series("", index=r.index, dtype=object)
    def mark(mask, text):
        nonlocal reason
        fresh = (reason == "") & np.asarray(mask)
        reason = reason.where(~fresh, text if isinstance(text, str) else pd.Series(text, index=r.index))
    status = r["status"].fillna("").astype(str)
    mark(status != "", "platform status: " + status)
    mark(r["worker_id"].fillna("").astype(str).str.strip() == "", "missing worker id")
    unknown_ecir = is_ecir & ~r["example_id"].isin(example_ids)
    mark(~known & ~is_ecir, "unknown item id (not in key.csv: another study or export?)")
    mark(unknown_ecir, "unknown example id")
    mark(shown == "", "malformed answer " + r["answer"].astype(str).map(repr))
    # Duplicates: one answer per worker and example. The earliest submission wins, then the
    # file (archived under its content hash) and the line: the same winner whatever order the
    # files were ingested in. Rows without a submission time come after those with one.
    ok = reason == ""
    ident = r["worker_id"].astype(str) + "\x1f" + r["example_id"].astype(str)
    when = r["submitted_at"].fillna("").astype(str).str.strip().to_numpy()
    order = np.lexsort((pd.to_numeric(r["line"], errors="coerce").fillna(0).to_numpy(),
                        r["source_file"].astype(str).to_numpy(), when, when == ""))
    later = ident.where(ok).iloc[order].duplicated(keep="first").to_numpy()
    first = pd.Series(True, index=r.index)
    first.iloc[order] = ~later
    first |= ~ok
    firsts = r[ok & first].assign(ident=ident[ok & first]).set_index("ident")
    dup = ok & ~first
    if dup.any():
        prev = firsts.loc[ident[dup]]
        same = prev["answer_canonical"].to_numpy() == r.loc[dup, "answer_canonical"].to_numpy()
        where = prev["source_file"].astype(str).to_numpy() + ":" + prev["line"].astype(str).to_numpy()
        text = np.where(same, "duplicate of " + where,
                        "conflicting duplicate: " + where + " said " + prev["answer_canonical"].to_numpy())
        full = pd.Series("", index=r.index, dtype=object)
        full[dup] = text
        mark(dup, full)
    ok = reason == ""
    r["correct"] = [a in e.split(";") if t else "" for a, e, t in zip(r["answer_canonical"], expected, r["is_trap"])]
    r["expected"] = expected  # a trap's accepted codes: its chance rate weighs it in the trust rule
    r["answer_shown"] = shown
    accepted = r[ok]
    if reading is not None:
        accepted = accepted.assign(reading_seconds=accepted["item_id"].map(reading))
    workers = worker_table(accepted.assign(correct=accepted["correct"].replace("", False)),
                           threshold, min_traps, **(screen or {})) if len(accepted) else pd.DataFrame(
        columns=["worker_id", "answers", "examples_answered", "traps_seen", "traps_correct",
                 "platform_trust", "trust", "trust_source", "excluded", "reason", "seconds_per_answer",
                 "too_fast", "same_side_share", "same_side"])
    if "attention_passed" in r.columns:
        workers = exclude_failed_attention(workers, attention_failures(r), attention_limit)
    if "simulated" in r.columns:
        marked = set(r.loc[r["simulated"].fillna("").astype(str) == "yes", "worker_id"])
        workers["simulated"] = workers["worker_id"].isin(marked)
    before_exclusion = accepted.assign(answer=accepted["answer_canonical"])[ANSWER_TABLE_COLUMNS]
    before_exclusion = before_exclusion.reset_index(drop=True)
    excluded = workers.set_index("worker_id")["reason"][workers.set_index("worker_id")["excluded"]]
    mark(ok & r["worker_id"].isin(excluded.index),
         "excluded worker: " + r["worker_id"].map(excluded).astype(object).fillna("").astype(str))
    ok = reason == ""
    answers = r[ok].assign(answer=r.loc[ok, "answer_canonical"])[ANSWER_TABLE_COLUMNS]
    rejects = r[~ok].assign(reason=reason[~ok])[REJECT_TABLE_COLUMNS]
    return answers.reset_index(drop=True), rejects.reset_index(drop=True), workers, before_exclusion


INDEX_COLUMNS = ["sha256", "file", "platform", "original"]
PENDING = ".ingest-pending.json"
SETTINGS = "ingest-settings.json"


def _read_index(raw_dir: Path) -> pd.DataFrame:
    path = raw_dir / "index.csv"
    return (pd.read_csv(path, dtype=str, keep_default_na=False) if path.exists()
            else pd.DataFrame(columns=INDEX_COLUMNS))


def ingest(ws, files, platform: str | None = None, threshold: float | None = None) -> IngestReport:
    """Archive result files under raw/ and rebuild answers.csv, rejects.csv and workers.csv.

    Every file is parsed before anything is written, so a broken file leaves the workspace
    untouched. A file already ingested (same content hash) changes nothing; the tables are
    rebuilt from all archived files, so the result does not depend on the order of calls.
    The workspace lock makes concurrent ingests take turns. The archived files, the index and
    the tables are written as one set (:class:`~satcal.fileio.OutputSet`), so an ingest killed
    at any moment, or failing on a full disk, leaves the workspace as it was before or as it
    is after, never a mix.
    """
    with ws.locked():
        repair_interrupted_ingest(ws)
        return _ingest_locked(ws, files, platform, threshold)


def _ingest_locked(ws, files, platform, threshold) -> IngestReport:
    from .fileio import atomic_write_bytes, atomic_write_text, read_file_bytes, sha256_bytes
    from .platforms import detect_platform, get_platform

    raw_dir = ws.path / "raw"
    index = _read_index(raw_dir)
    new_files: list[tuple[str, str, str, bytes, pd.DataFrame]] = []
    for f in files:
        path = Path(f)
        if not path.is_file():
            raise SatcalError(f"{path}: no such file")
        data = read_file_bytes(path)  # an unreadable file is a one-line error
        digest = sha256_bytes(data)
        if digest in set(index["sha256"]) or digest in {n[0] for n in new_files}:
            continue
        plat = platform or detect_platform(path, data[:4096].decode("utf-8", "replace"))
        parsed = get_platform(plat).read_results(path)  # raises on a broken file: nothing written yet
        name = f"{digest[:12]}-{path.name}"
        new_files.append((digest, name, plat, data, parsed))
    added = pd.DataFrame([{"sha256": d, "file": n, "platform": p, "original": n.split("-", 1)[1]}
                          for d, n, p, _, _ in new_files], columns=INDEX_COLUMNS)
    index, superseded = _supersede_snapshots(ws, index, added, {n[0]: n[4] for n in new_files})
    parsed_new = {n[0]: n[4] for n in new_files}
    threshold = ws["quality.trust_threshold"] if threshold is None else float(threshold)
    with ws.staged("ingest") as outputs:
        for digest, name, plat, data, _ in new_files:
            atomic_write_bytes(outputs.file(f"raw/{name}"), data)
        if new_files:
            index = pd.concat([index, added], ignore_index=True)
        report = _rebuild(ws, index, parsed_new, threshold, outputs)
        # the tables' threshold, so that a repair rebuilds exactly these tables
        atomic_write_text(outputs.file(f"raw/{SETTINGS}"), json.dumps({"trust_threshold": threshold}) + "\n")
        if new_files:
            if len(superseded):
                previous = raw_dir / SUPERSEDED
                old = pd.read_csv(previous, dtype=str, keep_default_na=False) if previous.exists() else None
                table = pd.concat([old, superseded], ignore_index=True) if old is not None else superseded
                atomic_write_text(outputs.file(f"raw/{SUPERSEDED}"), table.to_csv(index=False, lineterminator="\n"))
            atomic_write_text(outputs.file("raw/index.csv"), index.to_csv(index=False, lineterminator="\n"))
            ws.record("ingest", {"files": [n[1] for n in new_files], "answers": len(report.answers),
                                 "rejects": len(report.rejects)},
                      inputs=[outputs.file(f"raw/{n[1]}") for n in new_files], outputs=outputs)
    return report


SUPERSEDED = "superseded.csv"


def _supersede_snapshots(ws, index: pd.DataFrame, added: pd.DataFrame, parsed: dict):
    """A new snapshot of a hosted study's database replaces the earlier snapshots of the same
    database (same original name), which stay in raw/ and are listed in raw/superseded.csv.

    The database only ever gains responses, so an earlier snapshot's rows must all be in the
    new one (same row id, same answer); if any is missing, the database was replaced or
    damaged, and the new snapshot is refused before anything is written.
    """
    from .platforms import get_platform
    new = added[added["platform"] == "serve"]
    old = index["platform"].eq("serve") & index["original"].isin(new["original"])
    if not old.any():
        return index, pd.DataFrame(columns=INDEX_COLUMNS)
    for row in index[old].itertuples():
        fresh = parsed[new.loc[new["original"] == row.original, "sha256"].iloc[0]]
        earlier = get_platform("serve").read_results(ws.path / "raw" / row.file)
        have = set(zip(fresh["row_id"], fresh["answer"]))
        lost = [r for r in zip(earlier["row_id"], earlier["answer"]) if r not in have]
        if lost:
            raise SatcalError(f"{ws.path}/raw/{row.file}: response {lost[0][0]} (and {len(lost) - 1} more) "
                              "of this earlier snapshot is not in the study database now; was the "
                              "database replaced or restored from an older copy? Nothing was ingested")
    return index[~old].reset_index(drop=True), index[old].reset_index(drop=True)


def _rebuild(ws, index: pd.DataFrame, parsed: dict, threshold, outputs) -> IngestReport:
    """answers.csv, rejects.csv and workers.csv from every file of ``index``, written into the
    output set ``outputs``."""
    from .fileio import atomic_write_text
    from .platforms import RAW_ANSWER_COLUMNS, get_platform

    raw_dir = ws.path / "raw"
    key = ws.keys()  # every batch's key: answers to any batch resolve
    if key is None:
        key = pd.DataFrame(columns=["item_id", "source_id", "is_trap", "swapped", "expected"])
    frames = []
    for row in index.itertuples():
        table = parsed.get(row.sha256)
        if table is None:
            table = get_platform(row.platform).read_results(raw_dir / row.file)
        frames.append(table.assign(source_file=row.file))
    # no file (the only one removed, say): empty tables with their columns, not an error
    rows = (pd.concat(frames, ignore_index=True) if frames
            else pd.DataFrame(columns=[*RAW_ANSWER_COLUMNS, "source_file"], dtype=object))
    examples = ws.table("examples.csv", required=False)
    example_ids = set(examples["example_id"]) if examples is not None else set()
    threshold = ws["quality.trust_threshold"] if threshold is None else threshold
    screen = {"screen_seconds": float(ws["quality.screen_seconds_per_answer"]),
              "screen_same_side": float(ws["quality.screen_same_side"]),
              "drop_traps": tuple(ws["quality.drop_traps"])}
    from .quality import reading_seconds
    items = ws.table("items.csv", required=False)
    reading = reading_seconds(items, ws.k) if items is not None and len(items) else None
    attention_limit = None if ws["serve.keep_failed_attention"] else int(ws["serve.attention_fail_limit"])
    answers, rejects, workers, before_exclusion = resolve_rows(rows, key, example_ids, threshold,
                                                               ws["quality.min_traps"], screen, reading,
                                                               attention_limit)
    traps = _trap_report(key, before_exclusion, threshold, ws["quality.min_traps"], screen["drop_traps"])
    for name, table in (("answers.csv", answers), ("rejects.csv", rejects), ("workers.csv", workers),
                        ("traps_report.csv", traps)):
        atomic_write_text(outputs.file(name), spreadsheet_safe(table).to_csv(index=False, lineterminator="\n"))
    per_file = []
    fresh = set(parsed)
    for row in index.itertuples():
        per_file.append({"source_file": row.file, "platform": row.platform,
                         "rows": int((rows["source_file"] == row.file).sum()),
                         "answers": int((answers["source_file"] == row.file).sum()),
                         "rejects": int((rejects["source_file"] == row.file).sum()),
                         "new": row.sha256 in fresh})
    reasons = rejects["reason"].str.replace(r"(duplicate).*|(excluded worker).*|(malformed answer).*",
                                            lambda m: m.group(1) or m.group(2) or m.group(3),
                                            regex=True).value_counts()
    return IngestReport(pd.DataFrame(per_file, columns=["source_file", "platform", "rows", "answers",
                                                        "rejects", "new"]),
                        reasons, workers, answers, rejects, before_exclusion, traps)


def _trap_report(key: pd.DataFrame, answers: pd.DataFrame, threshold: float, min_traps: int,
                 drop_traps) -> pd.DataFrame:
    """quality.trap_table over every batch's traps (their expected answers from the keys)."""
    from .quality import trap_table
    is_trap = key["is_trap"].astype(str) == "True"
    expected = key[is_trap].drop_duplicates("source_id").set_index("source_id")["expected"].astype(str)
    return trap_table(answers, expected, threshold, min_traps, drop_traps)


def snapshot_served(ws, url: str | None, directory) -> Path:
    """Write the hosted study's responses (database at ``url``, default ``DIR/serve.db``) to
    ``directory/serve-<database id>.csv``, ready to ingest with platform ``serve``."""
    import hashlib
    from .fileio import atomic_write_text
    from .serve import db
    url = url or db.default_url(ws.path)
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///"):]).exists():
        raise SatcalError(f"{url[len('sqlite:///'):]}: no study database here; has satcal serve {ws.path} run?")
    engine = db.connect(url)
    try:
        from sqlalchemy import inspect, select
        if not inspect(engine).has_table("satcal_meta"):
            raise SatcalError(f"{engine.url.render_as_string(hide_password=True)}: not a satcal serve database")
        with engine.connect() as conn:
            t = db.tables()["meta"]
            secret = conn.execute(select(t.c.value).where(t.c.name == "secret")).scalar_one()
        table = db.snapshot(engine)
    finally:
        engine.dispose()
    name = f"serve-{hashlib.sha256(secret.encode()).hexdigest()[:12]}.csv"
    return atomic_write_text(Path(directory) / name, table.to_csv(index=False, lineterminator="\n"))


REMOVED = "removed"
#: Marker of a removal killed half-way, written by satcal before 0.x's output sets; still read.
REBUILD = ".rebuild-pending"


def remove(ws, name: str, threshold: float | None = None) -> tuple[str, IngestReport]:
    """Take one archived result file back out: it leaves the index (the file itself moves to
    ``raw/removed/``, never deleted) and answers, rejects and workers are rebuilt from the
    other files, all as one output set. ``name`` is the archived name, the file's original
    name or its hash prefix."""
    with ws.locked():
        repair_interrupted_ingest(ws)
        raw_dir = ws.path / "raw"
        index = _read_index(raw_dir)
        hit = index[(index["file"] == name) | (index["original"] == Path(name).name)
                    | (index["sha256"].str.startswith(name) & (len(name) >= 8))]
        if len(hit) != 1:
            listing = ", ".join(index["file"]) or "none"
            what = "matches several archived files" if len(hit) > 1 else "is not an archived result file"
            raise SatcalError(f"{ws.path}/raw: {name!r} {what}; archived files: {listing}")
        row = hit.iloc[0]
        from .fileio import atomic_write_bytes, atomic_write_text
        threshold = ws["quality.trust_threshold"] if threshold is None else float(threshold)
        with ws.staged("ingest") as outputs:
            source = raw_dir / row["file"]
            if source.exists():
                atomic_write_bytes(outputs.file(f"raw/{REMOVED}/{row['file']}"), source.read_bytes())
                outputs.delete(f"raw/{row['file']}")
            index = index[index["file"] != row["file"]].reset_index(drop=True)
            atomic_write_text(outputs.file("raw/index.csv"),
                              index[INDEX_COLUMNS].to_csv(index=False, lineterminator="\n"))
            report = _rebuild(ws, index, {}, threshold, outputs)
            atomic_write_text(outputs.file(f"raw/{SETTINGS}"), json.dumps({"trust_threshold": threshold}) + "\n")
            ws.record("ingest --remove", {"file": row["file"], "answers": len(report.answers),
                                          "rejects": len(report.rejects)}, outputs=outputs)
        return row["file"], report


def repair_interrupted_ingest(ws) -> bool:
    """Finish what an ingest or a removal of an older satcal left when it was killed (its
    marker file is still there): an ingest's files leave raw/ and the index, a removal's
    tables are rebuilt from the index, as one output set. Ingests of this version are output
    sets themselves, which taking the workspace lock finishes or discards. Returns whether
    anything was repaired. Call with the lock held."""
    raw_dir = ws.path / "raw"
    marker, rebuild = raw_dir / PENDING, raw_dir / REBUILD
    if not marker.exists() and not rebuild.exists():
        return False
    from .fileio import atomic_write_text
    settings = raw_dir / SETTINGS
    threshold = json.loads(settings.read_text())["trust_threshold"] if settings.exists() else None
    index = _read_index(raw_dir)
    with ws.staged("ingest") as outputs:
        if marker.exists():
            text = marker.read_text(encoding="utf-8").strip()
            try:
                pending = pd.DataFrame(json.loads(text or "[]"), columns=INDEX_COLUMNS)
            except ValueError:  # a marker cut short: its files are those not in the index
                pending = pd.DataFrame(columns=INDEX_COLUMNS)
            index = index[~index["sha256"].isin(pending["sha256"])].reset_index(drop=True)
            for name in pending["file"]:
                outputs.delete(f"raw/{name}")
            outputs.delete(f"raw/{PENDING}")
            atomic_write_text(outputs.file("raw/index.csv"),
                              index[INDEX_COLUMNS].to_csv(index=False, lineterminator="\n"))
        outputs.delete(f"raw/{REBUILD}")
        _rebuild(ws, index, {}, threshold, outputs)
    return True


# the OWASP rule, shared by every table satcal writes (kept importable from here)
from .fileio import FORMULA_PREFIXES, spreadsheet_safe  # noqa: E402


def _check_examples_unchanged(ws, merged: pd.DataFrame, k: int) -> None:
    """Refuse answers whose example has changed since they were collected (hash in the key)."""
    if "example_hash" not in merged.columns:
        return  # answers ingested before the hashes existed
    from .platforms import example_digest
    recorded = merged["example_hash"].fillna("").astype(str)
    current = pd.Series(example_digest(merged, k), index=merged.index)
    changed = (recorded != "") & (recorded != current)
    if changed.any():
        first = merged.loc[changed, "example_id"].iloc[0]
        raise SatcalError(f"{ws.path}/answers.csv: {int(changed.sum())} answers were collected for "
                          f"examples that have changed since (example {first!r} of examples.csv no "
                          "longer shows the lists that were answered); restore the examples.csv of "
                          "the batch, or analyse the new examples in a new study")


def study_from_workspace(ws) -> StudyData:
    """The ingested, non-trap answers of kept workers, with both lists' levels."""
    answers = ws.table("answers.csv")
    examples = ws.table("examples.csv")
    real = answers[answers["is_trap"] != "True"]
    if real.empty:
        raise SatcalError(f"{ws.path}/answers.csv has no answers to examples; ingest result files "
                          "first (satcal ingest DIR FILE...)")
    keep = ["example_id", "worker_id", "answer"] + (["example_hash"] if "example_hash" in real.columns else [])
    merged = real[keep].merge(examples, on="example_id", how="left",
                                                               validate="many_to_one")
    if merged["query"].isna().any():
        missing = merged.loc[merged["query"].isna(), "example_id"].iloc[0]
        raise SatcalError(f"{ws.path}/answers.csv: example {missing!r} is not in examples.csv")
    k = ws.k
    _check_examples_unchanged(ws, merged, k)
    for side in "ab":
        for i in range(1, k + 1):
            merged[f"r{side}{i}"] = merged[f"r{side}{i}"].astype(int)
    levels = ws["study.levels"]
    return StudyData(merged, k, max(levels) + 1, ws.judgments(), name=ws["study.name"])
