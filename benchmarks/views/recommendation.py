"""A recommendation as people read it: the certificate in a few lines, the candidates in
their order, and the search's trials as a Pareto chart (search-split accuracy change against
the objective's ratio) with the certified winner marked. Read from the stored block alone
(``ResultsStore.set_recommendation``), as its typed record (``recommend.record.Recommended``),
so the CLI, the HTML report and the dashboard say the same thing. Torch-free,
Streamlit-free."""

from __future__ import annotations

import math
from dataclasses import dataclass

import plotly.graph_objects as go

from benchmarks.recommend.certificate import Certificate, Tested
from benchmarks.recommend.record import Recommended
from benchmarks.report.stats import EXACT_BELOW, EXACT_TEST, SCORE_TEST, TEST_WORDS
from benchmarks.report.style import (
    BASELINE_COLOR,
    CHART_HEIGHT,
    FAILED_COLOR,
    FRONT_COLOR,
    VARIANT_COLOR,
    short,
)

WINNER_COLOR = "#ca8a04"
DASH = "—"
# In words a newcomer reads (the JSON keeps b, c, n and lower_pts): gained is b, images it
# got right where the baseline was wrong; lost is c, the reverse; checked is n.
CANDIDATE_COLUMNS = ("order", "candidate", "runs under", "search Δ pts", "search ratio",
                     "gained", "lost", "checked", "Δ pts [interval]", "worst case (pts)", "p",
                     "test", "verdict", "ratio [interval]")
# The test's short name and its reference (why it was chosen: the JSON's ``test_why``); the
# page shows the reference on hover, the text says ``stats.TEST_WORDS``.
TEST_SHORT = {EXACT_TEST: "exact", SCORE_TEST: "score"}
TEST_REFERENCES = {
    EXACT_TEST: "exact unconditional test of paired non-inferiority (Sidik 2003, Stat Med "
                "22:265-278), nuisance restricted as Berger and Boos 1994; used with fewer "
                "than 50 discordant pairs, where a score interval's size is not guaranteed",
    SCORE_TEST: "Tango's score test for paired proportions (Tango 1998, Stat Med "
                "17:891-908); used with 50 or more discordant pairs"}
ORDER_WORDS = {"speed": "slowest first",
               "search p-value at the margin": "in order of how likely they are to pass "
                                               "(their test on the search split)"}


def _interval(values, fmt: str = "{:+.2f}") -> str:
    return "-" if not values else "[" + ", ".join(fmt.format(v) for v in values) + "]"


def headline(rec: Recommended) -> str:
    """The one sentence: the winner with its margin, confidence and speed-up, or why none."""
    cert = rec.certificate
    if cert.winner is None:
        return f"no certified variant: {cert.reason or 'the search found none'}"
    return f"certified: {cert.reason}"


def _verdict(t: Tested, cert: Certificate) -> str:
    if t.certified:
        return "certified" + (" (winner)" if t.name == cert.winner else "")
    if t.tested:
        if cert.procedure == "fixed-sequence":
            return "failed: the sequence stops here"
        return f"not certified at its share of alpha ({t.level:.2g})" if t.level else \
            "not certified"
    after = cert.stopped_at is not None and t.order > cert.stopped_at
    return "not tested (after the stop)" if after else "not tested"


def _signed(value: float | None, why: str = "not tested") -> str:
    return f"{DASH} ({why})" if value is None else f"{value:+.2f}"


def _number(value, fmt: str, why: str = "not tested") -> str:
    return f"{DASH} ({why})" if value is None else format(value, fmt)


def candidate_rows(rec: Recommended) -> list[dict]:
    """The sequence as a table: each candidate's test on the certify split, in order."""
    cert = rec.certificate
    won = (rec.recipe or {}).get("runtime")
    rows = []
    for t in cert.candidates:
        timed = "not certified" if t.tested else "not tested"
        ratio = f"{DASH} ({timed})" if t.ratio is None else \
            f"{t.ratio:.2f}x " + _interval(t.ratio_ci, "{:.2f}")
        # Where it runs: its own runtime, else the winner's recipe's (eager included).
        runtime = t.runtime or (won if t.name == cert.winner else None) or _runtime_of(t.name)
        why = "not tested" if not t.tested else "not measured"
        rows.append({
            "order": t.order + 1, "candidate": t.name, "runs under": runtime,
            "search Δ pts": _signed(t.search_change_pts, "not measured"),
            "search ratio": _number(t.search_ratio, ".2f", "not timed") +
            ("x" if t.search_ratio is not None else ""),
            "gained": _number(t.b, "d", why), "lost": _number(t.c, "d", why),
            "checked": _number(t.n, "d", why),
            "Δ pts [interval]": f"{DASH} ({why})" if t.theta_pts is None
            else f"{t.theta_pts:+.2f} " + _interval(t.interval_pts),
            "worst case (pts)": _signed(t.lower_pts, why),
            # Rows stored before the exact test carry no p-value and no test: Tango's.
            "p": (f"{DASH} (stored without one)" if t.tested else f"{DASH} ({why})")
            if t.p_value is None else f"{t.p_value:.3g}",
            "test": f"{DASH} ({why})" if not t.tested else TEST_SHORT.get(t.test, t.test or
                                                                         "score"),
            "verdict": _verdict(t, cert) + "".join(f"; {risk_note(name, figures)}" for
                                                   name, figures in t.risks.items())
            + ("; " + "; ".join(t.notes) if t.notes else ""),
            "ratio [interval]": ratio})
    return rows


