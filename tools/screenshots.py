"""`make screenshots`: the README's and docs' images taken from the real app, so what a reader
sees is the page that opens (issue 32.18: the README showed an older page).

Starts `streamlit run serve.py` on a temporary store (tools.browser), opens the Experiment page
in Debian's Chromium at 1400x900 as a new user would, clicks Run benchmark once on the default
experiment, waits for the run to end, and writes each image in IMAGES as a PNG small enough
for docs/ (no file there over 100 KB: small_png). The tour test (tests/system/test_tour.py)
walks the same demo; tests/unit/test_docs.py checks that IMAGES covers every image README.md
and docs/*.md reference.

    .venv/bin/python -m tools.screenshots [--timeout 900]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from tools.browser import CHROMIUM, CHROMIUM_ARGS, ROOT, running_server

SCREEN = {"width": 1400, "height": 900}
PAGE_MS = 120_000  # a page's first draw on a loaded machine can take a minute


def demo_run(page, url: str, store: Path, timeout_s: float = 900) -> str:
    """The demo: the Experiment page's default experiment, one click on Run benchmark, until
    the run ends. Returns its run id; raises where it did not complete in ``timeout_s``."""
    from playwright.sync_api import expect

    from benchmarks.store.database import ResultsStore
    page.goto(url)
    button = page.get_by_role("button", name="Run benchmark")
    expect(button).to_be_visible(timeout=PAGE_MS)
    before = {r["run_id"] for r in ResultsStore(store).runs(with_variants=False)}
    button.click()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        runs = [r for r in ResultsStore(store).runs(with_variants=False)
                if r["run_id"] not in before]
        if runs and runs[0]["status"] not in ("running", "queued"):
            if runs[0]["status"] != "complete":
                raise RuntimeError(f"the default run ended {runs[0]['status']}")
            return runs[0]["run_id"]
        time.sleep(0.5)
    raise RuntimeError(f"the default run did not end within {timeout_s:.0f} s")


def settled(page) -> None:
    """Wait until a Results page has drawn its answer and its charts."""
    from playwright.sync_api import expect
    cards = page.locator('[data-testid="stMetric"]')
    expect(cards.first).to_be_visible(timeout=PAGE_MS)
    expect(cards.first).not_to_contain_text("measuring", timeout=PAGE_MS)
    expect(page.locator(".js-plotly-plot").first).to_be_visible(timeout=PAGE_MS)
    expect(page.get_by_test_id("stStatusWidget")).to_have_count(0, timeout=PAGE_MS)
    page.wait_for_load_state("networkidle")


def results(page, url: str, run_id: str, out: Path) -> None:
    """The Results page of the default run as the person who ran it sees it (reached through
    the sidebar, in the same session): its first screen, the answer cards and charts."""
    from playwright.sync_api import expect
    page.get_by_test_id("stSidebar").get_by_role("link", name="Results").click()
    expect(page.get_by_role("heading", name="Results", exact=True)).to_be_visible(
        timeout=PAGE_MS)
    settled(page)
    page.screenshot(path=str(out))


# Every image README.md and docs/*.md show: {path from the repository root: how to take it}.
IMAGES = {"docs/images/results.png": results}
# Chromium's PNG of a 1400x900 page is about 140 KB (some 1,800 colours, nearly all of them
# text's anti-aliasing), and no file in docs/ may exceed 100 KB (tests/unit/test_docs.py).
# 256 colours chosen by maximum coverage, refined by k-means, undithered, read about 50 KB
# and differ from the capture by at most 4 of 255 in any channel: the same picture. A capture
# the palette would change by more than PALETTE_TOLERANCE is kept in full colour instead.
PALETTE_TOLERANCE = 8


def small_png(path: Path) -> None:
    """Write the screenshot at ``path`` again as the smaller PNG of the two: a 256-colour
    palette where it stays within PALETTE_TOLERANCE of the capture, else full colour,
    compressed as far as zlib goes."""
    from PIL import Image, ImageChops
    with Image.open(path) as shot:
        rgb = shot.convert("RGB")
    palette = rgb.quantize(256, method=Image.Quantize.MAXCOVERAGE, kmeans=3,
                           dither=Image.Dither.NONE)
    worst = max(high for _, high in
                ImageChops.difference(rgb, palette.convert("RGB")).getextrema())
    (palette if worst <= PALETTE_TOLERANCE else rgb).save(path, optimize=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=float, default=900,
                        help="seconds the default run may take (default 900)")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright
    with tempfile.TemporaryDirectory(prefix="screenshots-") as tmp:
        store = Path(tmp) / "results.db"
        with sync_playwright() as p, running_server(store) as (_, url):
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                        args=CHROMIUM_ARGS)
            page = browser.new_context(viewport=SCREEN).new_page()
            run_id = demo_run(page, url, store, args.timeout)
            for path, take in IMAGES.items():
                take(page, url, run_id, ROOT / path)
                small_png(ROOT / path)
                print(f"wrote {path} ({(ROOT / path).stat().st_size // 1024} KB)")
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
