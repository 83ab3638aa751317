"""``make perf``'s targets hold on any machine: each is a ratio of two things measured side by
side in one run, or keyed to the instruction set it needs and skipped, with a line, on a CPU
without it. A threshold in seconds would test the machine, not the product."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from helpers import ROOT
from tools.checks import (
    ABSOLUTE_TIME,
    SHOWN_FLAGS,
    check,
    check_isa,
    check_ratio,
    check_rows,
    cpu_card,
    unmet,
)

PERF_TOOLS = sorted([*ROOT.glob("tools/perf*.py"), ROOT / "tools" / "gpu_check.py"])
# Where each row maker takes its threshold: (position, keyword).
THRESHOLD = {"check": (2, "target"), "check_isa": (3, "target")}


def _literal(node: ast.AST) -> str | None:
    """A threshold's text as the source writes it ({} where an f-string fills a value in);
    None where it is not written in place (a name, a call)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    if isinstance(node, ast.IfExp):  # either branch may be the target: both are read
        body, orelse = _literal(node.body), _literal(node.orelse)
        return None if body is None or orelse is None else f"{body} | {orelse}"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal(node.left), _literal(node.right)
        return None if left is None or right is None else left + right
    return None


def _thresholds(path: Path) -> list[tuple[int, str | None]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
        if name not in THRESHOLD:
            continue
        position, keyword = THRESHOLD[name]
        arg = (node.args[position] if len(node.args) > position else
               next((k.value for k in node.keywords if k.arg == keyword), None))
        found.append((node.lineno, None if arg is None else _literal(arg)))
    return found


def test_no_perf_target_is_a_number_of_seconds():
    """Walk every target the perf tools write (the threshold of each check and check_isa;
    check_ratio's is a ratio by construction): none is an absolute time."""
    table = {f"{path.name}:{line}": text for path in PERF_TOOLS
             for line, text in _thresholds(path)}
    assert len(table) > 40, table  # the walk found the table, not nothing
    unread = [where for where, text in table.items() if text is None]
    assert not unread, f"thresholds not written in place, so not checked here: {unread}"
    in_seconds = {where: text for where, text in table.items() if ABSOLUTE_TIME.search(text)}
    assert not in_seconds, in_seconds


@pytest.mark.parametrize("threshold", ["<= 3 s", "<= 90 s", "within 60 s", "<= 1.5 s",
                                       "<= 2 seconds", "< 5 min", "<= {} s"])
def test_a_threshold_in_seconds_is_refused(threshold):
    with pytest.raises(ValueError, match="is a time"):
        check("a page", "2.1 s", threshold, True)


@pytest.mark.parametrize("threshold", ["<= 1.5", "<= 20%", "within 1 pt", ">= 3.0x",
                                       "0.90-1.10", "within 7% of the median", "(no target)"])
def test_ratios_and_shares_are_targets(threshold):
    assert check("a ratio", 1.0, threshold, True)["ok"]


def test_a_ratio_names_its_floor_and_fails_above_it():
    row = check_ratio("first page", 4.6, 2.8, 1.75, "a one-button app's")
    assert row["target"] == "first page / a one-button app's"
    assert row["threshold"] == "<= 1.75" and row["measured"].startswith("1.64 (4.60 s")
    assert row["ok"]
    assert not check_ratio("first page", 6.0, 2.8, 1.75, "a one-button app's")["ok"]


def test_a_target_keyed_to_an_instruction_set_is_skipped_without_it():
    avx2 = {"avx2", "fma", "sse4_2"}
    row = check_isa("VNNI or AMX", "static INT8 speed-up", "2.70x", ">= 3.0x", False,
                    flags=avx2)
    assert row["skipped"] == "needs VNNI or AMX (this CPU: AVX2)"
    assert not unmet({"resnet": {"checks": [row]}})  # skipped is neither met nor missed
    assert "| skipped: needs VNNI or AMX (this CPU: AVX2) |" in check_rows("resnet",
                                                                         {"checks": [row]})[0]
    # With the instruction set the target is judged, and a miss is a miss.
    judged = check_isa("VNNI or AMX", "static INT8 speed-up", "2.70x", ">= 3.0x", False,
                       flags=avx2 | {"amx_int8", "amx_tile", "avx512f"})
    assert "skipped" not in judged
    assert unmet({"resnet": {"checks": [judged]}}) == ["static INT8 speed-up"]


def test_figures_by_hand_hold_on_the_kind_of_cpu_they_were_measured_on():
    from tools.perf_runtimes import HAND, TARGET_SHARE, best_against_hand
    amx = {"avx2", "avx512f", "avx512_vnni", "amx_int8", "amx_tile"}
    row = best_against_hand("b32 3x64x64", 1.0, "openvino", flags=amx)
    assert row["skipped"] == "threshold measured on AVX2 CPUs only (this CPU: AMX)"
    slow = best_against_hand("b32 3x64x64", 1.0, "openvino", flags={"avx2", "fma"})
    assert "skipped" not in slow and not slow["ok"]
    fast = best_against_hand("b32 3x64x64", TARGET_SHARE * HAND["AVX2"]["b32 3x64x64"],
                             "openvino", flags={"avx2", "fma"})
    assert fast["ok"]


def test_the_generated_doc_records_the_cpu_its_instruction_sets_and_the_load():
    from tools.perf import machine_lines
    card = cpu_card()
    assert card["model"] and set(card["isa"]) <= set(SHOWN_FLAGS)
    assert card["load"] is None or len(card["load"]) == 3
    line = machine_lines({**card, "load_start": [1.5, 2.0, 2.5], "load_end": [3.0, 2.0, 1.0],
                          "isa": ["avx2", "fma"], "isa_class": "AVX2"})[0]
    assert f"CPU: {card['model']}" in line
    assert "instruction sets: avx2, fma (the widest: AVX2)" in line
    assert "at the start 1.5/2/2.5, at the end 3/2/1" in line


def test_a_reports_raw_figures_never_land_in_docs(tmp_path):
    """The full run's raw figures go to results/perf.json, a partial run's beside its report,
    except a report written into docs/: its raw figures (580 KB once) go to results/."""
    from tools.perf import DEFAULT_OUTPUT, raw_path
    assert raw_path(DEFAULT_OUTPUT) == ROOT / "results" / "perf.json"
    assert raw_path(ROOT / "docs" / "generated" / "PERFORMANCE_X.md") == \
        ROOT / "results" / "PERFORMANCE_X.json"
    assert raw_path(ROOT / "results" / "perf-only.md") == ROOT / "results" / "perf-only.json"
    assert raw_path(tmp_path / "mine.md") == tmp_path / "mine.json"
