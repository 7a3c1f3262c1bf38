"""A real browser for the pages: Debian's ``chromium`` through ``chromedriver`` (Selenium),
both from the system (``.ci/run`` installs them); without them the browser tests skip, saying
why. Helpers to open a page offline, screenshot it and read its charts and tables."""

from __future__ import annotations

import base64
import io
import os
import shutil
from pathlib import Path

import numpy as np
import pytest


# -- in a real browser ----------------------------------------------------------------------------
def _find(name: str, fallback: str) -> str | None:
    return shutil.which(name) or (fallback if os.path.exists(fallback) else None)


def start():
    """A headless Chromium driven by its chromedriver (both Debian's), or a skip saying why."""
    chromium = _find("chromium", "/usr/bin/chromium")
    driver_path = _find("chromedriver", "/usr/bin/chromedriver")
    if not chromium or not driver_path:
        pytest.skip(
            "BROWSER TEST SKIPPED: Debian's chromium and chromium-driver are not installed "
            f"(chromium: {chromium}, chromedriver: {driver_path}); "
            "apt-get install chromium chromium-driver"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = chromium
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1280,900",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)

    return driver


def open_page(driver, path: Path) -> None:
    driver.get_log("browser")  # what an earlier page logged does not count
    driver.get(path.resolve().as_uri())


def open_offline(driver, path: Path) -> None:
    """Open a page and check it is self-contained: no console error, no request leaves the
    file, no script."""
    open_page(driver, path)
    assert console_errors(driver) == []
    assert external_requests(driver) == []
    assert driver.execute_script("return document.scripts.length") == 0


def console_errors(driver) -> list[dict]:
    return [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]


def full_screenshot(driver, save_as: Path) -> bytes:
    """The whole page, beyond the window's height, as PNG bytes (also written to save_as)."""
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}
    )
    png = base64.b64decode(shot["data"])
    save_as.write_bytes(png)
    if os.environ.get("ZEROGRAD_SCREENSHOTS"):  # to look at it yourself
        Path(os.environ["ZEROGRAD_SCREENSHOTS"]).mkdir(parents=True, exist_ok=True)
        shutil.copy(save_as, Path(os.environ["ZEROGRAD_SCREENSHOTS"]) / save_as.name)
    return png


def assert_not_blank(png: bytes, min_height: int = 1000) -> None:
    """A screenshot with text and contrast: a whole page (taller than ``min_height``), or one
    screen (``min_height`` its height)."""
    from PIL import Image

    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("L"), dtype=float)
    assert pixels.shape[0] >= min_height, pixels.shape
    assert pixels.std() > 20, f"screenshot looks blank: grey std {pixels.std():.1f}"
    assert (pixels < 128).mean() > 0.01, "screenshot has almost no dark pixels: no text?"


def chart_boxes(driver) -> list[dict]:
    return driver.execute_script(
        "return [...document.querySelectorAll('svg.chart')].map(s => {"
        " const b = s.getBoundingClientRect();"
        " return {name: s.dataset.chart, width: b.width, height: b.height,"
        " texts: s.querySelectorAll('text').length}; });"
    )


def external_requests(driver) -> list[str]:
    """Every resource the page loaded that is not the page itself or inline data."""
    names = driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name);"
    )
    return [n for n in names if not n.startswith(("data:", "about:"))]


def table_words(driver, section: str) -> list[str]:
    """The verdict words of the section's first table, in order."""
    table = driver.find_element("css selector", f"#{section} table")
    assert table.is_displayed()
    return [e.text for e in table.find_elements("css selector", ".verdict")]