def _runtime_of(name: str) -> str:
    """A trial's runtime from its name (``recipe@runtime``; a bare recipe runs eagerly)."""
    return name.rsplit("@", 1)[1] if "@" in name else "eager"


def risk_note(name: str, figures: dict) -> str:
    """One risk's test of a candidate, in a reader's words."""
    if figures.get("missing"):
        return f"{name}: not testable (its data are missing)"
    if name == "agreement":
        return (f"agreement {100 * figures['estimate']:.2f}% (at least "
                f"{100 * figures['lower']:.2f}%, p={figures['p']:.3g})")
    if name == "latency":
        upper = figures.get("upper_ms")
        return (f"p{100 * figures['quantile']:g} latency {figures['estimate_ms']:.3g} ms "
                f"(at most {upper:.3g} ms" if upper is not None else
                f"p{100 * figures['quantile']:g} latency {figures['estimate_ms']:.3g} ms "
                f"(too few calls to bound it") + f", p={figures['p']:.3g})"
    if name == "nll":
        return (f"NLL increase {figures['estimate']:+.4f} per token (at most "
                f"{figures['upper']:+.4f}, p={figures['p']:.3g})")
    return f"{name}: p={figures.get('p', 1):.3g}"


def certificate_caption(rec: Recommended) -> str:
    """What the certificate's table is, in a newcomer's words (Markdown)."""
    cert = rec.certificate
    order = ORDER_WORDS.get(cert.order_basis, cert.order_basis)
    if cert.procedure == "fixed-sequence":
        how = (f"checked one by one on the unseen half, {order} (an order fixed before the "
               f"check, so the confidence holds for all of them); the first that fails ends it")
    else:
        how = (f"checked on the unseen half, {order}, each with a share of the error rate "
               f"that a certified one passes on, so one that fails does not stop the others "
               f"and the confidence holds for all of them")
    return (f"**The certificate**: the best variants of the search, {how}. *gained* and "
            f"*lost*: images it got right where the baseline was wrong, and the reverse; "
            f"*worst case*: the accuracy change it is certified not to fall below; *test*: "
            f"{TEST_WORDS[EXACT_TEST]} or {TEST_WORDS[SCORE_TEST]} (the reference on hover).")


COLUMN_HELP = {
    "test": "; ".join(f"{TEST_SHORT[t]}: {TEST_REFERENCES[t]}" for t in TEST_REFERENCES),
    "worst case (pts)": "the one-sided lower limit of the accuracy change at the share of the "
                        "error rate the candidate was tested at: certified when above -margin",
    "p": "the largest p-value of the candidate's risks: certified when below its share of "
         "alpha",
    "runs under": "the runtime the candidate was scored and timed under (eager: PyTorch as "
                  "loaded)",
}


def sequence_line(rec: Recommended) -> str:
    """How many candidates were tested, in which order, by which procedure, and where a
    fixed sequence stopped."""
    cert = rec.certificate
    order = ORDER_WORDS.get(cert.order_basis, cert.order_basis)
    tested = sum(1 for t in cert.candidates if t.tested)
    if cert.procedure == "fixed-sequence":
        return (f"{len(cert.candidates)} candidate(s) tested {order}"
                + (f", the sequence stopped at #{cert.stopped_at + 1}"
                   if cert.stopped_at is not None else ", none failed"))
    from benchmarks.recommend.procedures import DESCRIPTIONS
    return (f"{tested} candidate(s) tested {order}, by the {cert.procedure} procedure: "
            f"{DESCRIPTIONS.get(cert.procedure, '')}; {len(cert.certified)} certified")


