"""Text data sets for the language models: ``text`` (the embedded default) and ``text:PATH``
(a file, or a folder of ``.txt`` files), tokenised once with the model's tokenizer and cut into
fixed windows, split into calibration, search and certify windows.

The embedded default is the English technical prose every Python ships: the help topics of
``pydoc_data.topics`` (about 465,000 characters), joined in the order of their names. It
differs between Python versions, so its provenance records the version and the sha256 of the
text as used; a user's file or folder records its path, files and sha256 the same way.

Windows: ``length`` tokens each, starting every ``stride`` tokens (``stride == length``, the
default, cuts disjoint windows). Where windows overlap (``stride < length``) a window's first
``length - stride`` tokens are context only: just the predictions of tokens no earlier window
scored count (``TextWindows.scored``), so no token is scored twice. The first window scores
all its predictions.

Splits, like the image data sets': a fixed seeded permutation (``TEXT_SPLIT_SEED``) sets aside
the *calibration* windows (what calibration, Wanda's activations or fine-tuning may read), and
the rest are split by the run's recorded seed into *search* and *certify* windows, as
recommend's search and certify splits are of the test examples
(``benchmarks.recommend.split``). Tokens within a window are not independent, so every
interval is over windows (``benchmarks.measure.lm_quality``).
"""

from __future__ import annotations

import hashlib
import platform
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.spec.datasets import TEXT_PREFIX, is_text_dataset

if TYPE_CHECKING:
    import torch

EMBEDDED_FILE = "pydoc_data/topics.py"
DEFAULT_WINDOW = 256
TEXT_SPLIT_SEED = 0            # calibration vs evaluation is fixed, whatever the run's seed
CALIBRATION_FRACTION = 0.25    # of all windows
CERTIFY_FRACTION = 0.5         # of the evaluation windows
SPLITS = ("calibration", "search", "certify")
MIN_WINDOWS = len(SPLITS)      # one window each at least
SNIFF_BYTES = 8192             # a NUL byte this early says binary
# A text is held whole, with its tokens (a list of ints at first, 8 bytes a token at least):
# a few hundred MB of text already means gigabytes, and far more windows than a run scores.
MAX_TEXT_BYTES = 256 * 2**20


@dataclass(frozen=True)
class TextSource:
    name: str         # "text" or "text:PATH"
    text: str
    provenance: dict  # where it came from, its characters and sha256


@dataclass(frozen=True)
class WindowSpec:
    """How a token stream is cut: ``length`` tokens a window, a new one every ``stride``."""
    length: int = DEFAULT_WINDOW
    stride: int | None = None  # None: the length (disjoint windows)

    def __post_init__(self):
        if not isinstance(self.length, int) or self.length < 2:
            raise ValueError(f"window length must be a whole number of tokens, at least 2; "
                             f"got {self.length!r}")
        if self.stride is not None and (not isinstance(self.stride, int)
                                        or not 1 <= self.stride <= self.length):
            raise ValueError(f"window stride must be between 1 and the window's length "
                             f"({self.length}); got {self.stride!r}")

    @property
    def step(self) -> int:
        return self.length if self.stride is None else self.stride


