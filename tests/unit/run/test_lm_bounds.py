"""A language model's sizes bounded before work starts (issue "a server that trusts nothing the
worker writes", item 7): the timed generation (prompt plus new tokens) within the model's
context; an ``hf:`` folder's parameters estimated from its config.json, torch-free, and a
model too big for the memory a job may use refused before torch builds it (the process's
peak RSS stays that of its imports); a tokenizer file far larger than any real one refused
before it is read. Each one line, exit 2 on the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from benchmarks.run.lm_runner import LMSweep
from benchmarks.spec.lm import LMOptions
from benchmarks.spec.sweep import SweepSpec
from benchmarks.zoo.hf_folder import MAX_TOKENIZER_BYTES, check_folder, parameter_count
from helpers import ROOT, run_cli, scaled

SMALL = ["--max-windows", "6", "--window", "32", "--prompt-tokens", "8", "--quiet"]
# One embedding of 1,000,000 x 8,192 fp32 values is 32 GB: more than this machine has, so
# even a loader that allocates it fails at once rather than filling the memory.
HUGE = {"model_type": "llama", "vocab_size": 1_000_000, "hidden_size": 8192,
        "num_hidden_layers": 2, "num_attention_heads": 64, "num_key_value_heads": 8,
        "intermediate_size": 28672, "max_position_embeddings": 4096,
        "tie_word_embeddings": False}


def hf_folder(path, config: dict):
    """A folder save_pretrained could have written: its config, and a valid safetensors file
    holding none of the model's tensors (a loader makes up every one at full size)."""
    import numpy as np
    from safetensors.numpy import save_file
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config))
    save_file({"unused": np.ones(4, np.float32)}, str(path / "model.safetensors"))
    return path


@pytest.mark.parametrize("tied", [True, False])
def test_the_estimate_from_a_config_is_the_models_parameter_count(tied):
    from transformers import LlamaConfig, LlamaForCausalLM
    config = {"model_type": "llama", "vocab_size": 300, "hidden_size": 64,
              "intermediate_size": 96, "num_hidden_layers": 3, "num_attention_heads": 4,
              "num_key_value_heads": 2, "tie_word_embeddings": tied}
    model = LlamaForCausalLM(LlamaConfig(**config))
    assert parameter_count(config) == sum(p.numel() for p in model.parameters())
    with pytest.raises(ValueError, match="no usable hidden_size or n_embd or d_model"):
        parameter_count({"vocab_size": 10, "num_hidden_layers": 1})


def test_new_tokens_beyond_the_context_are_refused_before_the_model_loads(monkeypatch,
                                                                         tmp_path):
    import benchmarks.run.lm_runner as runner
    built = []
    monkeypatch.setattr(runner, "build_lm", lambda name: built.append(name))
    spec = SweepSpec(model="tiny-lm", dataset="text", device="cpu")
    with pytest.raises(ValueError) as raised:
        LMSweep(spec, LMOptions(window=32, prompt_tokens=8, new_tokens=600))
    assert str(raised.value) == ("--prompt-tokens 8 and --new-tokens 600 make 608 tokens, "
                                 "more than tiny-lm's context (512 tokens): give at most 504 "
                                 "new tokens")
    assert built == []
    done = run_cli("run", "--model", "tiny-lm", "--dataset", "text", *SMALL, "--new-tokens",
                   "4000", "--store", str(tmp_path / "results.db"), timeout=60)
    assert done.returncode == 2, done.stderr[-800:]
    assert done.stderr.strip().splitlines()[-1].endswith(
        "--prompt-tokens 8 and --new-tokens 4000 make 4008 tokens, more than tiny-lm's "
        "context (512 tokens): give at most 504 new tokens")


def test_an_hf_config_too_big_for_the_memory_is_refused_before_torch_builds_it(tmp_path):
    folder = hf_folder(tmp_path / "huge", HUGE)
    parameters = parameter_count(HUGE)
    assert parameters > 16e9
    # The CLI in a process of its own, under a data limit (as the worker is): its peak RSS
    # read as it exits, whatever it did. VmHWM, not ru_maxrss: a child started by vfork keeps
    # in ru_maxrss the high-water mark of the parent's memory (a pytest worker grown by the
    # tests before), where VmHWM belongs to the new image alone.
    script = ("import resource, sys\n"
              "resource.setrlimit(resource.RLIMIT_DATA, (6 << 30, 6 << 30))\n"
              "from benchmarks.cli.main import main\n"
              "try:\n    code = main(sys.argv[1:])\n"
              "finally:\n"
              "    hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')]\n"
              "    print('peak', hwm[0].split()[1], file=sys.stderr)\n"
              "sys.exit(code)\n")
    done = subprocess.run(
        [sys.executable, "-c", script, "run", "--model", f"hf:{folder}", "--dataset", "text",
         *SMALL, "--new-tokens", "4", "--store", str(tmp_path / "results.db")],
        cwd=ROOT, capture_output=True, text=True, timeout=scaled(120))
    lines = done.stderr.strip().splitlines()
    peak_kb = int(lines[-1].split()[1])
    assert done.returncode == 2, done.stderr[-800:]
    refusal = lines[-2]
    assert refusal.startswith(f"error: hf:{folder} ({parameters / 1e6:,.0f}M parameters "
                              f"from its config.json, fp32) needs about"), refusal
    assert "a job may use at most" in refusal and "give a smaller model" in refusal
    assert peak_kb < 1_500_000, peak_kb  # torch's imports, nothing of the model's 64 GB


def test_a_tokenizer_file_past_its_cap_is_refused_before_it_is_read(tmp_path):
    folder = hf_folder(tmp_path / "tok", {**HUGE, "vocab_size": 300, "hidden_size": 64,
                                          "num_attention_heads": 4, "num_key_value_heads": 2,
                                          "intermediate_size": 96})
    with open(folder / "tokenizer.json", "wb") as f:  # sparse: 60 MB that take no disk
        f.truncate(MAX_TOKENIZER_BYTES + 10 * 2**20)
    with pytest.raises(ValueError) as raised:
        check_folder(f"hf:{folder}")
    assert str(raised.value) == (f"model folder {folder}: tokenizer.json is 60.0 MB; at most "
                                 f"50 MB of it are read (a real one is far smaller)")
    done = run_cli("run", "--model", f"hf:{folder}", "--dataset", "text", *SMALL,
                   "--new-tokens", "4", "--store", str(tmp_path / "results.db"), timeout=60)
    assert done.returncode == 2 and "tokenizer.json is 60.0 MB" in done.stderr, done.stderr
    (folder / "tokenizer.json").unlink()
    with open(folder / "config.json", "ab") as f:  # a config padded past its own cap
        f.write(b" " * (2 << 20))
    with pytest.raises(ValueError, match="config.json is 2.0 MB; at most 1 MB"):
        check_folder(f"hf:{folder}")
