"""Headless Chromium (Debian's `chromium`) driven by Playwright for Python: the browser of the console tests.

Playwright's own browser download is not used; `executable_path` points at the system Chromium. Every launch gets a
fresh temporary profile (Playwright creates and deletes it), so no cookie or cache survives between runs.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium_path() -> str | None:
    return os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


@contextmanager
def launch() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    path = chromium_path()
    if path is None:
        raise FileNotFoundError("chromium is not installed (apt-get install -y chromium)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, args=FLAGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()
