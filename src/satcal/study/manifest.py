"""manifest.json: package versions, seeds, input hashes and the command history."""
from __future__ import annotations

import json
import platform as _platform
import sys
from datetime import datetime, timezone
from pathlib import Path

from .._version import __version__
from ..fileio import OutputSet, atomic_write_text, sha256_file


class Manifest:
    """The manifest of a :class:`~satcal.study.Study` (a part of it)."""

    def record(self, command: str, details: dict | None = None, inputs: list[Path] | None = None,
               outputs: OutputSet | None = None, hashes: dict | None = None) -> None:
        """Append to manifest.json: versions, seeds, input hashes and the command (into
        ``outputs`` when the record belongs to a set of outputs).

        Parameters
        ----------
        command : str
            The command's name.
        details : dict or None, optional
            What to record with it in the history.
        inputs : list of pathlib.Path or None, optional
            Files hashed besides the judgments and documents.
        outputs : satcal.fileio.OutputSet or None, optional
            The set the manifest belongs to; None writes manifest.json at once.
        hashes : dict or None, optional
            The SHA-256 of some ``inputs`` already known (by the path given in ``inputs``),
            taken as they are rather than read and hashed again (an ingest hashed each
            result file's bytes when it read them, and archived those bytes).
        """
        path = self.path / "manifest.json"
        target = outputs.file("manifest.json") if outputs is not None else path
        manifest = json.loads(path.read_text()) if path.exists() else {"history": [], "inputs": {}}
        manifest["satcal_version"] = __version__
        manifest["python"] = sys.version.split()[0]
        manifest["platform"] = _platform.platform()
        manifest["packages"] = _package_versions()
        manifest["seeds"] = {"study": self.seed}
        files = [self.path / self["study.judgments"]]
        if self["study.documents"]:
            files.append(self.path / self["study.documents"])
        files += list(inputs or [])
        known = {Path(k): v for k, v in (hashes or {}).items()}
        for f in map(Path, files):
            given = known.get(f)
            # a file of this set is recorded under the name it will have once committed, with
            # the content it will have then
            name = outputs.final(f) if outputs is not None and f.is_relative_to(outputs.stage / "new") else f
            if outputs is not None and f.is_relative_to(self.path) and not f.is_relative_to(outputs.stage):
                staged = outputs.stage / "new" / f.relative_to(self.path)
                f = staged if staged.exists() else f
            if f.exists():
                manifest["inputs"][str(name.relative_to(self.path) if name.is_relative_to(self.path) else name)] = (
                    given if given is not None else sha256_file(f))
        manifest["history"].append({"command": command, "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                                    **({"details": details} if details else {})})
        atomic_write_text(target, json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def _package_versions() -> dict:
    from ..fileio import package_versions
    return package_versions()
