"""A language model's quality, paired with its baseline on the same tokens.

Both models read the same windows (``benchmarks.zoo.text``) batch by batch, so every figure
of the variant is paired with the baseline's on the very same predictions:

- perplexity: exp of the mean negative log-likelihood (NLL) per scored token;
- the change in mean NLL per token (variant minus baseline; its exp is the perplexity ratio),
  with a percentile bootstrap interval over *windows* (tokens within a window are not
  independent: resampling tokens would make the interval far too narrow). The resamples are
  drawn from a seeded generator, so the same outcomes give the same interval;
- next-token top-1 accuracy of each, and the variant's agreement with the baseline's top-1,
  kept as paired per-window counts: their differences get the same bootstrap, and the windows
  on which one model is right more often than the other are the discordant pairs of a sign
  test (``discordant_windows``: the existing exact McNemar test, over windows);
- KL(baseline || variant) of the next-token distributions, per scored token: its mean and 99th
  percentile (a variant can match on average and still be far off on a few tokens).

Both runs are in one pass rather than the baseline's log-probabilities being stored: a
window's log-probabilities over SmolLM2's 49,152 tokens are 50 MB in fp32, and a rounded copy
would bias the small KLs of the mild variants. Logits are taken in fp32 whatever the model ran
in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from benchmarks.spec.cancel import StopCheck, check_stop

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
CONFIDENCE = 0.95
KL_QUANTILE = 0.99
# Logits of a batch: windows x positions x vocabulary fp32 values; a batch holds about this
# many bytes of them (SmolLM2 at 256 tokens: 5 windows a batch; tiny-lm: all of them).
BATCH_LOGIT_BYTES = 256 * 2**20


@dataclass
class WindowOutcomes:
    """One model's figures per window: summed NLL, scored tokens, top-1 hits."""
    nll: np.ndarray      # float64, per window
    tokens: np.ndarray   # int64, per window
    correct: np.ndarray  # int64, per window

    @property
    def mean_nll(self) -> float:
        return float(self.nll.sum() / self.tokens.sum())

    @property
    def perplexity(self) -> float:
        return float(np.exp(self.mean_nll))

    @property
    def accuracy(self) -> float:
        return float(self.correct.sum() / self.tokens.sum())

    def summary(self, seed: int = BOOTSTRAP_SEED, resamples: int = BOOTSTRAP_RESAMPLES,
                confidence: float = CONFIDENCE) -> dict:
        lo, hi = bootstrap_ratio_interval(self.nll, self.tokens, seed, resamples, confidence)
        return {"perplexity": self.perplexity, "perplexity_interval": [float(np.exp(lo)),
                                                                       float(np.exp(hi))],
                "mean_nll": self.mean_nll, "accuracy": self.accuracy,
                "tokens": int(self.tokens.sum()), "windows": len(self.tokens)}

    def to_dict(self) -> dict:
        return {"nll": self.nll.tolist(), "tokens": self.tokens.tolist(),
                "correct": self.correct.tolist()}

    @classmethod
    def from_dict(cls, data: dict) -> "WindowOutcomes":
        return cls(np.asarray(data["nll"], dtype=np.float64),
                   np.asarray(data["tokens"], dtype=np.int64),
                   np.asarray(data["correct"], dtype=np.int64))


