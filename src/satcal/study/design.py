"""The design stages run on a study: generate (examples, traps, coverage), export (batches and
their keys) and preview."""
from __future__ import annotations

import inspect
import json
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import SatcalError
from ..fileio import atomic_write_text, spreadsheet_safe, spreadsheet_value
from ..settings import stream_seed
from .layout import DESIGN_FILE
from .served import _ingest_served, _refuse_while_served, served_answers


class DesignStages:
    """generate, export and preview of a :class:`~satcal.study.Study` (a part of it)."""

    def generate(self, force: bool = False, progress: bool = False):
        """Examples, traps, scores, coverage table and heat map.

        Parameters
        ----------
        force : bool, optional
            Overwrite earlier outputs (default False).
        progress : bool, optional
            Show progress (default False).
        """
        with self.locked():
            return self._generate(force, progress)

    def _generate(self, force: bool, progress: bool):
        from ..generate import Design, coverage_heatmap, generate
        from ..traps import build_traps, read_traps
        self.refuse_if_collected("generate")
        self.guard(["examples.csv", "traps.csv", "scores.csv", "coverage.csv"], force)
        judgments = self.judgments()
        family, every = self.formulations(extra=False), self.formulations()
        design = Design(k=self.k, levels=self["study.levels"], formulations=family,
                        extra=every[len(family):], cover_extra=self["generator.cover_extra"],
                        n_bins=self["generator.n_bins"], min_per_cell=self["generator.min_per_cell"],
                        overlap=self["generator.overlap"], method=self["generator.method"], seed=self.seed,
                        max_query_share=float(self["generator.max_query_share"]))
        if self["traps.file"]:
            if (self.path / self["traps.file"]).resolve() == self.file("traps.csv").resolve():
                raise SatcalError(f"{self.path}/study.toml: traps.file = 'traps.csv' is the name of the "
                                  "generated traps table; rename your traps file (e.g. my-traps.csv)")
            traps = read_traps(self.path / self["traps.file"], judgments, self.k, levels=self["study.levels"])
        else:
            traps = self._build_traps(judgments)
        result = generate(judgments, design, progress=progress)
        if self["design.adaptive"]:  # adaptive: the examples are the candidate pool waves draw from
            from ..adaptive_study import adopt_pool
            adopt_pool(self, result, judgments, design)
        # query and document ids are the user's: no cell may run as a formula in a spreadsheet
        # (read back through table(), which gives the values as they were)
        csv = lambda df: spreadsheet_safe(df).to_csv(index=False, lineterminator="\n", float_format="%.10g")
        with self.staged("generate") as outputs:
            atomic_write_text(outputs.file("examples.csv"), csv(result.examples))
            atomic_write_text(outputs.file("traps.csv"), csv(traps))
            atomic_write_text(outputs.file("scores.csv"), csv(result.scores))
            atomic_write_text(outputs.file("coverage.csv"), csv(result.coverage))
            if self["design.adaptive"]:
                atomic_write_text(outputs.file("pool.csv"), csv(result.examples))
            outputs.file("coverage.png"), outputs.file("coverage.pdf")
            coverage_heatmap(result.coverage, design.min_per_cell, outputs.file("coverage"))
            atomic_write_text(outputs.file(DESIGN_FILE), json.dumps(
                {"k": self.k, "levels": list(self["study.levels"])}, indent=1) + "\n")
            self.record("generate", {"seed": self.seed, **result.as_dict(),
                                     "traps": traps.attrs.get("built", f"{len(traps)} traps from {self['traps.file']}")},
                        outputs=outputs)
        result.traps_built = traps.attrs.get("built", f"{len(traps)} traps read from {self['traps.file']}")
        # the hosted study's own count, where set (export and serve say what "auto" gives)
        asked = self["serve.traps_per_participant"] if self["presentation.platform"] == "serve" else "auto"
        rule = trap_rule(traps, self["quality.trust_threshold"], self["quality.trap_power"],
                         0 if asked == "auto" else asked)
        result.traps_built += "\n" + rule[0]
        _warn_traps(rule, self.path)
        return result

    def _build_traps(self, judgments) -> pd.DataFrame:
        """traps.csv built from the judgments: ``traps.count`` of them, or with "auto" as many as
        :func:`satcal.quality.traps_needed` asks for the chance rates of the traps built (which
        depend on the count: built again until the count covers what its traps need)."""
        from ..quality import _chance, traps_needed
        from ..traps import build_traps
        build = lambda n: build_traps(judgments, self.k, n, seed=stream_seed(self.seed, "traps"),  # noqa: E731
                                      levels=self["study.levels"])
        count = self["traps.count"]
        if count != "auto":
            return build(count)
        n, traps = 20, build(20)
        for _ in range(4):  # the chance rates settle within a few rounds (the kinds' shares are fixed)
            needed = traps_needed(_chance(traps), self["quality.trust_threshold"], self["quality.trap_power"])
            if needed is None or needed <= n:
                break
            n, traps = needed, build(needed)
        return traps

    def export(self, platform: str | None = None, force: bool = False, new_batch: bool = False,
               next_batch: bool = False):
        """Platform task files under batches/<platform>/ and the hidden key.csv.

        Each batch (a presentation of the examples: opaque ids, orientation, pages) keeps its
        key under ``batches/keys/batch-<n>.csv``, and ingest resolves item ids across all of
        them. Once answers are collected, the current batch can be exported again (to another
        platform, say), and ``new_batch`` starts the next one; nothing replaces a key that
        collected answers refer to.

        Parameters
        ----------
        platform : str or None, optional
            Platform name; None (default) takes ``presentation.platform`` of study.toml.
        force : bool, optional
            Replace a key without collected answers (default False).
        new_batch : bool, optional
            Start the next batch of the whole study (default False).
        next_batch : bool, optional
            Export the adaptive study's next wave (default False).

        Returns
        -------
        list of pathlib.Path
            The platform files written.

        Raises
        ------
        SatcalError
            Both ``new_batch`` and ``next_batch``, or a key that answers refer to would change.
        """
        if next_batch and new_batch:
            raise SatcalError("give --new-batch (the whole study again) or --next-batch (an adaptive wave), not both")
        if next_batch:  # adaptive: the next wave, chosen from the answers so far
            from ..adaptive_study import export_next
            return export_next(self, platform)
        with self.locked():
            return self._export(platform, force, new_batch)

    def batch_number(self) -> int:
        """The current batch (0 before the first export)."""
        key = self.table("key.csv", required=False)
        if key is None:
            return 0
        return int(key["batch"].iloc[0]) if "batch" in key.columns and len(key) else 1

    def _export(self, platform: str | None, force: bool, new_batch: bool = False, wave=None):
        from ..platforms import build_items, get_platform
        plat = get_platform(platform or self["presentation.platform"])
        out = self.path / "batches" / plat.name
        current = self.batch_number()
        batch = current + 1 if new_batch or current == 0 else current
        collected = self.collected()
        held = None if collected else served_answers(self.path)
        if not collected:
            self.guard([f"batches/{plat.name}"] if out.exists() and any(out.iterdir()) and not new_batch else [],
                       force)
        examples = self.table("examples.csv") if wave is None else wave.examples
        traps = self.table("traps.csv", required=False) if wave is None else wave.traps
        traps = traps if traps is not None else pd.DataFrame()
        # batch 1 keeps the seed of earlier versions, so existing keys are reproduced
        documents, topics = self.documents(), self.topics()
        per_page = self["presentation.items_per_page"] if wave is None else wave.items_per_page
        build = lambda n: build_items(examples, traps, self.k, seed=stream_seed(self.seed, "export", batch - 1),
                                      items_per_page=n, documents=documents, swap=self["presentation.swap"],
                                      topics=topics)
        visible, key = build(10 if per_page == "auto" else per_page)
        if per_page == "auto":  # by reading load: the items' text decides how many fit a page
            from ..platforms.serve import auto_items_per_page
            per_page = auto_items_per_page(visible, self.k)
            if plat.name == "serve" and self["serve.traps_on_top"]:
                per_page = self._serve_items_per_page(visible, traps, len(examples))
            visible, key = build(per_page)
        _warn_bare_ids(visible, self.path)
        # the hosted study's count: its own line and warnings (pipeline.export_text, which also
        # prints the rule's line as information); a wave's traps are a draw of traps.csv
        # (next_wave warns where the wave is short): the rule's advice on [traps] count is about
        # traps.csv
        _warn_traps(trap_rule(traps if wave is None else self.table("traps.csv", required=False),
                              self["quality.trust_threshold"], self["quality.trap_power"], 0), self.path)
        key["batch"] = batch
        existing_key = self.table("key.csv", required=False)
        same = existing_key is not None and existing_key.drop(columns=["batch"], errors="ignore").equals(
            key.drop(columns=["batch"]).astype(str))
        if existing_key is not None and not same and not new_batch:
            _refuse_while_served(self.path, "export --force")
            if held is not None:
                url, n = held
                raise SatcalError(f"{url} holds {n} answers to this study's key.csv, not ingested yet, and "
                                  "key.csv would change, even with --force. Ingest them first "
                                  f"({_ingest_served(self.path, url)}), or start a new batch and keep "
                                  f"this key: satcal export {self.path} --new-batch")
            if collected:
                raise SatcalError(f"{self.path} holds collected answers and key.csv would change (the "
                                  "examples, documents or presentation settings changed), even with "
                                  f"--force. To present the examples again, start a new batch: satcal "
                                  f"export {self.path} --new-batch")
            if not force:
                raise SatcalError(f"{self.path}/key.csv holds another presentation; pass --force to "
                                  "replace it, or --new-batch to keep it and start another")
        with self.staged("export") as outputs:
            # spreadsheet-safe like every table of the workspace; the platform's own upload
            # files (written by plat.write_batch) keep the values the platform shows
            text = spreadsheet_safe(key).to_csv(index=False, lineterminator="\n")
            atomic_write_text(outputs.file(f"batches/keys/batch-{batch}.csv"), text)
            atomic_write_text(outputs.file("key.csv"), text)
            atomic_write_text(outputs.file("items.csv"),
                              spreadsheet_safe(visible).to_csv(index=False, lineterminator="\n"))
            staged_out = outputs.dir(f"batches/{plat.name}")
            settings = {"settings": self.config["platforms"][plat.name]} if plat.settings else {}
            if "traps" in inspect.signature(plat.write_batch).parameters:  # test questions set from the rule
                settings["traps"] = self.trap_count(key)
            written = plat.write_batch(visible, key, staged_out, self.k, self["presentation.instructions"],
                                       per_page,
                                       answers_per_example=self["design.answers_per_example"], **settings)
            self.record("export", {"platform": plat.name, "items": len(visible), "batch": batch,
                                   **({"wave_examples": len(examples)} if wave is not None else {})},
                        outputs=outputs)
        return [out / Path(p).relative_to(staged_out) for p in written]

    def _serve_items_per_page(self, visible: pd.DataFrame, traps: pd.DataFrame, examples: int) -> int:
        """The hosted study's own items a page under ``"auto"`` with traps shown on top: the
        page's items and its traps on top within the reading-load budget, the room of an
        attention check kept (:func:`satcal.serve.study.items_per_page_with_traps`)."""
        from ..platforms.serve import ITEM_FRAME_PX, PAGE_BUDGET_PX, auto_items_per_page
        from ..quality import _chance
        from ..serve.study import items_per_page_with_traps
        check = ITEM_FRAME_PX if self["serve.attention_checks"] else 0  # an attention check: a frame, no lists
        fit = auto_items_per_page(visible, self.k, budget_px=PAGE_BUDGET_PX - check, reserve=0)
        chance = _chance(traps) if len(traps) else []
        return items_per_page_with_traps(fit, self["serve.pages_per_participant"], chance, examples,
                                         self["serve.traps_per_participant"], self["quality.trust_threshold"],
                                         self["quality.trap_power"], self["quality.min_traps"])

    def trap_count(self, key: pd.DataFrame | None = None):
        """The trap rule's count for the current batch (:class:`satcal.platforms.base.TrapCount`):
        traps a worker must meet, from the chance rates of the batch's traps in key.csv (the
        same the hosted study reads), and the batch's traps and items; for an adaptive study's
        wave short of the count while traps.csv holds it (only a wave draws fewer), the
        ``[design] wave_pages`` that holds it.

        Parameters
        ----------
        key : pandas.DataFrame or None, optional
            key.csv; None reads it.

        Returns
        -------
        TrapCount
        """
        from ..platforms.base import TrapCount
        from ..quality import _chance, traps_needed
        key = self.table("key.csv") if key is None else key
        traps = key[key["is_trap"].astype(str) == "True"]
        needed = traps_needed(_chance(traps), self["quality.trust_threshold"], self["quality.trap_power"]) \
            if len(traps) else None
        if needed is not None:   # fewer than min_traps would leave every worker unscored at ingest
            needed = max(needed, int(self["quality.min_traps"]))
        fix = ""
        pool = self.table("traps.csv", required=False) if self["design.adaptive"] else None
        if needed is not None and len(traps) < needed <= (0 if pool is None else len(pool)):
            # a wave keeps at least half its items for examples (adaptive_study._wave_traps)
            per_page = int(key.groupby("page").size().max())
            fix = (f"set [design] wave_pages = {-(-2 * needed // per_page)} (a wave keeps at least half of its "
                   "items for examples) for the next waves")
        return TrapCount(needed, len(traps), len(key), fix)

    def keys(self) -> pd.DataFrame | None:
        """Every batch's key in one table (item ids are unique across batches), for ingest."""
        frames = [spreadsheet_value(pd.read_csv(p, dtype=str, keep_default_na=False))
                  for p in sorted((self.path / "batches" / "keys").glob("batch-*.csv"))]
        current = self.table("key.csv", required=False)
        if current is not None:
            frames.append(current)
        if not frames:
            return None
        table = pd.concat(frames, ignore_index=True).drop_duplicates()
        clash = table["item_id"].duplicated(keep=False)
        if clash.any():
            raise SatcalError(f"{self.path}/batches/keys: item id {table.loc[clash, 'item_id'].iloc[0]!r} means "
                              "different things in two batch keys; restore the keys as exported")
        return table.reset_index(drop=True)

    def preview(self, n: int = 6, path: Path | None = None, force: bool = False) -> Path:
        """A static page with a sample of units exactly as a worker sees them (preview.html is
        kept unless ``force``).

        Parameters
        ----------
        n : int, optional
            Number of units shown (default 6).
        path : pathlib.Path or None, optional
            Where to write; None (default) writes ``preview.html`` in the study.
        force : bool, optional
            Overwrite preview.html (default False).

        Returns
        -------
        pathlib.Path
            The page written.
        """
        with self.locked():
            if path is None:
                self.guard(["preview.html"], force)
            return self._preview(n, path)

    def _preview(self, n: int, path: Path | None) -> Path:
        from ..platforms import render_form_html
        visible = self.table("items.csv")
        key = self.table("key.csv")
        rng = np.random.default_rng(stream_seed(self.seed, "preview"))
        # Show at least one trap, as workers meet them among the examples.
        traps = key.index[key["is_trap"] == "True"].to_numpy()
        picks = list(rng.choice(len(visible), size=min(n, len(visible)), replace=False))
        if traps.size and not set(picks) & set(traps):
            picks[-1] = int(rng.choice(traps))
        sample = visible.iloc[sorted(picks)]
        target = path or self.file("preview.html")
        atomic_write_text(target, render_form_html(sample, self.k, self["presentation.instructions"],
                                            f"Preview: {self['study.name']}"))
        return target


