"""Headless Chromium driven by Selenium for the web page's tests (tests/browser/).

Debian's `chromium`, `chromium-driver` and `python3-selenium`; a test exits 77 (skipped) when
one is missing. Selenium is installed for Debian's /usr/bin/python3: under another
interpreter without it, the test re-runs itself there.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from strata_support import SOURCE_DIR, STRATA_BIN, free_port, skip  # noqa: E402

DEBIAN_PYTHON = "/usr/bin/python3"


def _import_selenium():
    try:
        import selenium  # noqa: F401
    except ImportError:
        if os.path.exists(DEBIAN_PYTHON) and os.path.realpath(sys.executable) != os.path.realpath(DEBIAN_PYTHON) \
                and not os.environ.get("STRATA_BROWSER_REEXEC"):
            os.environ["STRATA_BROWSER_REEXEC"] = "1"
            os.execv(DEBIAN_PYTHON, [DEBIAN_PYTHON, *sys.argv])
        skip("Selenium is not installed (apt-get install python3-selenium)")


_import_selenium()
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


def browser() -> webdriver.Chrome:
    """A headless Chromium that keeps the console's messages."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        skip("Chromium or its driver is not installed (apt-get install chromium chromium-driver)")
    opts = Options()
    opts.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,900",
                "--disable-extensions", "--no-first-run"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(driver), options=opts)


@contextlib.contextmanager
def session():
    """A browser for one test; when the test's steps pass, the console must hold no error."""
    driver = browser()
    try:
        yield driver
        errors = console_errors(driver)
        assert not errors, f"console errors: {errors}"
    finally:
        driver.quit()


def console_errors(driver) -> list[str]:
    """The console's errors since the last call (script errors, failed loads, CSP violations)."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def wait_for(driver, condition, timeout: float = 60, what: str = "the page"):
    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(lambda d: condition(d), f"{what} within {timeout} s")


def screenshot(driver, name: str) -> Path:
    """Saves a PNG where STRATA_SCREENSHOTS points (docs/ for README.md), else in the temp dir."""
    folder = Path(os.environ.get("STRATA_SCREENSHOTS", "/tmp/strata-screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    driver.save_screenshot(str(path))
    return path


class Process:
    """A strata command serving HTTP on a free port; ready once `ready_path` answers."""

    def __init__(self, *args: str, ready_path: str):
        import urllib.request

        self.port = free_port()
        self.proc = subprocess.Popen([STRATA_BIN, *args, "--port", str(self.port)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"strata {' '.join(args)} exited: {self.proc.stderr.read()}")
            try:
                with urllib.request.urlopen(self.url(ready_path), timeout=5):
                    break
            except OSError:
                if time.time() > deadline:
                    raise RuntimeError(f"strata {' '.join(args)} did not answer within 60 s")
                time.sleep(0.1)

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


__all__ = ["SOURCE_DIR", "STRATA_BIN", "Process", "browser", "console_errors", "screenshot", "session", "skip", "wait_for"]
