"""Text is never markup (issue 31.2, 31.10) and a read-only link runs nothing (31.1), through
Streamlit's AppTest over a store holding a run whose every stored text is hostile: the model
path, a variant's name, a failed variant's error, the run's error, the environment, and a
link whose parameter names and values are hostile too. Every element that renders Markdown
(markdown, captions, the alerts, headings, st.table's cells) is rendered again here with a
CommonMark renderer (raw HTML on): none holds a link, an image or the hostile bold, and the
hostile text is drawn, as text, where the page shows it. A person who does not own the run
sees no server path and no button that queues work on it; the queue refuses such a job in
one line."""

from __future__ import annotations

import html
import re

import pytest
from markdown_it import MarkdownIt
from streamlit.testing.v1 import AppTest

from benchmarks.service.queue import JobQueue
from dashboard.identity import session_owner
from dashboard.markup import HIDDEN_PATH, ZERO_WIDTH, md, no_paths
from helpers import ROOT, scaled, signed

HOSTILE = ("[Click](https://evil.example/p) ![p](http://127.0.0.1:1/x.png) **bold** <b>x</b> "
           "data:text/html,x $x$ :red[x]")
SECRET = "/srv/uploads/alice-secret/ckpt-1234.pt"   # the owner's file: never shown to others
VIEWER = "the-viewer"                               # the non-owner's session key
MARKDOWN = ("markdown", "caption", "warning", "error", "info", "success", "subheader",
            "title", "header")
RENDER = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


def rendered_text(markdown: str) -> str:
    """What a reader sees of ``markdown``: its HTML without tags, entities decoded, the
    zero-width spaces that break autolinks and shortcodes unseen."""
    text = html.unescape(re.sub(r"<[^>]+>", "", RENDER.render(markdown))).strip()
    return text.replace(ZERO_WIDTH, "")


def markup_of(at: AppTest) -> list[tuple[str, str]]:
    """(kind, Markdown source) of every element of the page that renders Markdown."""
    out = [(kind, str(e.value)) for kind in MARKDOWN for e in at.get(kind)]
    for table in at.get("table"):
        out += [("table", str(cell)) for cell in table.value.to_numpy().ravel()]
    return out


def assert_no_markup(elements: list[tuple[str, str]]) -> None:
    for kind, source in elements:
        out = RENDER.render(source)
        assert "<a " not in out and "<img" not in out, (kind, source, out)
        assert "<strong>bold</strong>" not in out and "<b>x</b>" not in out, (kind, source)
        # Streamlit's own syntax, which CommonMark does not know: a colour directive, maths.
        assert ":red[x]" not in source and "$x$" not in source, (kind, source)


def drawn_with_hostile(elements) -> list[str]:
    """The kinds of the elements that show the hostile text, read as text."""
    return [kind for kind, source in elements if "[Click](https://evil.example/p)" in
            rendered_text(source)]


def store_run(path, owner: str, *, model: str = f"{HOSTILE} models/net.py:build",
              recommendation: dict | None = None) -> str:
    """A complete sweep with a hostile model path, a hostile variant (on the Pareto front),
    a failed variant whose error names the owner's upload, and a failed run."""
    from benchmarks.report import stats
    from benchmarks.report.results import VariantResult
    from benchmarks.store.database import ResultsStore
    s = ResultsStore(path)
    run_id = s.start_run(model=model, dataset="digits", device="cpu", spec={},
                         environment={"cpu": HOSTILE, "checkpoint": SECRET, "threads": 1},
                         **signed(path, owner))
    for i, name in enumerate(["baseline", f"prune {HOSTILE}"]):
        right = [True] * (1900 - 2 * i) + [False] * (100 + 2 * i)
        rounds = [1.0 - 0.3 * i + 0.01 * r for r in range(5)]
        s.add_variant(run_id, VariantResult.of(
            name=name, techniques=[] if i == 0 else ["prune"], accuracy=sum(right) / 2000,
            correct_bits=stats.pack_bits(right), n_test=2000, batch_size=32,
            latency_samples_ms=[x + 0.001 * k for x in rounds for k in range(8)],
            round_p50_ms=rounds, size_bytes=400_000 - 50_000 * i,
            timing={"method": "interleaved", "rounds": 5}).to_dict())
    s.add_variant(run_id, VariantResult.of(
        name="int8-static", techniques=["int8"],
        error=f"cannot load {SECRET}: {HOSTILE}").to_dict())
    if recommendation is not None:
        s.set_recommendation(run_id, recommendation)
    s.finish_run(run_id, "failed", f"the worker stopped reading {SECRET}: {HOSTILE}")
    return run_id