def trap_rule(traps: pd.DataFrame, threshold: float, power: float, per_participant: int) -> tuple[str, list[str]]:
    """The trap-count rule of ``[quality] trap_power`` on a batch's traps: the line generate
    and export print, and one warning line each where the batch holds fewer traps than a
    worker must meet, or the hosted study's ``serve.traps_per_participant`` gives fewer.

    Parameters
    ----------
    traps : pandas.DataFrame
        traps.csv (``expected``: accepted codes separated by ``;``).
    threshold : float
        ``quality.trust_threshold``.
    power : float
        ``quality.trap_power``.
    per_participant : int
        ``serve.traps_per_participant`` where set to a number; 0 for none.

    Returns
    -------
    tuple of (str, list of str)
    """
    from ..quality import _chance, trap_exclusion, trap_rule_line, traps_needed
    if traps is None or not len(traps):
        return "traps per worker: the batch has no traps: nobody is scored by traps", []
    chance = _chance(traps)
    needed = traps_needed(chance, threshold, power)
    line = trap_rule_line(chance, threshold, power)
    if needed is None:
        return line, [line]
    short = []
    if len(traps) < needed:
        short.append(f"the batch has {len(traps)} traps, but a worker must meet {needed} for the traps alone to "
                     f"exclude a random answerer with probability {power:g} (with {len(traps)}: "
                     f"{trap_exclusion(chance, threshold, len(traps)):.2f}); set [traps] count = {needed} (or \"auto\")")
    if 0 < per_participant < needed:
        short.append(f"[serve] traps_per_participant = {per_participant} gives participants fewer traps than the "
                     f"{needed} that exclude a random answerer with probability {power:g} (with {per_participant}: "
                     f"{trap_exclusion(chance, threshold, per_participant):.2f}); set it to {needed} or \"auto\"")
    return line, short


def _warn_traps(rule: tuple[str, list[str]], path: Path) -> None:
    """Warn, one line each, where the traps cannot exclude a random answerer at the asked
    power (the rule's own line is information: generate and export print it as such)."""
    import warnings
    from ..errors import SatcalWarning
    for line in rule[1]:
        warnings.warn(f"{path}: {line}", SatcalWarning, stacklevel=3)


def _warn_bare_ids(visible: pd.DataFrame, path: Path) -> None:
    """Workers shown only ids cannot judge anything: say so (a warning: an id may be all a
    study of, say, known-item music tracks needs)."""
    import warnings
    from ..errors import SatcalWarning
    if "query_title" not in visible.columns:
        warnings.warn(f"{path}: workers will see query ids (e.g. {visible['query'].iloc[0]!r}) with no "
                      "text: give a topics file (satcal init --topics, or topics = ... in study.toml)",
                      SatcalWarning, stacklevel=3)
    if "A1_title" not in visible.columns and "A1_audio_url" not in visible.columns:
        warnings.warn(f"{path}: workers will see bare document ids (e.g. {visible['A1'].iloc[0]!r}): give a "
                      "documents table with title, snippet, url or audio_url", SatcalWarning, stacklevel=3)