def summary_lines(rec: Recommended, environment: dict | None = None) -> list[str]:
    """What the CLI prints and the report shows above the table; with the run's
    ``environment``, why nothing faster was certified names the CPU's INT8 roof too."""
    cert, split = rec.certificate, rec.split
    lines = [headline(rec),
             f"margin {cert.margin_pts:g} points ({cert.margin}), confidence "
             f"{cert.confidence:.0%} (alpha {1 - cert.confidence:.2g}, one error rate "
             f"for the whole sequence), objective {cert.objective}"
             + (f", measured on {cert.device}" if cert.device else ""),
             f"split seed {split.seed}: {split.search_size} search / "
             f"{split.certify_size} certify of {split.test_examples} test examples; "
             f"the smallest margin this certify split can certify: "
             f"{cert.smallest_margin_pts or 0:.2f} points",
             f"search: {len(rec.trials)} trials ({len(rec.measured)} measured, "
             f"{len(rec.pruned)} pruned early, "
             f"{sum(1 for t in rec.trials if t.reused)} reused from earlier runs); ended: "
             f"{rec.ended or '-'}",
             sequence_line(rec)
             + ("" if rec.final_timing else "; speed from the search's rounds (no final timing)")
             + (f"; speed from run {rec.timing_from}'s final timing (this command's, "
                f"replayed with its search)" if rec.timing_from else "")]
    if len(rec.runtimes) > 1:
        won = (rec.recipe or {}).get("runtime")
        lines.append(f"runtimes searched: {', '.join(rec.runtimes)} (each trial scored and timed "
                     f"from its runtime's own outputs)"
                     + (f"; the winner runs under {won}" if won else ""))
    whys = which_tests(cert.candidates)
    if whys:
        lines.append("test: " + "; ".join(whys) + " (the worst case is above -margin exactly "
                     "when p is below the candidate's share of alpha)")
    for risk in cert.risks:
        if risk.get("name") != "accuracy":
            from benchmarks.recommend.risks import Risk
            lines.append(f"also certified: {Risk.from_dict(risk).words()} (each candidate "
                         f"passes only when every risk's test does)")
    if cert.not_faster:
        names = ", ".join(f"{t['name']} ({t['search_ratio']:.2f}x)" if t.get("search_ratio")
                          else t["name"] for t in cert.not_faster)
        lines.append(f"not faster, not tested: {names}: their search speed-up was not above "
                     f"{cert.min_speedup or 1:g}x beyond its noise")
    beyond = faster_outside(rec)
    if beyond:
        lines.append(beyond)
    lines += not_certified(rec)
    roof = int8_roof(rec, environment)
    if roof:
        lines.append(roof)
    if rec.stopped:
        lines.append(f"stopped: {rec.stopped}; the certificate covers what was found")
    if rec.recipe:
        lines.append(f"recipe: {rec.recipe['command']}")
    return lines


def faster_outside(rec: Recommended) -> str | None:
    """Why nothing faster was recommended: the fastest trial the search measured, where it
    was faster than the winner (or than the baseline, with no winner) and lost more accuracy
    on the search split than the margin allows."""
    cert = rec.certificate
    trials = [t for t in rec.measured
              if t.ratio is not None and t.search_change_pts is not None]
    winner = next((t for t in trials if t.name == cert.winner), None)
    floor = winner.ratio if winner is not None else 1.0
    outside = [t for t in trials if t.ratio > floor and t.search_change_pts < -cert.margin_pts]
    if not outside:
        return None
    fastest = max(outside, key=lambda t: (t.ratio, t.name))
    return (f"faster, outside the margin: {fastest.name} at {fastest.ratio:.2f}x in the "
            f"search lost {-fastest.search_change_pts:.2f} points on the search split "
            f"(the margin: {cert.margin_pts:g})")


def not_certified(rec: Recommended) -> list[str]:
    """Why a faster candidate was not the answer: the one whose test failed, with what it
    lost on the certify split and its worst case against the margin, and how many faster
    candidates after it were never tested (the sequence ends at its first failure)."""
    cert = rec.certificate
    if cert.procedure != "fixed-sequence":
        return _not_certified_each(rec)
    failed = next((t for t in cert.candidates if t.tested and not t.certified), None)
    if failed is None or failed.theta_pts is None:
        return []
    ratio = failed.search_ratio
    speed = f" ({ratio:.2f}x in the search)" if ratio is not None else ""
    line = (f"faster, not certified: {failed.name}{speed} changed accuracy by "
            f"{failed.theta_pts:+.2f} points on the certify split, worst case "
            f"{failed.lower_pts:+.2f}: beyond the {cert.margin_pts:g}-point margin")
    after = [t for t in cert.candidates if t.order > failed.order]
    if after:
        line += (f"; {len(after)} candidate{'s' if len(after) != 1 else ''} after it "
                 f"{'were' if len(after) != 1 else 'was'} not tested (the sequence ends at "
                 f"its first failure, which is what keeps one error rate for all)")
    return [line]


