"""Debian packages the tests install with apt-get when missing (chromium, postgresql), one
install at a time.

The suite runs on several pytest-xdist workers, and two of them (or two test runs on one
machine) that both find a package missing would run apt-get at once: the second fails on
dpkg's lock. So an install takes a file lock shared by every process on the machine; whoever
waited for it looks again before installing, since the package may be there by then.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable

from filelock import FileLock

LOCK = os.path.join(tempfile.gettempdir(), "satcal-tests-apt.lock")


def apt_install(packages: list[str], present: Callable[[], bool]) -> str | None:
    """Install ``packages`` with apt-get unless ``present()``; None when they are there after,
    otherwise the reason (not root, no apt-get, apt-get failed, still not there).

    Parameters
    ----------
    packages : list of str
        Debian package names.
    present : callable
        ``present() -> bool``: whether what the tests need is installed.

    Returns
    -------
    str or None
        Why the packages cannot be had, or None.
    """
    if present():
        return None
    names = " ".join(packages)
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return f"Debian's {names} not installed (apt-get install {names}) and cannot be installed here"
    with FileLock(LOCK):
        if present():  # installed by another worker while this one waited for the lock
            return None
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        # apt-get waits for dpkg's lock (held by something outside these tests) instead of failing
        wait = ["-o", "DPkg::Lock::Timeout=600"]
        for cmd in (["apt-get", *wait, "update", "-qq"], ["apt-get", *wait, "install", "-y", "-qq", *packages]):
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                return f"could not install {names}: {' '.join(cmd)} failed: {proc.stderr.strip()[-300:]}"
    return None if present() else f"{names} installed, but not found where the tests look"
