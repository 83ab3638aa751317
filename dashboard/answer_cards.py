"""The answer first: what a run says, in metric cards at the top of its results. The fastest
variant that keeps accuracy within the page's margin (``benchmarks.report.answer``: the
paired test of the accuracy change, exact with few discordant pairs and Tango's score test
otherwise; a bootstrap over timing rounds for the speed-up), its speed-up and accuracy change
with their intervals, its size and memory against the baseline; "none", with the reason,
when no variant qualifies. Marked *exploratory*: the same test examples chose it and judge it;
a ``recommend`` run shows its certificate's answer instead, marked *certified*: the winner,
the margin it was tested at, and its figures from the held-out split."""

from __future__ import annotations

import streamlit as st

from benchmarks.recommend.certificate import Certificate
from benchmarks.report import runtimes
from dashboard import links, tables
from dashboard.markup import md

MARGIN_RANGE = (0.1, 10.0)  # points; the answer refuses (0, 50], the page offers a sane part
DEFAULT_MARGIN = 1.0
NONE = "none"
DASH = "—"
# The cards' text wraps instead of ending in "…" (st.metric's own style cuts a value to one
# line): at 1280 px five cards leave ~130 px each, narrower than "95% CI -1.30 to +0.90".
CARDS_KEY = "answer-cards"
CARDS_CSS = (
    f"<style>.st-key-{CARDS_KEY} [data-testid='stMetricValue'],"
    f".st-key-{CARDS_KEY} [data-testid='stMetricValue'] *,"
    f".st-key-{CARDS_KEY} [data-testid='stMetricDelta'],"
    f".st-key-{CARDS_KEY} [data-testid='stMetricDelta'] *,"
    f".st-key-{CARDS_KEY} [data-testid='stMetricLabel'],"
    f".st-key-{CARDS_KEY} [data-testid='stMetricLabel'] *"
    "{white-space:normal!important;overflow:visible!important;"
    "text-overflow:clip!important;overflow-wrap:anywhere}"
    f".st-key-{CARDS_KEY} [data-testid='stMetricValue']{{font-size:1.6rem;line-height:1.2}}"
    "</style>")


def certificate_of(run: dict) -> Certificate | None:
    """The run's certificate, where a ``recommend`` run stored one (its recommendation
    block: the held-out split's test of every candidate, and the winner)."""
    cert = (run.get("recommendation") or {}).get("certificate")
    return Certificate.from_dict(cert) if isinstance(cert, dict) and cert else None


def certified_figures(cert: Certificate) -> tuple:
    """(speed-up text, its interval, accuracy change text, its interval) of the winner as
    the certificate measured them: on the certify split, timed again beside the baseline."""
    winner = next((t for t in cert.candidates if t.name == cert.winner), None)
    speed = cert.speedup or {}
    speed_text = _ratio_text(speed.get("ratio"), speed.get("ci"), speed.get("coverage"),
                             speed.get("rounds"))
    if winner is None or winner.theta_pts is None:
        return (*speed_text, DASH, None)
    interval = winner.interval_pts
    return (*speed_text, f"{winner.theta_pts:+.2f} pts",
            f"95% CI {interval[0]:+.2f} to {interval[1]:+.2f}" if interval else None)


def margin_control(key: str, url=None) -> float:
    """How many accuracy points the answer may give up: the page's one knob."""
    low, high = MARGIN_RANGE
    first = DEFAULT_MARGIN if url is None else url.initial(
        "margin", f"{key}-margin", lambda t: links.parse_number(t, low, high, False),
        DEFAULT_MARGIN)
    margin = st.number_input(
        "Accuracy margin (points)", low, high, float(first), 0.5, key=f"{key}-margin",
        help="The answer is the fastest variant whose accuracy is, at 95% confidence, at "
             "most this many points below the baseline's (the one-sided lower limit of the "
             "paired test: exact unconditional with fewer than 50 discordant examples, "
             "Tango's score test otherwise).")
    if url is not None:
        url.keep("margin", links.show_number(float(margin)),
                 links.show_number(DEFAULT_MARGIN))
    return float(margin)


def _ratio_text(ratio, ci, coverage=None, rounds=None) -> tuple[str, str | None]:
    """``coverage``/``rounds``: what a certificate states its interval covers (fewer rounds
    than the bootstrap's 95% needs, e.g. an interrupted run's three search rounds, say so)."""
    if ratio is None:
        return DASH, None
    if ci and coverage is not None and coverage < 0.95:
        return f"{ratio:.2f}×", (f"{100 * coverage:.3g}% CI {ci[0]:.2f}–{ci[1]:.2f}× "
                                 f"({rounds} rounds)")
    return f"{ratio:.2f}×", (f"95% CI {ci[0]:.2f}–{ci[1]:.2f}×" if ci else
                             "no interval (one timing round)")


def _against(row: dict, figure: str) -> tuple[str, str | None]:
    value, ratio = row.get(figure), row.get(f"{figure}_vs_base")
    if value is None:  # a word under the dash (the reason on hover): a bare "—" reads as a bug
        return DASH, ("not measured" if figure == "peak_memory_mb" else None)
    return f"{value:.2f} MB", (None if ratio is None else f"{ratio:.2f}× the baseline")


