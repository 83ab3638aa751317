"""Text data sets for the language models: the embedded default with its provenance, a file
or folder, fixed windows (overlapping ones score each token once), seeded splits like the
images', and one line for each bad input."""

from __future__ import annotations

import hashlib
import platform

import pytest
import torch

from benchmarks.zoo.text import (MAX_TEXT_BYTES, MIN_WINDOWS, SPLITS, TEXT_SPLIT_SEED,
                                 WindowSpec, cut_windows, embedded_text, is_text_dataset,
                                 load_text, load_text_windows, text_splits)
from benchmarks.zoo.tokens import ByteTokenizer

BYTES = ByteTokenizer()


def windows(name, length=64, stride=None, seed=0, max_windows=None, context=512):
    return load_text_windows(name, BYTES, context, "tiny-lm", WindowSpec(length, stride), seed,
                             max_windows)


def test_the_embedded_text_is_pythons_own_prose_with_its_hash():
    source = embedded_text()
    assert source.name == "text" and len(source.text) > 100_000
    record = source.provenance
    assert record["package"] == "python" and record["version"] == platform.python_version()
    assert record["file"] == "pydoc_data/topics.py"
    assert record["sha256"] == hashlib.sha256(source.text.encode()).hexdigest()
    assert record["characters"] == len(source.text)
    assert "operator" in source.text  # English about Python
    assert load_text("text").provenance == record  # the same text on every load


def test_a_file_or_a_folder_of_text(tmp_path):
    (tmp_path / "b.txt").write_text("second " * 50)
    (tmp_path / "a.txt").write_text("first " * 50)
    (tmp_path / "notes.md").write_text("not read")
    folder = load_text(f"text:{tmp_path}")
    assert folder.text.startswith("first ") and "second" in folder.text
    assert "not read" not in folder.text and folder.provenance["files"] == 2
    one = load_text(f"text:{tmp_path / 'a.txt'}")
    assert one.text == "first " * 50 and one.provenance["files"] == 1
    assert is_text_dataset("text") and is_text_dataset("text:x") and not is_text_dataset("digits")


def test_windows_are_fixed_recorded_and_split_three_ways():
    w = windows("text", length=64)
    assert w.ids.shape[1] == 64 and w.ids.dtype == torch.int64
    assert len(w) == w.tokens // 64  # disjoint: every whole window
    assert bool(w.scored.all())
    stream = torch.tensor(BYTES.encode(embedded_text().text))
    assert torch.equal(w.ids[3], stream[3 * 64:4 * 64])
    card = w.card()
    assert card["window"] == 64 and card["stride"] == 64 and card["split_seed"] == 0
    assert card["calibration_seed"] == TEXT_SPLIT_SEED
    assert card["provenance"]["sha256"] == embedded_text().provenance["sha256"]
    assert card["tokenizer"] == {"kind": "bytes", "vocab_size": 256}
    every = sorted(i for s in SPLITS for i in w.splits[s])
    assert every == list(range(len(w)))  # each window in exactly one split
    assert all(len(w.splits[s]) for s in SPLITS)
    ids, scored = w.part("certify")
    assert torch.equal(ids, w.ids[list(w.splits["certify"])]) and scored.shape == (len(ids), 63)
    batches = list(w.batches("calibration", 4))
    assert torch.equal(torch.cat([b for b, _ in batches]), w.part("calibration")[0])
    assert all(len(b) <= 4 for b, _ in batches) and len(batches[0][0]) == 4
    with pytest.raises(ValueError, match="unknown split 'train'"):
        w.part("train")


def test_the_search_and_certify_windows_follow_the_seed_and_calibration_does_not():
    a, b, again = text_splits(40, 0), text_splits(40, 1), text_splits(40, 0)
    assert a == again
    assert a["calibration"] == b["calibration"]  # fixed whatever the run's seed
    assert a["certify"] != b["certify"]
    assert len(a["calibration"]) == 10 and len(a["certify"]) == 15 and len(a["search"]) == 15
    small = text_splits(MIN_WINDOWS, 0)
    assert all(len(small[s]) == 1 for s in SPLITS)


