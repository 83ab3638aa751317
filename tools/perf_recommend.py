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
6. Issue 44's answer in a demo's time, beside the previous procedure in the same run: the
   panel's defaults and the moonshot run by this checkout and by ``PREVIOUS`` (the commit
   before the fifth wave, from a git worktree, on the same interpreter and cold caches of
   their own), each's time and certified speed-up, and the ratio of times; the moonshot here
   with half the previous budget. ``--also agreement>=99%`` on mnist5k recomputed from the
   stored bits and classes.
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
# The procedure before the fifth wave (fixed-sequence, slowest first, every wave measured
# whole): its code, run beside this checkout's.
PREVIOUS = "8b35728"
DEMO_S = 180  # issue 44.6: the panel's defaults, certified, within three minutes (quiet)


def previous_checkout(tmp: str) -> Path | None:
    """A worktree of ``PREVIOUS`` under ``tmp`` (None without git or that commit)."""
    where = Path(tmp) / "previous"
    done = subprocess.run(["git", "worktree", "add", "--detach", str(where), PREVIOUS],
                          cwd=ROOT, capture_output=True, text=True)
    return where if done.returncode == 0 else None


def drop_checkout(where: Path | None) -> None:
    if where is not None:
        subprocess.run(["git", "worktree", "remove", "--force", str(where)], cwd=ROOT,
                       capture_output=True)


def _cli_at(where: Path | None, args: list[str], env: dict, timeout: float = 3600):
    """``recommend`` of the checkout at ``where`` (this one when None)."""
    if where is None:
        return _cli(args, env, timeout)
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "benchmarks", "recommend", *args], cwd=where,
                       env={**env, "PYTHONPATH": str(where)}, capture_output=True, text=True,
                       timeout=timeout)
    return time.perf_counter() - t0, p


def _claim(doc: dict | None, p) -> tuple[str, float | None]:
    """(the certificate's claim in a line, its speed-up) of a recommend's document."""
    cert = (doc or {}).get("recommendation", {}).get("certificate") or {}
    speed = cert.get("speedup") or {}
    if cert.get("winner") and speed.get("ratio"):
        ci = speed.get("ci") or []
        return (f"{cert['winner']} {speed['ratio']:.2f}x" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]"
                                                              if ci else "")), speed["ratio"]
    return (cert.get("reason") or p.stderr.strip()[-160:] or "no answer")[:160], None


def side_by_side(tmp: str, name: str, args: list[str], env: dict, previous: Path | None,
                 previous_args: list[str] | None = None) -> tuple[list, dict]:
    """This checkout's ``recommend args`` and the previous procedure's, cold caches of their
    own, the previous first: each's time and claim, and the ratio of times."""
    rows, out = [], {}
    runs = {}
    for who, where, given in (("previous", previous, previous_args or args),
                              ("this", None, args)):
        if who == "previous" and previous is None:
            continue
        folder = Path(tmp) / f"{name}-{who}"
        folder.mkdir(parents=True, exist_ok=True)
        mine = {**env, "COMPRESSION_BENCH_CACHE": str(folder / "cache"),
                "COMPRESSION_BENCH_STORE": str(folder / "store.db")}
        seconds, p = _cli_at(where, [*given, "--json", str(folder / "out.json"), "--quiet"],
                             mine)
        doc = json.loads((folder / "out.json").read_text()) if p.returncode == 0 else None
        runs[who] = (seconds, _claim(doc, p), doc)
    mine_s, (claim, ratio), doc = runs["this"]
    out[name] = doc["recommendation"] if doc else None
    if "previous" in runs:
        then_s, (then_claim, then_ratio), _ = runs["previous"]
        better = ratio is not None and (then_ratio is None or ratio >= then_ratio * 0.9)
        # Issue 44.6: the moonshot in at most half its time, the panel faster (its own aim
        # is three minutes, reported beside it).
        limit = 0.5 if name == "moonshot" else 1.0
        rows.append(check(f"{name}: time to a certified answer, this procedure / the previous "
                          f"({PREVIOUS}), cold, in one run ({isa_class()})",
                          f"{mine_s / then_s:.2f}", f"<= {limit:g}" if limit < 1 else "< 1",
                          mine_s <= limit * then_s if limit < 1 else mine_s < then_s,
                          f"{mine_s:.0f} s vs {then_s:.0f} s"))
        rows.append(check(f"{name}: the certificate, this procedure against the previous",
                          f"{claim} | previous: {then_claim}", "the same or a better one",
                          better))
    return rows, {**out, f"{name}_seconds": mine_s}


def _mnist5k(tmp: str, env: dict, previous: Path | None = None) -> tuple[list, dict]:
    from benchmarks.recommend.certificate import recompute
    rows, found = side_by_side(tmp, "panel", ["--dataset", "mnist5k", *PANEL_DEFAULTS], env,
                               previous)
    seconds = found["panel_seconds"]
    doc_path = Path(tmp) / "panel-this" / "out.json"
    doc = json.loads(doc_path.read_text()) if found["panel"] else None
    cert = doc["recommendation"]["certificate"] if doc else {}
    p = subprocess.CompletedProcess([], 0, "", "")
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
              "identical" if same else "differs", "identical", same),
        # Issue 44.6 asks three minutes on two quiet cores: said beside the figure, checked
        # as the ratio to the previous procedure above (a time alone tests the machine).
        check(f"mnist5k: the panel's defaults, cold, the time to a certified answer "
              f"({isa_class()}; the issue's aim: {DEMO_S // 60} minutes on two quiet cores)",
              f"{seconds:.0f} s", "(no target)", bool(cert.get("winner"))), *rows]
    # Two risks at once, recomputed from what the run stored (its cache warm from above).
    folder = Path(tmp) / "panel-this"
    mine = {**env, "COMPRESSION_BENCH_CACHE": str(folder / "cache"),
            "COMPRESSION_BENCH_STORE": str(folder / "store.db")}
    _, p = _cli(["--dataset", "mnist5k", *PANEL_DEFAULTS, "--also", "agreement>=99%", "--json",
                 str(folder / "also.json"), "--quiet"], mine)
    also = json.loads((folder / "also.json").read_text()) if p.returncode == 0 else None
    stated = (also or {}).get("recommendation", {}).get("certificate") or {}
    again = recompute(also).to_dict() if also else None
    checks.append(check("mnist5k: `recommend --within 1pt --also agreement>=99%` recomputed "
                        "from the stored bits and classes",
                        (stated.get("reason") or p.stderr.strip()[-160:])[:200],
                        "identical, agreement among its risks",
                        bool(also) and again == stated and any(
                            r.get("name") == "agreement" for r in stated.get("risks") or [])))
    return checks, {"mnist5k": doc["recommendation"] if doc else None}