def embedded_text() -> TextSource:
    """pydoc's help topics, every Python's own English prose, in the order of their names."""
    from pydoc_data.topics import topics
    text = "\n\n".join(topics[key] for key in sorted(topics))
    return TextSource(TEXT_PREFIX, text, {
        "package": "python", "version": platform.python_version(), "file": EMBEDDED_FILE,
        "topics": len(topics), "characters": len(text), "sha256": _sha256(text)})


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _read_text_file(path: Path) -> str:
    data = path.read_bytes()
    if b"\x00" in data[:SNIFF_BYTES]:
        raise ValueError(f"text file {path} is binary, not text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"text file {path} is not UTF-8 text (byte {exc.start} does not "
                         f"decode)") from None


def read_text_path(argument: str) -> TextSource:
    """A .txt file, or a folder's .txt files (recursively, in path order) joined by a blank
    line."""
    path = Path(argument).expanduser()
    if not path.exists():
        raise ValueError(f"text file or folder {path} does not exist")
    if path.is_dir():
        files = sorted(p for p in path.rglob("*.txt") if p.is_file())
        if not files:
            raise ValueError(f"text folder {path} holds no .txt files")
    else:
        files = [path]
    size = sum(f.stat().st_size for f in files)
    if size > MAX_TEXT_BYTES:
        raise ValueError(f"text {path} holds {size / 2**20:.0f} MB; at most "
                         f"{MAX_TEXT_BYTES // 2**20} MB of text are read: give a smaller file "
                         f"or folder")
    text = "\n\n".join(_read_text_file(f) for f in files)
    return TextSource(f"{TEXT_PREFIX}:{argument}", text, {
        "path": str(path.resolve()), "files": len(files), "characters": len(text),
        "sha256": _sha256(text)})


def load_text(name: str) -> TextSource:
    """``text`` (embedded) or ``text:PATH``; one line for any other name."""
    if not is_text_dataset(name):
        raise ValueError(f"unknown text data set {name!r}; give text (the embedded default) "
                         f"or text:PATH (a .txt file or a folder of them)")
    _, colon, argument = name.partition(":")
    if colon and not argument.strip():
        raise ValueError("text:PATH needs its PATH: a .txt file or a folder of them")
    return read_text_path(argument) if colon else embedded_text()


@dataclass
class TextWindows:
    """A text's windows of token ids and which predictions count, split three ways."""
    name: str
    ids: torch.Tensor      # (windows, length) int64
    scored: torch.Tensor   # (windows, length - 1) bool: prediction i (of token i + 1) counts
    spec: WindowSpec
    tokens: int            # the text's tokens in all
    splits: dict[str, tuple[int, ...]]
    split_seed: int
    provenance: dict = field(default_factory=dict)
    tokenizer: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def part(self, split: str) -> tuple[torch.Tensor, torch.Tensor]:
        """(ids, scored) of one split's windows, in window order."""
        if split not in self.splits:
            raise ValueError(f"unknown split {split!r}; one of {', '.join(SPLITS)}")
        idx = list(self.splits[split])
        return self.ids[idx], self.scored[idx]

    def batches(self, split: str, batch_size: int):
        """A split's windows in order, ``batch_size`` at a time: (ids, scored) pairs, what a
        calibration (or a pruning criterion's activations) reads, as a reader."""
        if batch_size < 1:
            raise ValueError(f"batch size must be at least 1; got {batch_size}")
        ids, scored = self.part(split)
        for i in range(0, len(ids), batch_size):
            yield ids[i:i + batch_size], scored[i:i + batch_size]

    def card(self) -> dict:
        """What a run records of its text: source, tokenizer, windows, split sizes, seed."""
        return {"name": self.name, "provenance": self.provenance, "tokenizer": self.tokenizer,
                "tokens": self.tokens, "window": self.spec.length, "stride": self.spec.step,
                "windows": len(self), "split_seed": self.split_seed,
                "calibration_seed": TEXT_SPLIT_SEED,
                **{f"{s}_windows": len(self.splits[s]) for s in SPLITS}}

    def to_dict(self) -> dict:
        return {**self.card(), "splits": {s: list(v) for s, v in self.splits.items()}}

    def evaluation(self) -> tuple[int, ...]:
        """The windows a variant is scored on (all but calibration's), ascending: the LM's
        test split."""
        return tuple(sorted(self.splits["search"] + self.splits["certify"]))

    def search_certify(self) -> dict:
        """The search and certify windows as recommend's split of a test split records them
        (``benchmarks.recommend.split.Split.from_dict``): indices into ``evaluation()``."""
        position = {w: i for i, w in enumerate(self.evaluation())}
        search = [position[w] for w in self.splits["search"]]
        certify = [position[w] for w in self.splits["certify"]]
        n = len(position)
        return {"seed": self.split_seed, "test_examples": n, "search_size": len(search),
                "certify_size": len(certify), "certify_fraction": round(len(certify) / n, 6),
                "search": search, "certify": certify}


def cut_windows(token_ids: list[int], spec: WindowSpec) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, scored): every whole window of ``spec`` over the token stream."""
    import torch
    stream = torch.tensor(token_ids, dtype=torch.int64)
    length, step = spec.length, spec.step
    count = (len(stream) - length) // step + 1 if len(stream) >= length else 0
    ids = stream.unfold(0, length, step)[:count].contiguous()
    scored = torch.ones(count, length - 1, dtype=torch.bool)
    if count > 1 and step < length:
        scored[1:, :length - step - 1] = False  # context an earlier window scored
    return ids, scored


def text_splits(n: int, seed: int, calibration_fraction: float = CALIBRATION_FRACTION,
                certify_fraction: float = CERTIFY_FRACTION) -> dict[str, tuple[int, ...]]:
    """Calibration windows by the fixed ``TEXT_SPLIT_SEED``, the rest into search and certify
    by ``seed``: each split ascending, together every window once."""
    if n < MIN_WINDOWS:
        raise ValueError(f"{n} window(s) cannot be split into calibration, search and certify "
                         f"windows; at least {MIN_WINDOWS} are needed")
    order = list(range(n))
    random.Random(TEXT_SPLIT_SEED).shuffle(order)
    k = min(n - 2, max(1, round(calibration_fraction * n)))
    calibration, rest = order[:k], sorted(order[k:])
    random.Random(seed).shuffle(rest)
    c = min(len(rest) - 1, max(1, round(certify_fraction * len(rest))))
    return {"calibration": tuple(sorted(calibration)), "search": tuple(sorted(rest[c:])),
            "certify": tuple(sorted(rest[:c]))}


def load_text_windows(name: str, tokenizer, context: int, model_name: str,
                      spec: WindowSpec | None = None, seed: int = 0,
                      max_windows: int | None = None) -> TextWindows:
    """The text data set ``name`` tokenised once with ``tokenizer``, cut by ``spec``, split.
    ``max_windows`` keeps a seeded subset (the same windows for every variant of a run)."""
    spec = spec or WindowSpec()
    if spec.length > context:
        raise ValueError(f"a window of {spec.length} tokens is longer than {model_name}'s "
                         f"context ({context} tokens); give a window of at most {context}")
    if max_windows is not None and max_windows < MIN_WINDOWS:
        raise ValueError(f"max windows must be at least {MIN_WINDOWS} (one per split); "
                         f"got {max_windows}")
    source = load_text(name)
    token_ids = tokenizer.encode(source.text)
    if len(token_ids) < spec.length:
        raise ValueError(f"{name} is too short: {len(token_ids)} tokens, one window needs "
                         f"{spec.length}")
    ids, scored = cut_windows(token_ids, spec)
    if len(ids) < MIN_WINDOWS:
        raise ValueError(f"{name} gives {len(ids)} window(s) of {spec.length} tokens; "
                         f"calibration, search and certify need {MIN_WINDOWS}: give more text "
                         f"or a shorter window")
    if max_windows is not None and len(ids) > max_windows:
        keep = sorted(random.Random(TEXT_SPLIT_SEED).sample(range(len(ids)), max_windows))
        ids, scored = ids[keep], scored[keep]
    return TextWindows(name, ids, scored, spec, len(token_ids), text_splits(len(ids), seed),
                       seed, source.provenance, tokenizer.card())