def _not_certified_each(rec: Recommended) -> list[str]:
    """A procedure that goes on past a failure: each candidate faster than the winner (all,
    with none) that was tested and not certified, with what it missed by."""
    cert = rec.certificate
    winner = next((t for t in cert.candidates if t.name == cert.winner), None)
    floor = (winner.search_ratio or 0) if winner is not None else 0
    lines = []
    for t in sorted(cert.candidates, key=lambda t: -(t.search_ratio or 0)):
        if not t.tested or t.certified or (t.search_ratio or 0) <= floor:
            continue
        speed = f" ({t.search_ratio:.2f}x in the search)" if t.search_ratio else ""
        why = []
        if t.lower_pts is not None and t.lower_pts <= -cert.margin_pts:
            why.append(f"changed accuracy by {t.theta_pts:+.2f} points on the certify split, "
                       f"worst case {t.lower_pts:+.2f}: beyond the {cert.margin_pts:g}-point "
                       f"margin")
        why += [risk_note(name, figures) for name, figures in t.risks.items()
                if figures.get("missing") or figures.get("p", 1) >= (t.level or 0)]
        lines.append(f"faster, not certified: {t.name}{speed} "
                     + ("; ".join(why) or f"p={t.p_value:.3g} is not below its share of "
                                          f"alpha, {t.level:.2g}"))
    return lines


def int8_roof(rec: Recommended, environment: dict | None) -> str | None:
    """Where INT8 was among the candidates on a CPU: its theoretical roof against fp32's on
    this instruction set (``measure.theory``), which bounds what INT8 alone can buy here."""
    names = [t.name for t in rec.certificate.candidates]
    theory = (((environment or {}).get("peaks") or {}).get("cpu") or {}).get("theoretical")
    if not theory or not any("int8" in name for name in names):
        return None
    rates = theory.get("gemm_flops_per_s") or {}
    if not rates.get("fp32") or not rates.get("int8"):
        return None
    how = (theory.get("derivation") or {}).get("int8", "")
    how = how.split(": ", 1)[-1] if how else ""
    return (f"INT8's roof on this CPU ({theory.get('isa') or 'its instruction sets'}): "
            f"{rates['int8'] / rates['fp32']:.1f}x fp32's" + (f", {how}" if how else "")
            + "; no INT8 variant gains more than that from its arithmetic here")


def table_text(rec: Recommended) -> str:
    rows = candidate_rows(rec)
    if not rows:
        return "(no candidates)"
    cells = [[str(r[c]) for c in CANDIDATE_COLUMNS] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells))
              for i, c in enumerate(CANDIDATE_COLUMNS)]
    out = ["  ".join(c.ljust(w) for c, w in zip(CANDIDATE_COLUMNS, widths))]
    out += ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in cells]
    return "\n".join(out)


def trials_figure(rec: Recommended) -> go.Figure:
    """Every measured trial: its accuracy change on the search split against its objective
    ratio; the front in green, the margin dashed, the certified winner a star."""
    cert = rec.certificate
    trials = [t for t in rec.measured if t.ratio is not None]
    certified = {t.name for t in cert.certified}
    fig = go.Figure()
    groups = (("trial", lambda t: not t.front, VARIANT_COLOR, "circle", 8),
              ("front", lambda t: t.front and t.name not in certified, FRONT_COLOR,
               "circle", 10),
              ("certified", lambda t: t.name in certified and t.name != cert.winner,
               FRONT_COLOR, "diamond", 12),
              ("certified winner", lambda t: t.name == cert.winner, WINNER_COLOR,
               "star", 18))
    for label, pick, color, symbol, size in groups:
        chosen = [t for t in trials if pick(t)]
        if not chosen:
            continue
        fig.add_trace(go.Scatter(
            x=[t.ratio for t in chosen], y=[t.search_change_pts for t in chosen],
            mode="markers+text" if label == "certified winner" else "markers", name=label,
            text=[short(t.name) for t in chosen] if label == "certified winner" else None,
            textposition="top center", hovertext=[t.name for t in chosen],
            marker=dict(color=color, symbol=symbol, size=size,
                        line=dict(width=1, color="#111827"))))
    if rec.pruned:
        fig.add_annotation(text=f"{len(rec.pruned)} pruned early (successive halving)",
                           xref="paper", yref="paper", x=1, y=0, showarrow=False,
                           font=dict(color=FAILED_COLOR, size=11))
    fig.add_hline(y=-cert.margin_pts, line_dash="dash", line_color=FAILED_COLOR,
                  annotation_text=f"-{cert.margin_pts:g} pts (the margin)")
    fig.add_vline(x=1.0, line_dash="dot", line_color=BASELINE_COLOR,
                  annotation_text="baseline")
    fig.update_layout(title="The search's trials (search split) and the certified winner",
                      height=CHART_HEIGHT + 60, margin=dict(l=10, r=10, t=40, b=10),
                      legend=dict(orientation="h", y=-0.25))
    fig.update_xaxes(title=f"{cert.objective} ratio to the baseline (higher: better)")
    fig.update_yaxes(title="accuracy change on the search split (points)")
    return fig


