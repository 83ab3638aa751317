"""How a language model's run reads its text and times its generations: the window the text
is cut into, how many windows are kept, and the generation each cell is timed on. Declared
with ``setting(...)`` like every config (the CLI's flags, their help and the checks come
from here); torch-free."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from benchmarks.spec.sweep import SweepSpec
from optimizers.settings import check_settings, setting

# The runtime modes a language model's cell runs in (``--runtime``): eager PyTorch, or the
# same module under torch.compile (Inductor), whose warm-up round compiles it.
LM_RUNTIMES = ("eager", "compile")


@dataclass(frozen=True)
class LMOptions:
    window: int = setting(
        256, "tokens per window the text is cut into (at most the model's context)",
        integer=True, low=8, high=32768, flag="--window")
    stride: int | None = setting(
        None, "tokens from one window's start to the next (less than the window: overlapping "
        "windows, each token scored once)", integer=True, low=1, high=32768, nullable=True,
        none_means="the window: disjoint windows", flag="--stride")
    max_windows: int | None = setting(
        64, "windows kept, a seeded subset the same for every variant (a quarter calibrate, "
        "the rest are scored)", integer=True, low=3, high=100_000, nullable=True,
        none_means="every window", flag="--max-windows")
    prompt_tokens: int = setting(
        128, "prompt tokens of the timed generation (its prefill)", integer=True, low=1,
        high=32768, flag="--prompt-tokens")
    new_tokens: int = setting(
        32, "tokens each timed generation decodes, greedy, at batch 1", integer=True, low=1,
        high=4096, flag="--new-tokens")

    def __post_init__(self):
        check_settings(self, "lm")
        if self.stride is not None and self.stride > self.window:
            raise ValueError(f"--stride {self.stride} is longer than --window {self.window}: "
                             f"text between windows would never be read")
        if self.prompt_tokens > self.window:
            raise ValueError(f"--prompt-tokens {self.prompt_tokens} is longer than --window "
                             f"{self.window}: the prompt is a window's first tokens")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class LMRequest:
    """A language model's run as a job's payload: its sweep (model, text, variants, runtime
    modes) and its options."""
    sweep: object       # SweepSpec
    options: LMOptions

    @classmethod
    def from_dict(cls, data: dict) -> "LMRequest":
        if not isinstance(data, dict) or not isinstance(data.get("sweep"), dict):
            raise ValueError("a language model's job needs its sweep")
        options = data.get("lm") or {}
        if not isinstance(options, dict):
            raise ValueError("a language model's job: lm must be its options")
        return cls(SweepSpec.from_dict(data["sweep"]), LMOptions(**options))

    def to_dict(self) -> dict:
        return {"sweep": self.sweep.to_dict(), "lm": self.options.to_dict()}
