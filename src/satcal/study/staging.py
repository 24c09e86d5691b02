"""The study's safety: the lock every writing command holds, and output sets written as one."""
from __future__ import annotations

import sys
from contextlib import contextmanager

from ..errors import SatcalError
from ..fileio import OutputSet

#: Seconds a command waits for another one holding the workspace lock.
LOCK_WAIT = 600

#: Workspace locks this process holds, with their depth: the lock is re-entrant in a process
#: (a file lock object per call is not).
_HELD: dict[str, int] = {}


class Staging:
    """The lock and output sets of a :class:`~satcal.study.Study` (a part of it)."""

    @contextmanager
    def locked(self):
        """Hold the workspace lock (``.satcal.lock``): one writing command at a time.

        Re-entrant within a process. Another process's command is waited for, with a line on
        stderr, up to ``LOCK_WAIT`` seconds.
        """
        from filelock import FileLock, Timeout
        key = str((self.path / ".satcal.lock").resolve())
        if _HELD.get(key):  # this process holds it already (a command calling a stage)
            _HELD[key] += 1
            try:
                yield self
            finally:
                _HELD[key] -= 1
            return
        lock = FileLock(key)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            print(f"satcal: waiting for another satcal command working on {self.path} ...",
                  file=sys.stderr, flush=True)
            try:
                lock.acquire(timeout=LOCK_WAIT)
            except Timeout:
                raise SatcalError(f"{self.path}: another satcal command has held the workspace "
                                  f"for over {LOCK_WAIT} s; let it finish, or stop it and run "
                                  "this one again") from None
        _HELD[key] = 1
        try:
            OutputSet.recover(self.path)  # finish or discard what a killed command left
            yield self
        finally:
            _HELD.pop(key, None)
            lock.release()

    @contextmanager
    def staged(self, command: str):
        """``command``'s outputs as one set (:class:`~satcal.fileio.OutputSet`): written aside,
        then moved into place together, so a killed command leaves the old set or the new one,
        never half of each.

        Parameters
        ----------
        command : str
            The command's name, naming the set.

        Yields
        ------
        satcal.fileio.OutputSet
        """
        with OutputSet(self.path, command) as outputs:
            yield outputs
