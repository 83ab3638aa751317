"""A language model's speed as its users measure it (tiny-lm, seconds): the decode loop is a
real greedy generation with the key/value cache, prefill and per-token decode are taken from
the clock per round, and peak memory counts the cache a longer prompt fills."""

from __future__ import annotations

import pytest
import torch

from benchmarks.measure.latency import Clock
from benchmarks.measure.lm_speed import (LMSpeed, fixed_prompt, generate_greedy,
                                         measure_lm_speed, measure_lm_speeds,
                                         peak_generation_bytes, time_round)
from benchmarks.measure.memory import state_bytes
from benchmarks.zoo.lm import build_lm
from benchmarks.zoo.text import WindowSpec, load_text_windows

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def lm():
    return build_lm("tiny-lm")


@pytest.fixture(scope="module")
def prompt(lm):
    w = load_text_windows("text", lm.tokenizer, lm.context, lm.name, WindowSpec(128),
                          max_windows=3)
    return fixed_prompt(w.ids, 64)


def test_the_decode_loop_is_greedy_generation(lm, prompt):
    ours = generate_greedy(lm.model, prompt, 12)
    with torch.inference_mode():
        theirs = lm.model.generate(prompt, max_new_tokens=12, do_sample=False, min_new_tokens=12)
    assert torch.equal(ours, theirs[:, prompt.shape[1]:])


class StepClock(Clock):
    """Every timed stretch takes 12 ms, whatever ran."""

    def start(self):
        return 0

    def stop(self, token) -> float:
        return 12.0


def test_a_round_is_one_prefill_and_decode_per_new_token(lm, prompt):
    prefill, decode = time_round(lm.model, prompt, 4, StepClock())
    assert prefill == 12.0 and decode == 3.0  # 12 ms over 4 new tokens


def test_measured_speed_keeps_its_samples_and_derives_figures(lm, prompt):
    speed = measure_lm_speed(lm.model, prompt, CPU, new_tokens=8, rounds=3, warmup=1)
    assert len(speed.prefill_ms) == len(speed.decode_ms) == 3
    assert all(ms > 0 for ms in speed.prefill_ms + speed.decode_ms)
    s = speed.summary()
    assert s["prompt_tokens"] == 64 and s["new_tokens"] == 8 and s["mode"] == "eager"
    assert s["tokens_per_s"] == pytest.approx(1000 / s["decode_ms_per_token"])
    assert s["prefill_tokens_per_s"] == pytest.approx(64_000 / s["prefill_ms"])
    assert s["peak_bytes"] > state_bytes(lm.model) and s["memory_method"] == "live_tensor_bytes"
    assert LMSpeed.from_dict(speed.to_dict()).summary() == s


def test_peak_memory_counts_the_cache_a_longer_prompt_fills(lm, prompt):
    short, _ = peak_generation_bytes(lm.model, prompt[:, :8], 4, CPU)
    long, _ = peak_generation_bytes(lm.model, prompt, 4, CPU)
    cfg = lm.model.config
    # Keys and values of 56 more positions, every layer, fp32: the least the cache grows.
    cache = 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * cfg.head_dim * 56 * 4
    assert long - short >= cache


def test_bad_speed_settings_are_one_line(lm, prompt):
    with pytest.raises(ValueError, match="a prompt of 512 tokens needs windows at least"):
        fixed_prompt(torch.zeros(2, 128, dtype=torch.int64), 512)
    with pytest.raises(ValueError, match="new tokens and rounds must be at least 1"):
        measure_lm_speed(lm.model, prompt, CPU, new_tokens=0)


def test_variants_are_timed_together_in_rotating_rounds(lm, prompt):
    """Each round visits every variant once, the first visited rotating; the calls say which
    ran when (a prefill is the call with the whole prompt)."""
    order = []

    def recording(name):
        def call(**kwargs):
            if kwargs["input_ids"].shape[1] > 1:
                order.append(name)
            return lm.model(**kwargs)
        return call
    models = {name: recording(name) for name in ("a", "b", "c")}
    speeds, timing = measure_lm_speeds(models, prompt, CPU, new_tokens=2, rounds=3, warmup=1,
                                       modes={"c": "compile"}, memory=False)
    assert order == ["a", "b", "c",                          # warm-up, each once
                     "a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert all(len(s.decode_ms) == len(s.prefill_ms) == 3 for s in speeds.values())
    assert speeds["c"].mode == "compile" and speeds["a"].mode == "eager"
    assert timing["method"] == "interleaved" and timing["variants_together"] == 3
