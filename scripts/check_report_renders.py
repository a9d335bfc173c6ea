"""Prove a walletlake report renders in a real browser: headless Chromium screenshots it.

Usage::

    .venv/bin/python scripts/check_report_renders.py demo-output/report.html [--screenshot shot.png]

Exits 0 when Chromium painted the page and the painted page shows the embedded plots (pixels in
matplotlib's first series colour) and the reconciliation verdict badge; prints one line saying
what it saw. Exits 2 when no Chromium is installed (Debian: ``apt-get install chromium``), 1 when
the page did not render as expected. Nothing leaves the machine: every network feature Chromium
has is switched off and its profile lives in a temporary folder.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from PIL import Image

#: matplotlib's default first series colour (tab:blue), which every report plot uses.
PLOT_BLUE = (31, 119, 180)
#: The verdict badge's background colours (walletlake/report.py's CSS).
VERDICT_COLOURS = {"PASSED": (223, 245, 227), "FAILED": (253, 226, 225)}
WINDOW = (1280, 4000)
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    """The first Chromium-family browser on PATH, or None."""
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    return None


def screenshot(browser: str, page: Path, output: Path, timeout: float = 120) -> None:
    """Render ``page`` headless and write a PNG of the window to ``output``."""
    with tempfile.TemporaryDirectory(prefix="walletlake-chromium-") as profile:
        argv = [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            f"--window-size={WINDOW[0]},{WINDOW[1]}",
            f"--screenshot={output}",
            page.resolve().as_uri(),
        ]
        completed = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if completed.returncode != 0 or not output.exists():
        tail = (completed.stderr or completed.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"chromium exited {completed.returncode}: {' | '.join(tail)}")


def count_near(image: Image.Image, colour: tuple[int, int, int], tolerance: int = 6) -> int:
    """How many pixels are within ``tolerance`` of ``colour`` on every channel."""
    total = 0
    for count, pixel in image.convert("RGB").getcolors(maxcolors=1 << 24) or []:
        if all(abs(a - b) <= tolerance for a, b in zip(pixel, colour, strict=True)):
            total += count
    return total


def check(page: Path, output: Path, browser: str) -> str:
    """Screenshot ``page`` and return a one-line description; raise AssertionError if it looks wrong."""
    screenshot(browser, page, output)
    with Image.open(output) as image:
        size = image.size
        distinct = len(image.convert("RGB").getcolors(maxcolors=1 << 24) or [])
        plot_pixels = count_near(image, PLOT_BLUE)
        verdicts = {name: count_near(image, colour, 1) for name, colour in VERDICT_COLOURS.items()}
    text = page.read_text(encoding="utf-8")
    expected_verdict = "PASSED" if ">PASSED<" in text else "FAILED"
    if distinct < 50:
        raise AssertionError(f"the screenshot has only {distinct} colours: the page looks blank")
    if "data:image/png;base64," in text and plot_pixels < 500:
        raise AssertionError(f"only {plot_pixels} plot-coloured pixels: the embedded plots were not painted")
    if verdicts[expected_verdict] < 200:
        raise AssertionError(f"the {expected_verdict} badge was not painted")
    return (
        f"rendered {page} as {size[0]}x{size[1]} ({distinct} colours, {plot_pixels} plot pixels, "
        f"verdict {expected_verdict} painted) -> {output}"
    )


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path, help="the report.html to render")
    parser.add_argument("--screenshot", type=Path, help="where to keep the PNG (default beside the report)")
    args = parser.parse_args(argv)
    browser = find_chromium()
    if browser is None:
        print("no chromium on PATH (Debian: apt-get install chromium)", file=sys.stderr)
        return 2
    output = args.screenshot or args.report.with_suffix(".png")
    try:
        print(check(args.report, output, browser))
    except (AssertionError, RuntimeError, subprocess.TimeoutExpired) as error:
        print(f"report did not render: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
