"""Small file helpers shared by every stage: atomic writes, output sets replaced as a whole,
content hashes."""
from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

__all__ = ["atomic_write_bytes", "atomic_write_text", "sha256_file", "sha256_bytes", "save_figure", "OutputSet"]


def atomic_write_bytes(path: "str | os.PathLike", data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file and a rename, so a reader never sees
    half a file and an interrupted write leaves the old one intact."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; outputs follow the user's umask
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _umask() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it: put it straight back
    os.umask(mask)
    return mask


def atomic_write_text(path: "str | os.PathLike", text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


class OutputSet:
    """Files and directories under ``root`` that a command replaces as one set.

    Each output is written into a stage directory (``.satcal-stage-<name>/new/<path>``); then
    the list of outputs is written atomically (the commit) and each one is moved into place,
    a replaced directory first set aside. A command killed before its commit leaves the old
    set whole (the stage is discarded by :meth:`recover`); killed after it, :meth:`recover`
    finishes the moves. No reader is ever left with half of one set and half of another once
    recovery has run, which every writing command does first.
    """

    def __init__(self, root: "str | os.PathLike", name: str):
        self.root = Path(root)
        self.stage = self.root / f".satcal-stage-{name}"
        self.targets: list[Path] = []
        self._walk = False

    def __enter__(self) -> "OutputSet":
        return self.begin()

    def __exit__(self, kind, error, trace) -> None:
        # an error while writing discards the stage; one while committing (after the commit
        # list is written) leaves it for recover() to finish
        if kind is None:
            self.commit()
        else:
            self.abandon()

    def begin(self) -> "OutputSet":
        if self.stage.exists():
            OutputSet._settle(self.stage, self.root)
        (self.stage / "new").mkdir(parents=True)
        return self

    def file(self, rel: "str | os.PathLike") -> Path:
        """Where to write the output file ``rel`` (relative to the root)."""
        path = self._add(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def dir(self, rel: "str | os.PathLike") -> Path:
        """An empty directory to fill in place of the output directory ``rel``."""
        path = self._add(rel)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def tree(self) -> Path:
        """A directory standing for the root: every file written under it is an output (a
        file of the same name in the root is replaced, the root's other files are kept)."""
        self._walk = True
        return self.stage / "new"

    def final(self, path: "str | os.PathLike") -> Path:
        """Where a file written in the stage ends up once committed."""
        return self.root / Path(path).relative_to(self.stage / "new")

    def _add(self, rel) -> Path:
        rel = Path(rel)
        if rel.is_absolute() or ".." in rel.parts:
            raise ValueError(f"{rel}: outputs are named relative to {self.root}")
        if rel not in self.targets:
            self.targets.append(rel)
        return self.stage / "new" / rel

    def commit(self) -> None:
        if self._walk:  # files written under tree(), outside the outputs already named
            new = self.stage / "new"
            named = [new / t for t in self.targets]
            for path in sorted(p for p in new.rglob("*") if p.is_file()):
                if not any(path == n or n in path.parents for n in named):
                    self.targets.append(path.relative_to(new))
        atomic_write_text(self.stage / "COMMIT", "".join(f"{t.as_posix()}\n" for t in self.targets))
        OutputSet._settle(self.stage, self.root)

    def abandon(self) -> None:
        import shutil
        shutil.rmtree(self.stage, ignore_errors=True)

    @staticmethod
    def recover(root: "str | os.PathLike") -> list[str]:
        """Finish committed sets and discard uncommitted ones; the names of those finished."""
        finished = []
        for stage in sorted(Path(root).glob(".satcal-stage-*")):
            if (stage / "COMMIT").exists():
                finished.append(stage.name[len(".satcal-stage-"):])
            OutputSet._settle(stage, Path(root))
        return finished

    @staticmethod
    def _settle(stage: Path, root: Path) -> None:
        """Roll a stage forward (committed) or back (not), then remove it. Idempotent, so a
        recovery that is itself interrupted can simply run again."""
        import shutil
        commit = stage / "COMMIT"
        if commit.exists():
            for line in commit.read_text(encoding="utf-8").splitlines():
                new, target = stage / "new" / line, root / line
                if not new.exists() and not new.is_symlink():
                    continue  # moved by an earlier attempt
                target.parent.mkdir(parents=True, exist_ok=True)
                if new.is_dir() and target.exists():
                    old = stage / "old" / line
                    old.parent.mkdir(parents=True, exist_ok=True)
                    os.rename(target, old)
                os.replace(new, target)
        shutil.rmtree(stage, ignore_errors=True)


def package_versions() -> dict:
    """Versions of satcal and the scientific stack, for provenance records."""
    from importlib import metadata
    from ._version import __version__
    out = {"satcal": __version__}
    for name in ("numpy", "scipy", "pandas", "statsmodels", "scikit-learn", "matplotlib"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: "str | os.PathLike") -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def save_figure(fig, base: "str | os.PathLike") -> list[Path]:
    """Save a matplotlib figure as ``base.png`` (150 dpi) and ``base.pdf``, atomically and with
    no creation date or software version inside, so the same figure gives the same bytes."""
    import io

    base = Path(base)
    paths = []
    metadata = {"png": {"Software": None},
                "pdf": {"CreationDate": None, "Producer": None, "Creator": None}}
    for ext, kwargs in (("png", {"dpi": 150}), ("pdf", {})):
        buf = io.BytesIO()
        fig.savefig(buf, format=ext, bbox_inches="tight", metadata=metadata[ext], **kwargs)
        paths.append(atomic_write_bytes(base.with_suffix(f".{ext}"), buf.getvalue()))
    return paths


def new_figure(*grid, figsize=None, **subplots):
    """A matplotlib ``Figure`` and its axes (``Figure.subplots`` arguments), made without
    pyplot: the user's backend (a notebook's inline one, say) is never switched, and nothing
    is left open in pyplot."""
    from matplotlib.figure import Figure
    fig = Figure(figsize=figsize)
    return fig, fig.subplots(*grid, **subplots)


def panel_axes(ax, panels: int, *grid, figsize=None, **subplots):
    """Axes for a figure of ``panels`` panels: the caller's (``ax``: one Axes or an array of
    them, at least one per panel, e.g. from a notebook's own ``plt.subplots``) or those of a
    new figure laid out as ``grid``. Returns the figure, a flat array of axes, and whether the
    figure is new (a new one gets the figure-level legend and title)."""
    import numpy as np
    if ax is None:
        fig, axes = new_figure(*grid, figsize=figsize, squeeze=False, **subplots)
        return fig, axes.ravel(), True
    axes = np.asarray(ax, dtype=object).ravel()
    if axes.size < panels:
        raise ValueError(f"ax: this figure has {panels} panels; give at least {panels} axes "
                         f"(got {axes.size})")
    return axes[0].figure, axes, False


#: One colour per gain in every figure (calibration and reliability alike).
GAIN_COLOURS = {"bin2": "#8c564b", "bin1": "#e377c2", "exp5": "#d62728", "exp3": "#ff7f0e",
                "exp2": "#2ca02c", "lin": "#1f77b4"}


def gain_colour(gain: str, i: int) -> str:
    """The colour of a gain (the i-th of the figure's cycle for gains without a fixed one)."""
    return GAIN_COLOURS.get(gain, f"C{i % 10}")


def read_utf8_text(path: "str | os.PathLike") -> str:
    """A text file's content: UTF-8 with or without a BOM; CRLF is left to the line splitter.

    Another encoding (Latin-1, Windows-1252) is a one-line error naming the line of the first
    undecodable byte.
    """
    return decode_utf8(read_file_bytes(path), path)


def read_file_bytes(path: "str | os.PathLike") -> bytes:
    """A file's bytes; a missing file or a directory is a one-line error."""
    from .errors import SatcalError
    path = Path(path)
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise SatcalError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise SatcalError(f"{path}: is a directory, expected a file") from None


def decode_utf8(raw: bytes, path: "str | os.PathLike") -> str:
    """``raw`` as UTF-8 text (a BOM dropped); UTF-16 or Latin-1 bytes are one-line errors."""
    from .errors import InputFileError
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")) or (len(raw) > 3 and raw[1:4:2] == b"\0\0"):
        raise InputFileError(path, "is UTF-16 text (as some spreadsheet programs save it): re-save "
                                   "it as UTF-8")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputFileError(path, f"is not UTF-8 text (byte {raw[exc.start]:#x}; it looks like "
                                   "Latin-1 or Windows-1252: re-save it as UTF-8)", line) from None


def read_csv_strings(path: "str | os.PathLike", what: str = "a CSV file"):
    """A CSV with a header, every cell a string; unreadable files are one-line errors."""
    import io
    import pandas as pd
    from .errors import InputFileError
    text = read_utf8_text(path)
    if not text.strip():
        raise InputFileError(path, f"is empty: expected {what}")
    try:
        return pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    except pd.errors.ParserError as exc:
        raise InputFileError(path, f"is not a readable CSV ({str(exc).splitlines()[0]})") from None
