"""A private PostgreSQL server for the tests (Debian's ``postgresql``).

The test setup installs the package with apt-get when it is missing and the tests run as root
(CI and the project machines), starts a throw-away cluster in a temporary directory owned by
the ``postgres`` user, listening on 127.0.0.1 only, and removes it afterwards. Elsewhere the
PostgreSQL tests are skipped with the reason.
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
from contextlib import contextmanager

from system_packages import apt_install


def _bin_dir() -> str | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return os.path.dirname(found[-1]) if found else None


def ensure_postgres() -> str | None:
    """Install Debian's postgresql if needed; return a reason when impossible."""
    return apt_install(["postgresql"], lambda: _bin_dir() is not None and shutil.which("runuser") is not None)


@contextmanager
def temporary_postgres():
    """Yield a SQLAlchemy URL of an empty database on a private server."""
    bindir = _bin_dir()
    root = tempfile.mkdtemp(prefix="satcal-pg-")
    os.chmod(root, 0o755)
    data = os.path.join(root, "data")
    as_pg = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    from satcal.serve.client import free_port
    port = free_port()
    run = lambda *cmd: subprocess.run([*as_pg, *cmd], capture_output=True, text=True, check=True)
    try:
        run(f"{bindir}/initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-sync")
        run(f"{bindir}/pg_ctl", "-D", data, "-w", "-l", os.path.join(root, "log"), "-o",
            f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={root} "
            "-c max_connections=300 -c fsync=on", "start")
        for _ in range(50):
            if subprocess.run([*as_pg, f"{bindir}/pg_isready", "-h", "127.0.0.1", "-p", str(port)],
                              capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        run(f"{bindir}/createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "satcal")
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/satcal"
    finally:
        subprocess.run([*as_pg, f"{bindir}/pg_ctl", "-D", data, "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
