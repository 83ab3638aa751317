"""``make perf``'s recommend section: what `recommend` must show, measured.

1. On digits, ``--within 1pt`` is refused up front, naming the margins its certify split can
   certify; ``--within`` the one it advises returns a certified winner whose certificate is
   recomputed here from the stored JSON alone.
2. Against an image folder of a few thousand images (generated: scikit-learn's digits,
   upscaled to 24x24 on a 32x32 canvas, each copy rotated, shifted, rescaled and noised so no
   two images are alike; there is no network here to fetch a real one), with the default
   search space and a 20-minute budget: a certified variant at least 2x faster in p50 with
   its interval, or the one line saying why none is.
3. The same command again, warm: the same winner and certificate in a fraction of the time.
4. On the embedded mnist5k (1,250 certify images), the Recommend panel's defaults
   (``--within 1pt``, 8 trials, no budget): a certified variant whose p50 speed-up interval
   lies above 1.5x, its certificate recomputed from the stored bits; or the one line why none
   is, with the CPU's instruction set (INT8 can be slower than fp32 without VNNI or AMX).
   And the same defaults from the Recommend panel in Chromium, one click: a certified answer.
5. The moonshot (issue 34.6): a ResNet-18 trained on mnist5k, channel pruning x static INT8
   x eager/OpenVINO searched within 1 point: the certified speed-up over eager fp32 under
   the winner's runtime, with its interval, on this CPU's instruction set.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tools.checks import ROOT, check, isa_class

FOLDER_COPIES = 3          # 3 x 1,797 digits = 5,391 images
FOLDER_SIZE = 32
# The article's seed_cnn does not learn at 32x32 (a 100,352-input classifier; chance after 8
# epochs on this folder, docs/performance-notes.md): a baseline that learns makes the answer mean
# something. Its narrow sibling learns (87%) and is a CNN, where channel pruning buys speed.
FOLDER_MODEL = "seed_cnn_narrow"
TARGET_RATIO = 2.0
BUDGET = "20m"
KEEP = ("order", "name", "b", "c", "n", "lower_pts", "interval_pts", "certified")


def digits_folder(root: Path, copies: int = FOLDER_COPIES, size: int = FOLDER_SIZE,
                  seed: int = 0) -> int:
    """scikit-learn's digits as grey PNGs, ``copies`` augmented copies of each; returns how
    many images it wrote."""
    import numpy as np
    from PIL import Image
    from sklearn.datasets import load_digits
    digits = load_digits()
    rng = np.random.default_rng(seed)
    count = 0
    for copy in range(copies):
        for i, (pixels, label) in enumerate(zip(digits.images, digits.target)):
            glyph = Image.fromarray((pixels * 255 / 16).astype(np.uint8)).resize(
                (24, 24), Image.BILINEAR)
            scale = rng.uniform(0.85, 1.15)
            glyph = glyph.resize((int(24 * scale), int(24 * scale)), Image.BILINEAR)
            glyph = glyph.rotate(rng.uniform(-15, 15), resample=Image.BILINEAR)
            canvas = Image.new("L", (size, size))
            x0 = int(rng.integers(0, size - glyph.width + 1))
            y0 = int(rng.integers(0, size - glyph.height + 1))
            canvas.paste(glyph, (x0, y0))
            noisy = np.asarray(canvas, dtype=np.float32) * rng.uniform(0.7, 1.0) + \
                rng.normal(0, 12, (size, size))
            folder = root / str(label)
            folder.mkdir(parents=True, exist_ok=True)
            Image.fromarray(noisy.clip(0, 255).astype(np.uint8)).save(
                folder / f"{copy}-{i}.png")
            count += 1
    return count


def _cli(args: list[str], env: dict, timeout: float = 3600):
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "benchmarks", "recommend", *args], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=timeout)
    return time.perf_counter() - t0, p


def _same_certificate(a: dict, b: dict) -> bool:
    ca, cb = a["certificate"], b["certificate"]
    return ca["winner"] == cb["winner"] and [{k: t[k] for k in KEEP} for t in
                                             ca["candidates"]] == \
        [{k: t[k] for k in KEEP} for t in cb["candidates"]]


def _digits(tmp: str, env: dict) -> tuple[list, dict]:
    from benchmarks.recommend.certificate import recompute
    _, refused = _cli(["--within", "1pt", "--quiet"], env)
    # The margin it advises: the one a candidate needs that differs from the baseline on a
    # few examples (at the smallest margin it names, any one disagreement fails).
    m = re.search(r"it can certify ([0-9.]+) points.*\(--within ([0-9.]+)pt\)", refused.stderr)
    can = m.group(2) if m else None
    checks = [check("digits: `recommend --within 1pt` refused up front, naming the margins it "
                    "can certify", refused.stderr.strip()[7:400], "exit 2 and a margin",
                    refused.returncode == 2 and can is not None)]
    if can is None:
        return checks, {}
    seconds, p = _cli(["--within", f"{can}pt", "--json", f"{tmp}/digits.json", "--quiet"], env)
    doc = json.loads(Path(f"{tmp}/digits.json").read_text()) if p.returncode == 0 else None
    cert = doc["recommendation"]["certificate"] if doc else {}
    same = bool(doc) and recompute(doc).to_dict() == cert
    checks += [
        check(f"digits: `recommend --within {can}pt` (the margin it advises; default space) "
              "certifies a winner",
              cert.get("reason", p.stderr.strip()[-200:]), "a winner", bool(cert.get("winner")),
              f"{seconds:.0f} s"),
        check("digits: the certificate recomputed from the stored bits and indices",
              "identical" if same else "differs", "identical", same)]
    return checks, {"digits": doc["recommendation"] if doc else None}


MNIST5K_TARGET = 1.5
PANEL_DEFAULTS = ["--within", "1pt", "--trials", "8"]  # dashboard/recommend_panel.py's


def _mnist5k(tmp: str, env: dict) -> tuple[list, dict]:
    from benchmarks.recommend.certificate import recompute
    env = {**env, "COMPRESSION_BENCH_CACHE": f"{tmp}/cache-mnist5k"}
    seconds, p = _cli(["--dataset", "mnist5k", *PANEL_DEFAULTS, "--json",
                       f"{tmp}/mnist5k.json", "--quiet"], env)
    doc = json.loads(Path(f"{tmp}/mnist5k.json").read_text()) if p.returncode == 0 else None
    cert = doc["recommendation"]["certificate"] if doc else {}
    speed = cert.get("speedup") or {}
    ci = speed.get("ci") or [0, 0]
    above = bool(cert.get("winner")) and ci[0] > MNIST5K_TARGET
    recomputed = recompute(doc).to_dict() if doc else None
    keep = [{k: t[k] for k in KEEP} for t in cert.get("candidates", [])]
    same = bool(doc) and recomputed["winner"] == cert["winner"] and keep == [
        {k: t[k] for k in KEEP} for t in recomputed["candidates"]]
    isa = isa_class()
    why = []
    if doc and not above:  # the run's own lines why nothing faster was certified
        from benchmarks.recommend.record import Recommended
        from benchmarks.views.recommendation import int8_roof, not_certified
        rec = Recommended.from_dict(doc["recommendation"])
        why = not_certified(rec) + [
            line for line in [int8_roof(rec, doc.get("environment"))] if line]
    checks = [
        check(f"mnist5k: the panel's defaults (`recommend --dataset mnist5k "
              f"{' '.join(PANEL_DEFAULTS)}`) certify a variant whose p50 speed-up interval "
              f"lies above {MNIST5K_TARGET:g}x",
              cert.get("reason", p.stderr.strip()[-200:]), f"> {MNIST5K_TARGET:g}x", above,
              "; ".join([isa, f"{seconds:.0f} s", *why])),
        check("mnist5k: the certificate recomputed from the stored bits and indices",
              "identical" if same else "differs", "identical", same)]
    return checks, {"mnist5k": doc["recommendation"] if doc else None}


# Issue 34.6, the moonshot on real data: a ResNet-18 trained here on the embedded mnist5k,
# then channel pruning x static INT8 x runtimes searched within 1 point.
MOONSHOT = ["--model", "resnet18", "--dataset", "mnist5k", "--epochs", "3", "--prune",
            "0.25:0.75:3", "--prune-method", "channel", "--int8", "static",
            "--calibration-batches", "8", "--runtime", "eager,openvino", "--within", "1pt",
            "--budget", "20m", "--threads", "1"]


def moonshot(tmp: str, env: dict) -> tuple[dict, dict | None]:
    """(the check, the recommendation): the certified speed-up over eager fp32 within 1 point
    of the chained recipe under its best runtime, with its interval, on this CPU's
    instruction set (the figure is per instruction set: INT8's speed is)."""
    env = {**env, "COMPRESSION_BENCH_CACHE": f"{tmp}/cache-moonshot"}
    seconds, p = _cli([*MOONSHOT, "--json", f"{tmp}/moonshot.json", "--quiet"], env)
    doc = json.loads(Path(f"{tmp}/moonshot.json").read_text()) if p.returncode == 0 else None
    rec = doc["recommendation"] if doc else {}
    cert = rec.get("certificate") or {}
    speed = cert.get("speedup") or {}
    ci = speed.get("ci")
    runtime = (rec.get("recipe") or {}).get("runtime", "-")
    measured = (f"{cert['winner']} under {runtime}: {speed['ratio']:.2f}x "
                f"[{ci[0]:.2f}, {ci[1]:.2f}]" if cert.get("winner") and ci
                else cert.get("reason") or p.stderr.strip()[-200:])
    row = check(f"the moonshot: ResNet-18 trained on mnist5k, `recommend` over channel pruning "
                f"x static INT8 x eager/OpenVINO within 1 point: the certified p50 speed-up "
                f"over eager fp32 with its interval ({isa_class()})", measured,
                "a certified winner with its interval", bool(cert.get("winner") and ci),
                f"{seconds:.0f} s; search ended: {(rec.get('search') or {}).get('ended')}")
    return row, rec or None


def panel_defaults_in_chromium(tmp: str, timeout_s: float = 1800) -> dict:
    """The Recommend panel in Chromium, defaults untouched, one click: a certified answer and
    no error on the page (minutes, so here and not in the suite)."""
    import re

    from playwright.sync_api import expect, sync_playwright

    from tools.browser import CHROMIUM, CHROMIUM_ARGS, running_server
    store = Path(tmp) / "panel.db"
    t0 = time.perf_counter()
    with sync_playwright() as pw, running_server(store) as (_, url):
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": 1600, "height": 1100}).new_page()
            page.goto(url)
            expect(page.get_by_role("button", name="Run benchmark")).to_be_visible(
                timeout=60_000)
            page.locator('[data-testid="stCheckbox"]', has_text="Recommend: the fastest"
                         ).click()
            button = page.get_by_role("button", name="Recommend", exact=True)
            expect(button).to_be_visible(timeout=60_000)
            button.click()
            # The headline (views.recommendation.headline), or the job's one-line failure.
            answer = page.get_by_text(re.compile(r"^(certified|no certified variant): ")).or_(
                page.locator('[data-testid="stAlertContentError"]')).first
            try:
                expect(answer).to_be_visible(timeout=timeout_s * 1000)
                text = answer.inner_text()
            except AssertionError:
                text = f"no answer in {timeout_s:.0f} s"
            errors = page.locator('[data-testid="stException"]').count() + \
                page.get_by_text("Traceback").count()
        finally:
            browser.close()
    seconds = time.perf_counter() - t0
    return check("the Recommend panel in Chromium, defaults untouched, one click: a certified "
                 "answer, no error", text[:200], "certified, no error",
                 text.startswith("certified:") and not errors, f"{seconds:.0f} s")


def measure_recommend(copies: int = FOLDER_COPIES, budget: str = BUDGET) -> dict:
    """The section (smaller ``copies`` and ``budget`` prove it works on a busy machine)."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "COMPRESSION_BENCH_CACHE": f"{tmp}/cache",
               "COMPRESSION_BENCH_STORE": f"{tmp}/store.db"}
        checks, out = _digits(tmp, env)
        more, found = _mnist5k(tmp, env)
        checks += [*more, panel_defaults_in_chromium(tmp)]
        out.update(found)
        shot, out["moonshot"] = moonshot(tmp, env)
        checks.append(shot)
        images = digits_folder(Path(tmp) / "images", copies)
        args = ["--model", FOLDER_MODEL, "--dataset", f"imagefolder:{tmp}/images",
                "--input-shape", f"1,{FOLDER_SIZE},{FOLDER_SIZE}", "--budget", budget, "--quiet"]
        env["COMPRESSION_BENCH_CACHE"] = f"{tmp}/cache-images"
        cold_s, cold = _cli([*args, "--json", f"{tmp}/cold.json"], env)
        warm_s, warm = _cli([*args, "--json", f"{tmp}/warm.json"], env)
        if cold.returncode or warm.returncode:
            raise RuntimeError(f"recommend failed: {cold.stderr[-300:]} {warm.stderr[-300:]}")
        cold_doc = json.loads(Path(f"{tmp}/cold.json").read_text())
        a = cold_doc["recommendation"]
        b = json.loads(Path(f"{tmp}/warm.json").read_text())["recommendation"]
    cert = a["certificate"]
    base = cold_doc["variants"][0]
    chance = 1.0 / 10
    speed = cert.get("speedup") or {}
    fast = bool(cert.get("winner")) and speed.get("ratio", 0) >= TARGET_RATIO and \
        bool(speed.get("ci"))
    # Or the one line why none is: the search found 2x, but only outside the margin.
    from benchmarks.recommend.record import Recommended
    from benchmarks.views.recommendation import faster_outside
    why = faster_outside(Recommended.from_dict(a))
    beyond = max((t["ratio"] for t in a["search"]["trials"] if t.get("state") == "complete"
                  and t.get("ratio") is not None
                  and (t.get("search_change_pts") or 0) < -cert["margin_pts"]), default=0)
    answered = fast or (why is not None and beyond >= TARGET_RATIO)
    trials = a["search"]["trials"]
    checks += [
        # A certificate against a baseline that learned nothing is vacuous.
        check(f"image folder: the baseline ({FOLDER_MODEL}) learned the data",
              f"{100 * (base.get('accuracy') or 0):.1f}%", f"> chance ({100 * chance:.0f}%) "
              f"+ 5 points", (base.get("accuracy") or 0) > chance + 0.05),
        check(f"image folder ({images:,} generated images, default space, --budget {budget}): "
              f"a certified variant >= 2x faster in p50, with its interval",
              (cert.get("reason") or "-") + (f"; {why}" if why else ""), ">= 2x, or why none",
              answered,
              f"{len(trials)} trials, search ended: {a['search']['ended']}; {cold_s:.0f} s"),
        check("the same command warm: the same winner and certificate",
              "same" if _same_certificate(a, b) else "differs", "same", _same_certificate(a, b)),
        check("the same command warm: its time / the cold run's", f"{warm_s / cold_s:.2f}",
              "<= 0.5", warm_s <= 0.5 * cold_s, f"{warm_s:.0f} s vs {cold_s:.0f} s"),
    ]
    out.update(checks=checks, images={"cold": a, "warm_s": warm_s, "cold_s": cold_s})
    return out