def test_overlapping_windows_score_each_token_once():
    ids, scored = cut_windows(list(range(20)), WindowSpec(8, 4))
    assert ids.tolist()[:2] == [list(range(8)), list(range(4, 12))]
    assert len(ids) == 4  # starts 0, 4, 8, 12
    # The first window scores all 7 predictions; later ones only the 4 new tokens'.
    assert scored[0].all() and scored[1].tolist() == [False] * 3 + [True] * 4
    targets = {int(t) for k in range(len(ids)) for t in ids[k, 1:][scored[k]]}
    assert targets == set(range(1, 20)) and int(scored.sum()) == 19  # each once


def test_a_window_budget_keeps_a_seeded_subset():
    full, cut = windows("text", 64), windows("text", 64, max_windows=12)
    assert len(cut) == 12 and torch.equal(cut.ids, windows("text", 64, max_windows=12).ids)
    rows = {tuple(r) for r in full.ids.tolist()}
    assert all(tuple(r) in rows for r in cut.ids.tolist())


def test_bad_text_input_is_one_line_each(tmp_path):
    binary = tmp_path / "blob.txt"
    binary.write_bytes(b"\x7fELF\x00\x01\x02" * 100)
    latin = tmp_path / "latin.txt"
    latin.write_bytes("caf\xe9 ".encode("latin-1") * 100)
    short = tmp_path / "short.txt"
    short.write_text("too short")
    few = tmp_path / "few.txt"
    few.write_text("x" * 130)  # two windows of 64: one short of three splits
    cases = [
        (f"text:{binary}", "is binary, not text"),
        (f"text:{latin}", "is not UTF-8 text"),
        (f"text:{short}", "is too short: 9 tokens, one window needs 64"),
        (f"text:{few}", "gives 2 window\\(s\\) of 64 tokens; calibration, search and certify"),
        (f"text:{tmp_path / 'absent.txt'}", "does not exist"),
        (f"text:{tmp_path / 'empty'}", "does not exist"),
        ("text:", "text:PATH needs its PATH"),
        ("texts", "unknown text data set"),
    ]
    for name, message in cases:
        with pytest.raises(ValueError, match=message) as raised:
            windows(name)
        assert "\n" not in str(raised.value)
    huge = tmp_path / "huge"
    huge.mkdir()
    with open(huge / "big.txt", "wb") as f:
        f.truncate(MAX_TEXT_BYTES + 1)  # sparse: refused by its size, never read
    with pytest.raises(ValueError, match="holds 256 MB; at most 256 MB of text are read"):
        windows(f"text:{huge}")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no .txt files"):
        windows(f"text:{tmp_path / 'empty'}")
    with pytest.raises(ValueError, match="a window of 1024 tokens is longer than tiny-lm's "
                                         "context \\(512 tokens\\)"):
        windows("text", length=1024)
    with pytest.raises(ValueError, match="window stride must be between 1 and"):
        WindowSpec(64, 65)
    with pytest.raises(ValueError, match="window length must be"):
        WindowSpec(1)


def test_the_search_and_certify_windows_are_recommends_split_of_the_evaluation_windows():
    from benchmarks.recommend.split import Split
    w = windows("text", 64, seed=3)
    record = w.search_certify()
    split = Split.from_dict(record)  # validates: disjoint, covering the evaluation windows
    evaluation = w.evaluation()
    assert split.n == len(evaluation) == len(w) - len(w.splits["calibration"])
    assert [evaluation[i] for i in split.certify] == list(w.splits["certify"])
    assert [evaluation[i] for i in split.search] == list(w.splits["search"])
    assert split.seed == 3 and split.card()["certify_size"] == record["certify_size"]