# Issue 34.6, the moonshot on real data: a ResNet-18 trained here on the embedded mnist5k,
# then channel pruning x static INT8 x runtimes searched within 1 point.
MOONSHOT = ["--model", "resnet18", "--dataset", "mnist5k", "--epochs", "3", "--prune",
            "0.25:0.75:3", "--prune-method", "channel", "--int8", "static",
            "--calibration-batches", "8", "--runtime", "eager,openvino", "--within", "1pt",
            "--budget", "20m", "--threads", "1"]


def moonshot(tmp: str, env: dict, previous: Path | None = None) -> tuple[list, dict | None]:
    """(the checks, the recommendation): the certified speed-up over eager fp32 within 1 point
    of the chained recipe under its best runtime, with its interval, on this CPU's
    instruction set (the figure is per instruction set: INT8's speed is); beside the
    previous procedure's with its budget (``MOONSHOT``), this one's with half of it."""
    half = [*MOONSHOT[:MOONSHOT.index("--budget")], "--budget", "10m",
            *MOONSHOT[MOONSHOT.index("--budget") + 2:]]
    rows, found = side_by_side(tmp, "moonshot", half, env, previous, MOONSHOT)
    seconds = found["moonshot_seconds"]
    doc_path = Path(tmp) / "moonshot-this" / "out.json"
    doc = json.loads(doc_path.read_text()) if found["moonshot"] else None
    p = subprocess.CompletedProcess([], 0, "", "")
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
    return [row, *rows], rec or None


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
            seconds = time.perf_counter() - t0
            errors = page.locator('[data-testid="stException"]').count() + \
                page.get_by_text("Traceback").count()
            # Its Results page, for its owner and for a colleague who opens the link.
            from urllib.parse import parse_qs, urlsplit

            from benchmarks.store.database import ResultsStore
            runs = ResultsStore(store).runs(with_variants=False)
            key = (parse_qs(urlsplit(page.url).query).get("session") or [""])[0]
            filled = bool(runs)
            for viewer, address in ((page, f"{url}/results?run={runs[0]['run_id']}"
                                            f"&session={key}"),
                                    (browser.new_context(viewport={"width": 1400,
                                                                   "height": 900}).new_page(),
                                     f"{url}/results?run={runs[0]['run_id']}")) \
                    if runs else ():
                viewer.goto(address)
                card = viewer.locator('[data-testid="stMetric"]').first
                try:
                    expect(card).to_be_visible(timeout=60_000)
                    expect(viewer.get_by_text(re.compile(r"^certified: "))).to_be_visible(
                        timeout=60_000)
                except AssertionError:
                    filled = False
                filled = filled and "none" not in card.inner_text().splitlines()[-1:]
                errors += viewer.locator('[data-testid="stException"]').count() + \
                    viewer.get_by_text("Traceback").count()
        finally:
            browser.close()
    return check("the Recommend panel in Chromium, defaults untouched, one click: a certified "
                 "answer; its Results page and its link for a colleague: cards filled, no "
                 "error", text[:200], "certified, no error",
                 text.startswith("certified:") and not errors and filled,
                 f"{seconds:.0f} s to the answer ({isa_class()})")


def _private_env(tmp: str) -> dict:
    """The commands' environment: a cache and a store of their own under ``tmp``."""
    return {**os.environ, "COMPRESSION_BENCH_CACHE": f"{tmp}/cache",
            "COMPRESSION_BENCH_STORE": f"{tmp}/store.db"}


def measure_answer() -> dict:
    """Issue 44's answer in a demo's time (item 6 of the module's docstring): the panel's
    defaults (with ``--also agreement>=99%`` recomputed), the panel in Chromium, and the
    moonshot, each beside ``PREVIOUS`` in the same run."""
    with tempfile.TemporaryDirectory() as tmp:
        env = _private_env(tmp)
        previous = previous_checkout(tmp)
        try:
            checks, out = _mnist5k(tmp, env, previous)
            checks.append(panel_defaults_in_chromium(tmp))
            shot, out["moonshot"] = moonshot(tmp, env, previous)
            checks += shot
        finally:
            drop_checkout(previous)
    out["checks"] = checks
    return out


def measure_recommend(copies: int = FOLDER_COPIES, budget: str = BUDGET) -> dict:
    """The section (smaller ``copies`` and ``budget`` prove it works on a busy machine): on
    digits and a generated image folder; the panel's defaults and the moonshot are
    ``measure_answer``'s (the ``answer`` section)."""
    with tempfile.TemporaryDirectory() as tmp:
        env = _private_env(tmp)
        checks, out = _digits(tmp, env)
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