def recommendation() -> dict:
    """A recommendation's stored block: a certified winner and its recipe (whose command
    names the owner's checkpoint)."""
    from benchmarks.recommend.certificate import Certificate, Tested
    cert = Certificate(
        margin_pts=1.0, margin="1pt", confidence=0.95, objective="p50", split={},
        candidates=[Tested(0, "baseline", 1.0, 0.0, tested=True, certified=True,
                           theta_pts=0.0, interval_pts=[-0.5, 0.5], lower_pts=-0.5)],
        winner="baseline", speedup={"ratio": 1.0, "ci": [0.9, 1.1]}).to_dict()
    return {"certificate": cert, "split": {"seed": 0, "search_size": 1000,
                                           "certify_size": 1000, "test_examples": 2000},
            "search": {"trials": [], "ended": "every trial measured"},
            "recipe": {"command": f"compression-bench run --checkpoint {SECRET}",
                       "spec": {"model": "mlp", "dataset": "digits", "variants": [
                           {"name": "baseline", "techniques": [], "settings": {}}]}}}


@pytest.fixture
def store(tmp_path, monkeypatch):
    path = tmp_path / "results.db"
    monkeypatch.setenv("COMPRESSION_BENCH_STORE", str(path))
    monkeypatch.delenv("COMPRESSION_BENCH_SHARED_EXPORTS", raising=False)
    monkeypatch.delenv("COMPRESSION_BENCH_ADMINS", raising=False)
    return path


def page(path: str, query: dict, session: str = VIEWER) -> AppTest:
    at = AppTest.from_file(str(ROOT / path), default_timeout=scaled(60))
    at.session_state["cb_session"] = session
    for name, value in query.items():
        at.query_params[name] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_the_helper_escapes_every_construct_and_keeps_the_text():
    assert rendered_text(md(HOSTILE)) == HOSTILE
    assert_no_markup([("md", md(HOSTILE))])
    # Ordinary text is stored as it was: a name, a path, an environment variable.
    for plain in ("prune-l1-0.5", "cuda:0 at 02:11:36", "COMPRESSION_BENCH_MAX_JOBS (1, x)",
                  "--within must be a margin", "1.5 s"):
        assert md(plain) == plain
    # What Streamlit finds in the text itself is broken by a zero-width space: an autolinked
    # URL or address, a directive with no label (it would swallow the word), a shortcode.
    for found in ("https://evil.example", "www.evil.example", "a@b.example", "net.py:build",
                  ":red", ":smile:", ":material/home:"):
        assert md(found) != found and md(found).replace(ZERO_WIDTH, "") == found, found
    for block in ("# heading", "- item", "1. item", "> quote", "www.evil.example", "a@b.example"):
        out = RENDER.render(md(block))
        assert rendered_text(md(block)) == block and "<h1" not in out and "<li" not in out \
            and "<blockquote" not in out and "\\" not in rendered_text(md(block)), block
    assert no_paths(f"cannot load {SECRET}: 1/2 p50/p90 https://x.example/y") == \
        f"cannot load {HIDDEN_PATH}: 1/2 p50/p90 https://x.example/y"


def test_a_hostile_run_and_link_render_no_markup_and_no_path_for_others(store):
    run_id = store_run(store, owner="session:alice")
    hostile_link = {"run": run_id, "tab": "Pareto", HOSTILE: "1", "margin": HOSTILE,
                    "variant": f"prune {HOSTILE}"}
    at = page("pages/results.py", hostile_link)
    elements = markup_of(at)
    assert_no_markup(elements)
    shown = drawn_with_hostile(elements)
    # The link's warning, the shared run's caption (its model path), the run's error, the
    # failed variant's error, the selected variant's heading and the Pareto table's cell.
    assert {"warning", "caption", "subheader", "table"} <= set(shown), elements
    assert shown.count("warning") >= 3, elements  # the link's, the run's, the variant's
    assert any(HOSTILE in rendered_text(s) and "This link's" in s for _, s in elements)
    # No path of the owner's files anywhere, the environment's JSON included.
    everything = [s for _, s in elements] + [str(j.value) for j in at.get("json")]
    assert not [s for s in everything if "alice-secret" in s], everything
    assert any(HIDDEN_PATH in s for s in everything)
    # History lists the run: its label (the model path) escaped too.
    history = page("pages/history.py", {})
    assert_no_markup(markup_of(history))


def test_the_owner_sees_the_paths_of_their_own_run(store):
    run_id = store_run(store, owner=session_owner(VIEWER))
    at = page("pages/results.py", {"run": run_id})
    everything = [s for _, s in markup_of(at)]
    assert_no_markup(markup_of(at))
    assert any("alice-secret" in s for s in everything)