@dataclass
class PairedOutcomes:
    """A variant and its baseline on the same windows, with what only a pair has."""
    baseline: WindowOutcomes
    variant: WindowOutcomes
    agree: np.ndarray    # int64 per window: predictions whose top-1 is the baseline's
    kl: np.ndarray       # float64 per window: summed KL(baseline || variant)
    kl_p99: float        # over every scored token (not recoverable from window sums)

    def __post_init__(self):
        if not np.array_equal(self.baseline.tokens, self.variant.tokens):
            raise ValueError("paired outcomes must score the same tokens of the same windows")

    @property
    def tokens(self) -> np.ndarray:
        return self.baseline.tokens

    def summary(self, seed: int = BOOTSTRAP_SEED, resamples: int = BOOTSTRAP_RESAMPLES,
                confidence: float = CONFIDENCE) -> dict:
        """The figures a run records: both perplexities, the NLL change and its interval,
        accuracies and agreement with intervals, KL's mean and p99, the bootstrap's terms."""
        boot = dict(seed=seed, resamples=resamples, confidence=confidence)
        tokens = self.tokens
        delta = self.variant.nll - self.baseline.nll
        d_lo, d_hi = bootstrap_ratio_interval(delta, tokens, **boot)
        acc = self.variant.correct - self.baseline.correct
        a_lo, a_hi = bootstrap_ratio_interval(acc, tokens, **boot)
        g_lo, g_hi = bootstrap_ratio_interval(self.agree, tokens, **boot)
        delta_nll = float(delta.sum() / tokens.sum())
        better, worse = discordant_windows(self)
        return {
            "baseline": self.baseline.summary(**boot), "variant": self.variant.summary(**boot),
            "delta_nll": delta_nll, "delta_nll_interval": [d_lo, d_hi],
            "perplexity_ratio": float(np.exp(delta_nll)),
            "perplexity_ratio_interval": [float(np.exp(d_lo)), float(np.exp(d_hi))],
            "nll_within_noise": bool(d_lo <= 0.0 <= d_hi),
            "delta_accuracy": float(acc.sum() / tokens.sum()),
            "delta_accuracy_interval": [a_lo, a_hi],
            "agreement": float(self.agree.sum() / tokens.sum()),
            "agreement_interval": [g_lo, g_hi],
            "kl_mean": float(self.kl.sum() / tokens.sum()), "kl_p99": self.kl_p99,
            "windows_variant_better": better, "windows_baseline_better": worse,
            "tokens": int(tokens.sum()), "windows": len(tokens),
            "bootstrap": {"over": "windows", **boot},
        }

    def to_dict(self) -> dict:
        return {"baseline": self.baseline.to_dict(), "variant": self.variant.to_dict(),
                "agree": self.agree.tolist(), "kl": self.kl.tolist(), "kl_p99": self.kl_p99}

    @classmethod
    def from_dict(cls, data: dict) -> "PairedOutcomes":
        return cls(WindowOutcomes.from_dict(data["baseline"]),
                   WindowOutcomes.from_dict(data["variant"]),
                   np.asarray(data["agree"], dtype=np.int64),
                   np.asarray(data["kl"], dtype=np.float64), float(data["kl_p99"]))


