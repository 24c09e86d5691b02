"""A real Label Studio server for the tests (PyPI's ``label-studio``, in a virtualenv of its own).

The test setup installs it into a cached virtualenv when it is missing (its pinned Django stack
stays apart from satcal's), starts it on 127.0.0.1 with a throw-away data directory, its
version check against PyPI switched off, and one researcher account; the client logs in as a
browser does (session cookie + CSRF token: Label Studio 1.23 refuses legacy API tokens by
default). Where it cannot be installed, the tests are skipped with the reason.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

VERSION = "1.23.2"
EMAIL, PASSWORD = "researcher@example.org", "satcal-test-password"


def _venv() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / "satcal-tests" / f"label-studio-{VERSION}"


def ensure_label_studio() -> tuple[Path | None, str | None]:
    """(the label-studio executable, None), or (None, the reason it cannot be had).

    The check and the install run under a file lock beside the virtualenv: a second
    pytest-xdist worker (or test run) that found no executable while the first was installing
    would otherwise remove the first's half-made virtualenv and install into it at once.
    """
    from filelock import FileLock
    venv = _venv()
    exe = venv / "bin" / "label-studio"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(venv) + ".lock"):
        if exe.exists():
            return exe, None
        shutil.rmtree(venv, ignore_errors=True)
        steps = ([sys.executable, "-m", "venv", str(venv)],
                 [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", f"label-studio=={VERSION}"])
        for cmd in steps:
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                shutil.rmtree(venv, ignore_errors=True)
                return None, f"could not install label-studio {VERSION}: {proc.stderr.strip()[-300:]}"
    return exe, None


@contextmanager
def running_label_studio(exe: Path, startup_timeout: float = 300):
    """Yield a logged-in ``httpx.Client`` on a fresh server; the server and its data go after."""
    import httpx
    from satcal.serve.client import free_port
    port = free_port()
    data = tempfile.mkdtemp(prefix="satcal-label-studio-")
    env = {**os.environ, "LABEL_STUDIO_BASE_DATA_DIR": data, "LATEST_VERSION_CHECK": "false",
           "COLLECT_ANALYTICS": "false", "SENTRY_DSN": "", "FRONTEND_SENTRY_DSN": "",
           "LABEL_STUDIO_USERNAME": EMAIL, "LABEL_STUDIO_PASSWORD": PASSWORD}
    log = open(Path(data) / "server.log", "w")
    proc = subprocess.Popen([str(exe), "start", "--no-browser", "--host", "127.0.0.1", "--port", str(port)],
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + startup_timeout
        while True:
            try:
                if httpx.get(base + "/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("label-studio did not start: " + (Path(data) / "server.log").read_text()[-2000:])
            time.sleep(1)
        client = httpx.Client(base_url=base, follow_redirects=True, timeout=120)
        client.get("/user/login/")
        client.post("/user/login/", data={"email": EMAIL, "password": PASSWORD,
                                          "csrfmiddlewaretoken": client.cookies.get("csrftoken")},
                    headers={"Referer": base + "/user/login/"})
        client.headers.update({"X-CSRFToken": client.cookies.get("csrftoken"), "Referer": base})
        if client.get("/api/current-user/whoami").status_code != 200:
            raise RuntimeError("could not log in to label-studio")
        yield client
        client.close()
    finally:
        import signal
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
        shutil.rmtree(data, ignore_errors=True)