def which_tests(candidates: list[Tested]) -> list[str]:
    """Which paired test judged the tested candidates: once per test, with how many it judged
    and the rule that chose it (each candidate's own reason, with its count of discordant
    pairs, is in the JSON; the table shows b and c)."""
    tested = [t for t in candidates if t.test]
    out = []
    for test in sorted({t.test for t in tested}, key=lambda name: name != EXACT_TEST):
        mine = [t for t in tested if t.test == test]
        whys = {t.test_why or "" for t in mine}
        if all(f"< {EXACT_BELOW})" in why for why in whys):
            why = (f"fewer than {EXACT_BELOW} images where it and the baseline differ: the "
                   f"score interval's size is not guaranteed there")
        elif all(f">= {EXACT_BELOW})" in why for why in whys):
            why = (f"{EXACT_BELOW} or more images where it and the baseline differ: its normal "
                   f"approximation holds")
        else:
            why = "; ".join(sorted(whys - {""}))
        out.append(f"{TEST_WORDS.get(test, test)} for {len(mine)} of {len(tested)}"
                   + (f" ({why})" if why else ""))
    return out


@dataclass(frozen=True)
class NextStep:
    """What to try when nothing was certified: a new recommendation with ``changes`` to the
    request, said as a button's ``label`` and its ``why``."""
    key: str
    label: str
    why: str
    changes: dict


# A new look at the same test examples draws a new split: the certify half that judged this
# run does not also choose the next one's margin or candidates alone.
def next_steps(rec: Recommended) -> list[NextStep]:
    """The next steps when nothing was certified (none otherwise): more trials; the margin
    the data could certify for the candidate closest to passing; testing the candidates that
    were not tested (an earlier fixed sequence's stop, a cut run). Each a new recommendation
    on a new split seed (``changes`` to its request)."""
    cert, request = rec.certificate, rec.request or {}
    if cert.winner is not None or not rec.asked_again:
        return []
    seed = int(request.get("split_seed") or 0) + 1
    steps = []
    trials = int(request.get("trials") or len(rec.trials) or 8)
    steps.append(NextStep("trials", f"Search {2 * trials} trials",
                          f"twice the trials: the search may find candidates that pass (a new "
                          f"split, seed {seed})", {"trials": 2 * trials, "split_seed": seed}))
    tested = [t for t in cert.candidates if t.tested and t.lower_pts is not None]
    if tested:
        best = max(tested, key=lambda t: (t.search_ratio or 0, t.name))
        closest = min(tested, key=lambda t: (-(t.lower_pts or -100), t.order))
        pick = closest if best.lower_pts <= -50 else best
        margin = max(0.1, math.ceil(-pick.lower_pts * 10 + 1e-9) / 10)
        if margin <= 50 and margin > cert.margin_pts:
            steps.append(NextStep(
                "margin", f"Certify within {margin:g}pt",
                f"the margin {pick.name}'s worst case here ({pick.lower_pts:+.2f} points) "
                f"would pass; a new recommendation on a new split (seed {seed})",
                {"within": f"{margin:g}pt", "split_seed": seed}))
    untested = [t for t in cert.candidates if not t.tested]
    if untested:
        fastest = max(untested, key=lambda t: (t.search_ratio or 0, t.name))
        steps.append(NextStep(
            "untested", f"Certify {fastest.name} and the other untested",
            f"{len(untested)} candidate{'s' if len(untested) != 1 else ''} never tested here; "
            f"the graphical procedure tests every one (a new split, seed {seed})",
            {"split_seed": seed}))
    if not cert.candidates and cert.not_faster and (cert.min_speedup or 1) > 1:
        steps.append(NextStep(
            "slower", "Count smaller speed-ups (1.0x)",
            f"{len(cert.not_faster)} candidate(s) within the margin were not faster than "
            f"{cert.min_speedup:g}x beyond noise", {"min_speedup": 1.0, "split_seed": seed}))
    return steps

