"""Small file helpers shared by every stage: atomic writes and content hashes."""
from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

__all__ = ["atomic_write_bytes", "atomic_write_text", "sha256_file", "sha256_bytes", "save_figure"]


def atomic_write_bytes(path: "str | os.PathLike", data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file and a rename, so a reader never sees
    half a file and an interrupted write leaves the old one intact."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: "str | os.PathLike", text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


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
    import matplotlib.pyplot as plt

    base = Path(base)
    paths = []
    metadata = {"png": {"Software": None},
                "pdf": {"CreationDate": None, "Producer": None, "Creator": None}}
    for ext, kwargs in (("png", {"dpi": 150}), ("pdf", {})):
        buf = io.BytesIO()
        fig.savefig(buf, format=ext, bbox_inches="tight", metadata=metadata[ext], **kwargs)
        paths.append(atomic_write_bytes(base.with_suffix(f".{ext}"), buf.getvalue()))
    plt.close(fig)
    return paths