def bootstrap_ratio_interval(numerator: np.ndarray, denominator: np.ndarray,
                             seed: int = BOOTSTRAP_SEED, resamples: int = BOOTSTRAP_RESAMPLES,
                             confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Percentile interval of sum(numerator) / sum(denominator) over windows drawn with
    replacement (a ratio of sums: windows score different numbers of tokens)."""
    numerator = np.asarray(numerator, dtype=np.float64)
    denominator = np.asarray(denominator, dtype=np.float64)
    if len(numerator) == 0 or len(numerator) != len(denominator):
        raise ValueError("a bootstrap needs one numerator and one denominator per window")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1; got {confidence}")
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(numerator), size=(resamples, len(numerator)))
    ratios = numerator[picks].sum(axis=1) / np.maximum(denominator[picks].sum(axis=1), 1e-300)
    tail = (1 - confidence) / 2
    lo, hi = np.quantile(ratios, [tail, 1 - tail])
    return float(lo), float(hi)


def discordant_windows(paired: PairedOutcomes) -> tuple[int, int]:
    """(windows where the variant's top-1 is right more often, windows where the baseline's
    is): the discordant pairs of a sign test over windows (ties drop out), as the exact
    McNemar test takes them."""
    diff = paired.variant.correct - paired.baseline.correct
    return int((diff > 0).sum()), int((diff < 0).sum())


def logits_of(model: Callable, ids: torch.Tensor) -> torch.Tensor:
    """Next-token logits in fp32 for every position but the last: (b, t - 1, vocab)."""
    out = model(input_ids=ids, use_cache=False) if isinstance(model, torch.nn.Module) \
        else model(ids)
    logits = out.logits if hasattr(out, "logits") else out
    return logits[:, :-1].float()


def batch_size_for(length: int, vocab: int) -> int:
    return max(1, BATCH_LOGIT_BYTES // (4 * length * vocab))


def _check(ids: torch.Tensor, scored: torch.Tensor) -> None:
    if ids.dim() != 2 or scored.shape != (ids.shape[0], ids.shape[1] - 1):
        raise ValueError(f"windows must be (n, length) ids with (n, length - 1) scored flags; "
                         f"got {tuple(ids.shape)} and {tuple(scored.shape)}")
    if len(ids) == 0 or not bool(scored.any(dim=1).all()):
        raise ValueError("every window must score at least one token")


def _token_figures(logprobs: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor):
    """Per window: summed NLL, top-1 hits, and the top-1 predictions themselves."""
    nll = -logprobs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    top1 = logprobs.argmax(-1)
    return ((nll * mask).sum(1).double(), ((top1 == targets) & mask).sum(1), top1)


@torch.inference_mode()
def evaluate(model: Callable, ids: torch.Tensor, scored: torch.Tensor,
             batch_size: int | None = None, should_stop: StopCheck | None = None
             ) -> WindowOutcomes:
    """One model's per-window outcomes (its perplexity alone; no baseline); ``should_stop``
    asked between batches of windows (``Cancelled``)."""
    _check(ids, scored)
    nll, correct = [], []
    i, step = 0, batch_size or 1
    while i < len(ids):
        check_stop(should_stop)
        chunk, mask = ids[i:i + step], scored[i:i + step]
        i += len(chunk)
        logits = logits_of(model, chunk)
        if batch_size is None:  # sized from the first window's vocabulary
            batch_size = step = batch_size_for(ids.shape[1], logits.shape[-1])
        n, c, _ = _token_figures(torch.log_softmax(logits, -1), chunk[:, 1:], mask)
        nll.append(n)
        correct.append(c)
    return WindowOutcomes(torch.cat(nll).numpy(), scored.sum(1).numpy().astype(np.int64),
                          torch.cat(correct).numpy().astype(np.int64))


@torch.inference_mode()
def evaluate_pair(baseline: Callable, variant: Callable, ids: torch.Tensor,
                  scored: torch.Tensor, batch_size: int | None = None,
                  should_stop: StopCheck | None = None) -> PairedOutcomes:
    """The variant and its baseline on the same windows, batch by batch; ``should_stop``
    asked between batches (``Cancelled``: a pass of a real model is minutes)."""
    _check(ids, scored)
    figures: dict[str, list] = {k: [] for k in ("bn", "bc", "vn", "vc", "agree", "kl")}
    token_kl = []
    i, step = 0, batch_size or 1
    while i < len(ids):
        check_stop(should_stop)
        chunk, mask = ids[i:i + step], scored[i:i + step]
        i += len(chunk)
        targets = chunk[:, 1:]
        base = torch.log_softmax(logits_of(baseline, chunk), -1)
        if batch_size is None:
            batch_size = step = batch_size_for(ids.shape[1], base.shape[-1])
        bn, bc, btop = _token_figures(base, targets, mask)
        var = torch.log_softmax(logits_of(variant, chunk), -1)
        vn, vc, vtop = _token_figures(var, targets, mask)
        # KL(p || q) = sum p (log p - log q); rounding can leave -1e-7 where p == q.
        kl = (base.exp() * (base - var)).sum(-1).clamp_min(0.0)
        del base, var
        for key, value in (("bn", bn), ("bc", bc), ("vn", vn), ("vc", vc),
                           ("agree", ((vtop == btop) & mask).sum(1)),
                           ("kl", (kl * mask).sum(1).double())):
            figures[key].append(value)
        token_kl.append(kl[mask].double())
    cat = {k: torch.cat(v).numpy() for k, v in figures.items()}
    tokens = scored.sum(1).numpy().astype(np.int64)
    every_kl = torch.cat(token_kl).numpy()
    return PairedOutcomes(
        WindowOutcomes(cat["bn"], tokens, cat["bc"].astype(np.int64)),
        WindowOutcomes(cat["vn"], tokens.copy(), cat["vc"].astype(np.int64)),
        cat["agree"].astype(np.int64), cat["kl"], float(np.quantile(every_kl, KL_QUANTILE)))
