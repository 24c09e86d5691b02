"""Ingest run on a study: the raw archive of result files (``raw/``, its index, removed files
and superseded snapshots), the answers tables rebuilt from it, and removal."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from ..errors import SatcalError
from ..fileio import atomic_write_text, spreadsheet_safe


class Archive:
    """ingest and remove of a :class:`~satcal.study.Study` (a part of it)."""

    def ingest(self, files, platform: str | None = None, threshold: float | None = None):
        """Archive result files under raw/ and rebuild answers.csv, rejects.csv, workers.csv and
        traps_report.csv (:class:`~satcal.ingest.IngestReport`).

        Every file is parsed before anything is written, so a broken file leaves the study
        untouched. A file already ingested (same content hash) changes nothing; the tables are
        rebuilt from all archived files, so the result does not depend on the order of calls.
        The lock makes concurrent ingests take turns. The archived files, the index and the
        tables are written as one set (:class:`~satcal.fileio.OutputSet`), so an ingest killed
        at any moment, or failing on a full disk, leaves the study as it was before or as it is
        after, never a mix.

        Parameters
        ----------
        files : iterable of path
            The result files.
        platform : str or None, optional
            Platform name; None (default) takes ``presentation.platform`` of study.toml.
        threshold : float or None, optional
            Trap trust below which a worker is excluded; None (default) takes
            ``quality.trust_threshold`` of study.toml.
        """
        from ..ingest import SETTINGS, SUPERSEDED, index_rows, read_result_files, supersede_snapshots
        from ..fileio import atomic_write_bytes
        with self.locked():
            self.repair_interrupted_ingest()
            raw_dir = self.path / "raw"
            index = self._raw_index()
            keys = self.keys()
            new_files = read_result_files(files, platform, set(index["sha256"]),
                                          items=set() if keys is None else set(keys["item_id"].astype(str)))
            added = index_rows(new_files)
            parsed = {r.sha256: r.rows for r in new_files}
            index, superseded = supersede_snapshots(raw_dir, index, added, parsed)
            threshold = self["quality.trust_threshold"] if threshold is None else float(threshold)
            with self.staged("ingest") as outputs:
                for r in new_files:
                    atomic_write_bytes(outputs.file(f"raw/{r.name}"), r.data)
                # archived: the files' bytes are not held through the rebuild (a lower peak)
                new_files = [(r.name, r.sha256) for r in new_files]
                r = None  # the loop's last file, bytes and all, would live on through the rebuild
                if new_files:
                    index = pd.concat([index, added], ignore_index=True)
                report = self._rebuild(index, parsed, threshold, outputs)
                # the tables' threshold, so that a repair rebuilds exactly these tables
                atomic_write_text(outputs.file(f"raw/{SETTINGS}"), json.dumps({"trust_threshold": threshold}) + "\n")
                if new_files:
                    if len(superseded):
                        previous = raw_dir / SUPERSEDED
                        old = pd.read_csv(previous, dtype=str, keep_default_na=False) if previous.exists() else None
                        table = pd.concat([old, superseded], ignore_index=True) if old is not None else superseded
                        atomic_write_text(outputs.file(f"raw/{SUPERSEDED}"),
                                          table.to_csv(index=False, lineterminator="\n"))
                    atomic_write_text(outputs.file("raw/index.csv"), index.to_csv(index=False, lineterminator="\n"))
                    self.record("ingest", {"files": [name for name, _ in new_files],
                                           "answers": len(report._columns("answers", [])),
                                           "rejects": len(report._columns("rejects", []))},
                                inputs=[outputs.file(f"raw/{name}") for name, _ in new_files], outputs=outputs,
                                hashes={outputs.file(f"raw/{name}"): digest for name, digest in new_files})
        return report

    def _raw_index(self) -> pd.DataFrame:
        from ..ingest import INDEX_COLUMNS
        path = self.path / "raw" / "index.csv"
        return (pd.read_csv(path, dtype=str, keep_default_na=False) if path.exists()
                else pd.DataFrame(columns=INDEX_COLUMNS))

    def _rebuild(self, index: pd.DataFrame, parsed: dict, threshold, outputs):
        """The ingest tables from every file of ``index``, written into ``outputs``."""
        from ..fileio import write_csv_safe
        from ..ingest import INGEST_TABLES, rebuild
        s = self.settings
        report = rebuild(index, parsed, self.path / "raw", self.keys(), self.table("examples.csv", required=False),
                         self.table("items.csv", required=False), self.k, s.quality, s.serve, threshold)
        written = report._written or {}
        for name, attr in INGEST_TABLES.items():
            # pandas' bytes, by Arrow when it can; the large tables from their codes
            write_csv_safe(outputs.file(name), written[attr] if attr in written else getattr(report, attr))
        return report

    def remove(self, name: str, threshold: float | None = None):
        """Take one archived result file back out: it leaves the index (the file itself moves to
        ``raw/removed/``, never deleted) and the tables are rebuilt from the other files, all as
        one output set. ``name`` is the archived name, the original name or a hash prefix.
        Returns (archived name, :class:`~satcal.ingest.IngestReport`).

        Parameters
        ----------
        name : str
            The file's archived name, original name or hash prefix.
        threshold : float or None, optional
            Trap trust below which a worker is excluded; None (default) takes
            ``quality.trust_threshold`` of study.toml.
        """
        from ..fileio import atomic_write_bytes
        from ..ingest import INDEX_COLUMNS, REMOVED, SETTINGS, find_archived
        with self.locked():
            self.repair_interrupted_ingest()
            raw_dir = self.path / "raw"
            index = self._raw_index()
            row = find_archived(index, name, raw_dir)
            threshold = self["quality.trust_threshold"] if threshold is None else float(threshold)
            with self.staged("ingest") as outputs:
                source = raw_dir / row["file"]
                if source.exists():
                    atomic_write_bytes(outputs.file(f"raw/{REMOVED}/{row['file']}"), source.read_bytes())
                    outputs.delete(f"raw/{row['file']}")
                index = index[index["file"] != row["file"]].reset_index(drop=True)
                atomic_write_text(outputs.file("raw/index.csv"),
                                  index[INDEX_COLUMNS].to_csv(index=False, lineterminator="\n"))
                report = self._rebuild(index, {}, threshold, outputs)
                atomic_write_text(outputs.file(f"raw/{SETTINGS}"), json.dumps({"trust_threshold": threshold}) + "\n")
                self.record("ingest --remove", {"file": row["file"], "answers": len(report._columns("answers", [])),
                                                "rejects": len(report._columns("rejects", []))}, outputs=outputs)
            return row["file"], report

    def repair_interrupted_ingest(self) -> bool:
        """Finish what an ingest or a removal of an older satcal left when it was killed (its
        marker file is still there): an ingest's files leave raw/ and the index, a removal's
        tables are rebuilt from the index, as one output set. Ingests of this version are output
        sets themselves, which taking the lock finishes or discards. Returns whether anything
        was repaired."""
        from ..ingest import INDEX_COLUMNS, PENDING, REBUILD, SETTINGS, read_pending
        raw_dir = self.path / "raw"
        marker, rebuild = raw_dir / PENDING, raw_dir / REBUILD
        if not marker.exists() and not rebuild.exists():
            return False
        with self.locked():
            settings = raw_dir / SETTINGS
            threshold = json.loads(settings.read_text())["trust_threshold"] if settings.exists() else None
            index = self._raw_index()
            with self.staged("ingest") as outputs:
                if marker.exists():
                    pending = read_pending(marker)
                    index = index[~index["sha256"].isin(pending["sha256"])].reset_index(drop=True)
                    for name in pending["file"]:
                        outputs.delete(f"raw/{name}")
                    outputs.delete(f"raw/{PENDING}")
                    atomic_write_text(outputs.file("raw/index.csv"),
                                      index[INDEX_COLUMNS].to_csv(index=False, lineterminator="\n"))
                outputs.delete(f"raw/{REBUILD}")
                self._rebuild(index, {}, threshold, outputs)
        return True

    def snapshot_served(self, url: str | None, directory) -> Path:
        """The hosted study's responses (database ``url``, default ``DIR/serve.db``) as a file in
        ``directory``, ready to ingest with platform ``serve``.

        Parameters
        ----------
        url : str or None, optional
            Database URL of the hosted study; None (default) means ``DIR/serve.db``.
        directory : path
            Where to write the file.

        Returns
        -------
        pathlib.Path
        """
        from ..ingest import snapshot_served
        from ..serve import db
        return snapshot_served(url or db.default_url(self.path), directory, self.path)

    def dawid_skene(self, report):
        """Dawid-Skene worker accuracies from every worker's answers of an ingest (those trap
        trust excluded too), into workers_ds.csv and workers.csv's ``ds_accuracy``.

        Parameters
        ----------
        report : satcal.ingest.IngestReport
            The ingest's report (its ``before_exclusion`` answers are used).

        Raises
        ------
        SatcalError
            No example has two answers or more.
        """
        from ..quality import dawid_skene
        everyone = report.before_exclusion
        repeated = everyone[~everyone["is_trap"].astype(bool)].groupby("example_id").size()
        if not (repeated >= 2).any():
            raise SatcalError("Dawid-Skene estimates workers from examples that several workers answered; "
                              "in these answers every example has one, so it cannot estimate anything. "
                              "Set [design] answers_per_example to 2 or more (trap-based trust is in "
                              "workers.csv)")
        _, accuracy = dawid_skene(everyone)
        with self.locked(), self.staged("dawid-skene") as outputs:
            atomic_write_text(outputs.file("workers_ds.csv"),
                              spreadsheet_safe(accuracy).to_csv(index=False, lineterminator="\n"))
            # beside trap trust in workers.csv, so one table says all about a worker
            workers = report.workers.drop(columns=["ds_accuracy"], errors="ignore").merge(
                accuracy, on="worker_id", how="left")
            atomic_write_text(outputs.file("workers.csv"),
                              spreadsheet_safe(workers).to_csv(index=False, lineterminator="\n"))
        return accuracy

    def drop_traps(self, ids) -> None:
        """Leave the traps ``ids`` out of trust for this study object's commands (not written
        to study.toml), after checking that each names a trap of traps.csv.

        Parameters
        ----------
        ids : iterable of str
            Trap ids of traps.csv.

        Raises
        ------
        SatcalError
            An id is not in traps.csv.
        """
        traps = self.table("traps.csv", required=False)
        known = set(traps["trap_id"]) if traps is not None else set()
        unknown = [t for t in ids if t not in known]
        if unknown:
            raise SatcalError(f"--drop-trap {unknown[0]}: no such trap in {self.path}/traps.csv"
                              + (f" (traps are {min(known)} to {max(known)})" if known else ""))
        self.config["quality"]["drop_traps"] = sorted(set(self.config["quality"]["drop_traps"]) | set(ids))

    def ingest_served(self, url: str | None = None, threshold: float | None = None):
        """Ingest a snapshot of the hosted study's database (``url``, default ``DIR/serve.db``):
        it replaces the earlier snapshot of the same database.

        Parameters
        ----------
        url : str or None, optional
            Database URL of the hosted study; None (default) means ``DIR/serve.db``.
        threshold : float or None, optional
            Trap trust below which a worker is excluded; None (default) takes
            ``quality.trust_threshold`` of study.toml.
        """
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            return self.ingest([self.snapshot_served(url, tmp)], platform="serve", threshold=threshold)

    def remove_alone(self, name: str, threshold: float | None = None, files=(), platform: str | None = None):
        """``satcal ingest --remove``: :meth:`remove`, refused beside result files or a platform
        to ingest (one command does one of the two).

        Parameters
        ----------
        name : str
            The archived file to remove (see :meth:`remove`).
        threshold : float or None, optional
            Trap trust below which a worker is excluded; None (default) takes
            ``quality.trust_threshold`` of study.toml.
        files : sequence, optional
            Result files given with it (must be empty).
        platform : str or None, optional
            Platform given with it (must be None).

        Raises
        ------
        SatcalError
            ``files`` or ``platform`` is given.
        """
        if files or platform:
            raise SatcalError("--remove takes one archived file back out: give no files or --platform with it")
        return self.remove(name, threshold)

    def ingest_any(self, files=(), platform: str | None = None, threshold: float | None = None,
                   url: str | None = None, rebuild: bool = False, dawid_skene: bool = False):
        """``satcal ingest``: the result ``files``, or with platform ``serve`` and no files a
        snapshot of the hosted study's database ``url`` (:meth:`ingest_served`); with no files
        and ``rebuild`` (traps dropped), the tables rebuilt from the files ingested before.
        ``dawid_skene`` checks, before anything is written, that crowd-kit is installed.

        Parameters
        ----------
        files : sequence of path, optional
            The result files (default none).
        platform : str or None, optional
            Platform of the files; ``"serve"`` reads the hosted study's database.
        threshold : float or None, optional
            Trap trust below which a worker is excluded; None (default) takes
            ``quality.trust_threshold`` of study.toml.
        url : str or None, optional
            Database of the hosted study (only with platform ``serve``).
        rebuild : bool, optional
            With no files, rebuild the tables from the files ingested before (default False).
        dawid_skene : bool, optional
            Check that crowd-kit is installed (default False).

        Raises
        ------
        SatcalError
            ``url`` without platform ``serve``, or nothing to ingest.
        """
        if url and platform != "serve":
            raise SatcalError("--db reads a hosted study's database: give it with --platform serve")
        if not files and platform != "serve" and not rebuild:
            raise SatcalError("give the result files to ingest (or --platform serve to read the hosted "
                              "study's database)")
        if dawid_skene:
            from ..quality import require_crowdkit
            require_crowdkit()
        if not files and platform == "serve":
            return self.ingest_served(url, threshold)
        return self.ingest(files, platform=platform, threshold=threshold)