def measuring(run: dict, rows: list[dict]) -> tuple[int, int] | None:
    """(timed, planned) while the run is still going, else None: until every variant is
    timed there is no evidence for a verdict, only a count."""
    if run.get("status") not in ("running", "queued"):
        return None
    planned = len((run.get("spec") or {}).get("variants") or []) or len(rows)
    timed = sum(1 for r in rows if r.get("p50_ms") is not None)
    return timed, max(planned, len(rows))


def answer_of(report, margin: float):
    from benchmarks.report.answer import exploratory_answer
    return exploratory_answer(report.variants, report.baseline, margin_pts=margin)


def cards(run: dict, report, rows: list[dict], key: str, url=None):
    """The margin, then the cards. Returns the exploratory Answer (its variant: the page's
    default selection)."""
    head, knob = st.columns([5, 1], vertical_alignment="bottom")
    with knob:
        margin = margin_control(key, url)
    answer = answer_of(report, margin)
    cert = certificate_of(run)
    name = cert.winner if cert else answer.variant
    kind = "certified" if cert else "exploratory"
    if cert:  # the margin the certificate tested, not the knob's
        margin = float(cert.margin_pts or margin)
    with head:
        st.markdown(f"**The answer** ({kind}): the fastest variant within {margin:g} "
                    f"accuracy point{'s' if margin != 1 else ''} of the baseline at 95% "
                    f"confidence" + (f", measured on {md(cert.device)}"
                                     if cert and cert.device else ""))
    st.html(CARDS_CSS)
    pending = None if cert else measuring(run, rows)
    if pending is not None:
        _measuring_cards(kind, *pending)
        return answer
    chosen = next((c for c in answer.candidates if c.name == name), None)
    row = next((r for r in rows if r["variant"] == name), {})
    columns = st.container(key=CARDS_KEY).columns([3, 2, 2, 2, 2], border=True)
    # The whole name, wrapped (CARDS_CSS): a shortened one ended in "…" on the headline.
    columns[0].metric(f"Variant ({kind})", md(name) if name else NONE,
                      help=md((name + ": " if name else "") + (answer.reason if not cert else
                                                               "certified by its run")))
    if cert:
        speed, speed_ci, acc, acc_ci = certified_figures(cert)
    else:
        speed, speed_ci = _ratio_text(chosen.ratio, chosen.ratio_ci) if chosen else \
            (DASH, None)
    columns[1].metric("Speed-up (p50)", speed, speed_ci, delta_color="off", delta_arrow="off",
                      help="Baseline p50 over the variant's; the interval is a bootstrap "
                           "over the interleaved timing rounds.")
    if cert:
        pass  # the certificate's figures, above
    elif chosen:
        low, high = chosen.accuracy_ci_pts
        acc, acc_ci = f"{chosen.accuracy_change_pts:+.2f} pts", \
            f"95% CI {low:+.2f} to {high:+.2f}"
    else:
        acc, acc_ci = DASH, None
    columns[2].metric("Accuracy change", acc, acc_ci, delta_color="off", delta_arrow="off",
                      help="Against the baseline on the same test examples (the paired test's "
                           "interval: exact unconditional with fewer than 50 discordant "
                           "examples, Tango's score interval otherwise).")
    for column, (title, figure) in zip(columns[3:], (("Size", "size_mb"),
                                                     ("Peak memory", "peak_memory_mb"))):
        value, delta = _against(row, figure) if name else (DASH, None)
        why = tables.memory_reason(row) if name and delta == "not measured" else None
        column.metric(title, value, delta, delta_color="off", delta_arrow="off", help=why)
    on_each = runtimes.verdict_on_each_profile(rows, name) if name else []
    if on_each:  # the verdict per instruction set, where the run timed several
        st.caption(md(f"{name} on each instruction set: " + "; ".join(on_each) + "."))
    if not name:
        st.caption(f"No answer: {md(cert.reason if cert else answer.reason)}.")
    elif not cert:
        st.caption("Exploratory: the same test examples chose this variant and judge it, so "
                   "its confidence is not a guarantee; `compression-bench recommend` keeps "
                   "them apart and certifies.")
    return answer


def _measuring_cards(kind: str, timed: int, planned: int) -> None:
    """The cards of a run still going: a count of the variants timed, no verdict yet."""
    columns = st.container(key=CARDS_KEY).columns([3, 2, 2, 2, 2], border=True)
    columns[0].metric(f"Variant ({kind})", f"measuring {timed} of {planned}",
                      help="Variants timed so far of those planned: the answer follows once "
                           "every variant's latency is measured (this page updates itself).")
    for column, title in zip(columns[1:], ("Speed-up (p50)", "Accuracy change", "Size",
                                           "Peak memory")):
        column.metric(title, DASH, "measuring", delta_color="off", delta_arrow="off")
    st.caption(f"Measuring: {timed} of {planned} variants timed. The answer comes when the "
               f"run ends.")