def test_a_read_only_link_shows_no_button_that_queues_work_and_the_queue_refuses(store):
    run_id = store_run(store, owner="session:alice", recommendation=recommendation())
    queue = JobQueue(store)
    at = page("pages/results.py", {"run": run_id, "tab": "Sensitivity"})
    labels = [b.label for b in at.button]
    for queuing in ("Draw sensitivity map", "Run this", "Apply as schedule", "Export model"):
        assert queuing not in labels, labels
    captions = [c.value for c in at.caption]
    assert any("Only the person who ran it can draw a sensitivity map" in c for c in captions)
    assert any("Only the person who ran it can queue this recipe" in c for c in captions)
    # The recipe's command, shown to copy, names no path of the owner's files.
    assert [c.value for c in at.code] and not [c for c in at.code if SECRET in c.value]
    # A crafted request for each of those jobs is refused in one line; nothing is queued.
    viewer = session_owner(VIEWER)
    for kind, payload in (
            ("sensitivity", {"sweep": {}, "sensitivity": {}, "source_run": run_id}),
            ("sweep", {"model": "mlp", "variants": [], "source_run": run_id}),
            ("export", {"run_id": run_id, "variant": "baseline"})):
        with pytest.raises(PermissionError) as refused:
            queue.submit(kind, payload, session=viewer, owner=viewer)
        assert "\n" not in str(refused.value) and "only the person who ran it" in \
            str(refused.value)
    assert queue.jobs() == []


def test_the_owner_is_offered_what_a_shared_link_is_not(store):
    run_id = store_run(store, owner=session_owner(VIEWER), recommendation=recommendation())
    at = page("pages/results.py", {"run": run_id, "tab": "Sensitivity"})
    labels = [b.label for b in at.button]
    assert "Draw sensitivity map" in labels and "Run this" in labels, labels
    assert [c for c in at.code if SECRET in c.value]  # their own recipe, whole


def test_what_a_non_owner_downloads_names_no_server_path(store):
    import json

    from benchmarks.report.document import RunReport
    from benchmarks.store.database import ResultsStore
    from dashboard.markup import without_paths
    stored = ResultsStore(store).run(store_run(store, "session:alice",
                                               recommendation=recommendation()))
    assert SECRET in json.dumps(stored, default=str)
    shared = without_paths(stored)
    assert SECRET not in json.dumps(shared, default=str)
    # The figures are the run's own: the JSON contract's document is drawn the same.
    document, original = (RunReport.from_stored(r).document() for r in (shared, stored))
    assert [v["accuracy"] for v in document["variants"]] == \
        [v["accuracy"] for v in original["variants"]]
    assert SECRET not in json.dumps(document, default=str)


def store_map(path, owner: str, source_run: str) -> str:
    """A finished sensitivity map of ``source_run``'s baseline: one group at one level."""
    from benchmarks.store.database import ResultsStore
    s = ResultsStore(path)
    model = s.run(source_run)["model"]
    sweep = {"model": "seed_cnn", "dataset": "digits", "variants": [
        {"name": "baseline", "techniques": [], "settings": {}}]}
    run_id = s.start_run(model=model, dataset="digits", device="cpu", kind="sensitivity",
                         spec={"sweep": sweep, "source_run": source_run, "sensitivity": {
                             "technique": "prune.l1", "levels": [0.5]}},
                         environment={"sensitivity": {
                             "technique": "prune.l1", "levels": [0.5],
                             "config": {"objective": "p50"},
                             "baseline": {"accuracy": 0.95, "latency_ms": {"p50": 1.0}}}},
                         **signed(path, owner))
    s.add_variant(run_id, {"name": "0@0.5", "root": "0", "group": ["0"], "kind": "prune.l1",
                           "level": 0.5, "accuracy_change": -0.1,
                           "accuracy_change_ci": [-0.6, 0.4], "p_value": 0.8,
                           "latency_share": 0.5, "saving": 0.2, "error": None})
    s.finish_run(run_id, "complete")
    return run_id


def test_a_map_shown_to_another_person_offers_no_apply_as_schedule(store):
    viewer = session_owner(VIEWER)
    for owner, offered in (("session:alice", False), (viewer, True)):
        sweep = store_run(store, owner=owner)
        store_map(store, owner, sweep)
        at = page("pages/results.py", {"run": sweep, "tab": "Sensitivity"})
        labels = [b.label for b in at.button]
        assert ("Apply as schedule" in labels) is offered, labels
        # The map itself is drawn either way: its schedule is there to read and download.
        assert "Download schedule" in [b.label for b in at.get("download_button")]
