"""A language model's speed and memory as its users measure them: prefill time for a fixed
prompt, decode time per token at batch 1 (greedy, a fixed number of new tokens, warm), tokens
per second, and the peak memory of one generation.

Prefill is one forward of the prompt that fills the key/value cache, as generation starts.
Decode is what follows: each step one token in, the cache extended, the argmax the next token
(greedy, so every variant's step does the same work whatever it predicts). A decode sample is
one generation's decode steps timed together, divided by the new tokens: the per-token cost
at the cache lengths a real generation goes through. Raw samples are kept (one per round) and
the figures derived from them, as the image models' latency is.

A round is one prefill sample and one decode sample (``time_round``): ``measure_lm_speeds``
interleaves the variants round by round, as the image models are timed, and
``measure_lm_speed`` runs the rounds of one variant alone. The prompt is a fixed slice of the text, the same ids for
every variant. The clock is ``benchmarks.measure.latency``'s: ``perf_counter`` on a CPU, CUDA
events on a GPU.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from benchmarks.measure.latency import Clock, CudaClock
from benchmarks.measure.memory import (CPU_MEMORY_METHOD, CUDA_MEMORY_METHOD, CudaAllocator,
                                       LiveTensorBytes, state_bytes)
from benchmarks.spec.cancel import StopCheck, check_stop

PROMPT_TOKENS = 128
NEW_TOKENS = 32
ROUNDS = 5
WARMUP_ROUNDS = 1


@dataclass
class LMSpeed:
    """One variant's raw samples and what they say."""
    prompt_tokens: int
    new_tokens: int
    prefill_ms: list[float] = field(default_factory=list)     # one per round
    decode_ms: list[float] = field(default_factory=list)      # per token, one per round
    peak_bytes: int | None = None
    memory_method: str | None = None
    mode: str = "eager"   # how the model ran: eager, compile (the runtime cell's name)

    def summary(self) -> dict:
        prefill = statistics.median(self.prefill_ms)
        decode = statistics.median(self.decode_ms)
        return {"mode": self.mode, "prompt_tokens": self.prompt_tokens,
                "new_tokens": self.new_tokens, "rounds": len(self.decode_ms),
                "prefill_ms": prefill,
                "prefill_tokens_per_s": 1000.0 * self.prompt_tokens / prefill,
                "decode_ms_per_token": decode, "tokens_per_s": 1000.0 / decode,
                "decode_ms_per_token_range": [min(self.decode_ms), max(self.decode_ms)],
                "peak_bytes": self.peak_bytes, "memory_method": self.memory_method}

    def to_dict(self) -> dict:
        return {"prompt_tokens": self.prompt_tokens, "new_tokens": self.new_tokens,
                "prefill_ms": list(self.prefill_ms), "decode_ms": list(self.decode_ms),
                "peak_bytes": self.peak_bytes, "memory_method": self.memory_method,
                "mode": self.mode}

    @classmethod
    def from_dict(cls, data: dict) -> "LMSpeed":
        return cls(**data)


def fixed_prompt(ids: torch.Tensor, prompt_tokens: int = PROMPT_TOKENS) -> torch.Tensor:
    """The first ``prompt_tokens`` of the first window: (1, prompt_tokens) ids."""
    if ids.dim() != 2 or ids.shape[1] < prompt_tokens:
        raise ValueError(f"a prompt of {prompt_tokens} tokens needs windows at least that "
                         f"long; the windows have {ids.shape[-1]} tokens")
    return ids[:1, :prompt_tokens].clone()


def _step(model: Callable, ids: torch.Tensor, cache=None):
    """One forward with the key/value cache: (the greedy next token (1, 1), the cache)."""
    out = model(input_ids=ids, past_key_values=cache, use_cache=True)
    return out.logits[:, -1:].argmax(-1), out.past_key_values


