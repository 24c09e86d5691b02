"""Headless Chromium for the browser tests (Debian's chromium + chromium-driver).

The test setup installs them with apt-get when they are missing and it runs as root (CI and
the project machines); elsewhere the browser tests are skipped with the reason.
"""
from __future__ import annotations

import os
import shutil
import tempfile

from system_packages import apt_install

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def ensure_chromium() -> str | None:
    """Install chromium and chromium-driver if needed; return a reason when impossible."""
    return apt_install(["chromium", "chromium-driver"],
                       lambda: os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER))


def start_driver(performance_log: bool = False):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="satcal-chromium-")
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--no-first-run", "--disable-dev-shm-usage", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    if performance_log:  # every request the browser made, redirects to other sites included
        options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    return driver, profile


def chromium_fixture(performance_log: bool = False, size=(1280, 1000)):
    """Body of a pytest fixture: a headless Chromium driver, or a skip with the reason."""
    import pytest
    pytest.importorskip("selenium")
    reason = ensure_chromium()
    if reason:
        pytest.skip(reason)
    driver, profile = start_driver(performance_log=performance_log)
    driver.set_window_size(*size)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def keep_screenshots(*paths) -> None:
    """Copy screenshots to $SATCAL_SCREENSHOTS, when set, for a person to look at."""
    keep = os.environ.get("SATCAL_SCREENSHOTS")
    if keep:
        for path in paths:
            shutil.copy(path, keep)