def generate_greedy(model: Callable, prompt: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """The new tokens of a greedy generation, by the steps the decode timing takes."""
    token, cache = _step(model, prompt)
    out = [token]
    for _ in range(new_tokens - 1):
        token, cache = _step(model, token, cache)
        out.append(token)
    return torch.cat(out, dim=1)


def time_round(model: Callable, prompt: torch.Tensor, new_tokens: int,
               clock: Clock | None = None) -> tuple[float, float]:
    """(prefill ms, decode ms per token) of one generation of ``new_tokens``."""
    clock = clock or Clock()
    with torch.inference_mode():
        clock.synchronize()
        start = clock.start()
        token, cache = _step(model, prompt)
        prefill = clock.stop(start)
        start = clock.start()
        for _ in range(new_tokens):
            token, cache = _step(model, token, cache)
        decode = clock.stop(start)
        resolved = clock.finish()
    if resolved is not None:  # a device clock: its events, read after the round
        prefill, decode = resolved
    return prefill, decode / new_tokens


def peak_generation_bytes(model: nn.Module, prompt: torch.Tensor, new_tokens: int,
                          device: torch.device) -> tuple[int, str]:
    """Weights + prompt + the peak of what one generation allocates on top (the cache, the
    activations): live tensor bytes on a CPU, the allocator's peak over resident on CUDA."""
    base = state_bytes(model) + prompt.numel() * prompt.element_size()
    if device.type == "cuda":
        import gc
        alloc = CudaAllocator(device)
        with torch.inference_mode():
            generate_greedy(model, prompt, new_tokens)  # warm: workspaces resident from here
            gc.collect()
            alloc.synchronize()
            before = alloc.allocated()
            alloc.reset_peak()
            generate_greedy(model, prompt, new_tokens)
            alloc.synchronize()
        return base + max(0, alloc.peak() - before), CUDA_MEMORY_METHOD
    tracker = LiveTensorBytes()
    with torch.inference_mode(), tracker:
        generate_greedy(model, prompt, new_tokens)
    return base + tracker.peak, CPU_MEMORY_METHOD


def measure_lm_speed(model: nn.Module, prompt: torch.Tensor, device: torch.device, *,
                     new_tokens: int = NEW_TOKENS, rounds: int = ROUNDS,
                     warmup: int = WARMUP_ROUNDS, mode: str = "eager",
                     memory: bool = True) -> LMSpeed:
    """One variant's prefill and decode samples (``rounds`` after ``warmup``) and peak memory.
    ``model`` runs as given (a compiled module is timed compiled: warm-up compiles it)."""
    if new_tokens < 1 or rounds < 1 or warmup < 0:
        raise ValueError(f"new tokens and rounds must be at least 1, warm-up at least 0; got "
                         f"{new_tokens}, {rounds}, {warmup}")
    prompt = prompt.to(device)
    clock = CudaClock() if device.type == "cuda" else Clock()
    for _ in range(warmup):
        time_round(model, prompt, new_tokens, clock)
    speed = LMSpeed(int(prompt.shape[1]), new_tokens, mode=mode)
    for _ in range(rounds):
        prefill, decode = time_round(model, prompt, new_tokens, clock)
        speed.prefill_ms.append(prefill)
        speed.decode_ms.append(decode)
    if memory:
        speed.peak_bytes, speed.memory_method = peak_generation_bytes(model, prompt,
                                                                      new_tokens, device)
    return speed


def measure_lm_speeds(models: dict[str, Callable], prompt: torch.Tensor, device: torch.device,
                      *, new_tokens: int = NEW_TOKENS, rounds: int = ROUNDS,
                      warmup: int = WARMUP_ROUNDS, modes: dict[str, str] | None = None,
                      memory: bool = True, should_stop: StopCheck | None = None
                      ) -> tuple[dict[str, LMSpeed], dict]:
    """Every variant timed together in interleaved rounds, as the image models are
    (``benchmarks.run.rounds``): each round visits every variant once, for one generation,
    the first visited rotating from round to round, so a noisy host's drift hits them alike.
    Each is warmed up first (compiled, for a compiled one). Returns (speed by name, the
    timing's record). ``should_stop`` is asked before each generation (``Cancelled``), never
    inside one: a check between tokens would be timed with them."""
    if new_tokens < 1 or rounds < 1 or warmup < 0:
        raise ValueError(f"new tokens and rounds must be at least 1, warm-up at least 0; got "
                         f"{new_tokens}, {rounds}, {warmup}")
    prompt = prompt.to(device)
    clock = CudaClock() if device.type == "cuda" else Clock()
    names = list(models)
    speeds = {name: LMSpeed(int(prompt.shape[1]), new_tokens,
                            mode=(modes or {}).get(name, "eager")) for name in names}
    for name in names:
        for _ in range(warmup):
            check_stop(should_stop)
            time_round(models[name], prompt, new_tokens, clock)
    for r in range(rounds):
        start = r % len(names)
        for name in names[start:] + names[:start]:
            check_stop(should_stop)
            prefill, decode = time_round(models[name], prompt, new_tokens, clock)
            speeds[name].prefill_ms.append(prefill)
            speeds[name].decode_ms.append(decode)
    if memory:
        for name in names:
            speeds[name].peak_bytes, speeds[name].memory_method = peak_generation_bytes(
                models[name], prompt, new_tokens, device)
    return speeds, {"method": "interleaved", "rounds": rounds, "variants_together": len(names),
                    "new_tokens": new_tokens, "prompt_tokens": int(prompt.shape[1])}
