"""The data-parallel benchmark: sharding, broadcast, all-reduce, compression, faults, CLI."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from benchmarks.distributed import launcher as D
from benchmarks.distributed.worker import make_sampler
from helpers import ROOT, scaled

FAST = dict(model="seed_cnn", dataset="digits", steps=6, batch_size=16, device="cpu")


def child_pids() -> set[int]:
    """Live children of this process, other than multiprocessing's own helpers (the
    forkserver and the resource tracker live as long as the test process)."""
    pids = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        fields = text.rsplit(")", 1)[1].split()
        if int(fields[1]) == os.getpid() and fields[0] != "Z":
            # The dashboard tests' job-queue worker may outlive its test in this process.
            if not any(k in cmdline for k in (b"forkserver", b"resource_tracker",
                                               b"benchmarks.service.worker")):
                pids.add(int(stat.parent.name))
    return pids


@pytest.fixture(scope="module")
def runs():
    config = D.DistributedConfig(workers=(1, 2), compressions=("none", "fp16"), **FAST)
    return {r["name"]: r for r in D.run_distributed(config, warn=lambda text: None)}


# -- config and capacity ---------------------------------------------------------------------

@pytest.mark.parametrize("field,value", [("workers", (0,)), ("workers", ()),
                                         ("compressions", ("zip",)), ("steps", 0),
                                         ("batch_size", -1), ("device", "tpu"),
                                         ("timeout_s", 0), ("port", 70000)])
def test_config_rejects_bad_values_naming_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        D.DistributedConfig(**{field: value})


def test_config_sorts_workers():
    assert D.DistributedConfig(workers=[2, 1]).workers == (1, 2)


def test_capacity_warns_when_oversubscribed_and_refuses_beyond_four_per_core():
    cores = D.available_cores()
    assert D.check_capacity((cores,), "cpu") == []
    assert "oversubscribed" in D.check_capacity((cores + 1,), "cpu")[0]
    with pytest.raises(ValueError, match="per core"):
        D.check_capacity((4 * cores + 1,), "cpu")


def test_shards_are_disjoint_and_cover_the_data():
    data = list(range(101))
    for epoch in (0, 1):
        shards = []
        for rank in range(2):
            sampler = make_sampler(data, 2, rank, seed=3)
            sampler.set_epoch(epoch)
            shards.append(set(sampler))
        assert not shards[0] & shards[1]
        assert len(shards[0] | shards[1]) == 100  # the odd sample out is dropped, not repeated


# -- real runs with gloo workers -------------------------------------------------------------

def test_runs_complete_with_figures(runs):
    assert set(runs) == {"w1-none", "w2-none", "w1-fp16", "w2-fp16"}
    for run in runs.values():
        assert run["error"] is None, run["error"]
        assert run["backend"] == "gloo" and run["throughput"] > 0 and run["step_ms"] > 0
        assert run["comm_ms_per_step"] >= 0 and 0 <= run["accuracy"] <= 1
        assert run["global_batch_size"] == 16 * run["workers"]
    assert runs["w1-none"]["scaling_efficiency"] is None
    assert runs["w2-none"]["scaling_efficiency"] == pytest.approx(
        runs["w2-none"]["throughput"] / (2 * runs["w1-none"]["throughput"]))


def test_two_workers_read_disjoint_shards_and_stay_in_sync(runs):
    run = runs["w2-none"]
    # Coverage: all but the odd sample out (digits has an odd number of training images).
    assert run["shards_disjoint"] and run["shard_coverage"] > 0.99
    # Ranks are seeded differently on purpose: equality proves DDP's broadcast.
    assert run["param_max_diff_after_broadcast"] == 0.0
    assert run["param_max_diff_after_training"] == 0.0
    assert runs["w2-fp16"]["param_max_diff_after_training"] == 0.0


def test_fp16_moves_half_the_bytes(runs):
    for workers in (1, 2):
        assert runs[f"w{workers}-fp16"]["bytes_per_step"] * 2 == \
            runs[f"w{workers}-none"]["bytes_per_step"]
    n_params = 379944 // 4  # seed_cnn on 8x8 digits: 94,986 parameters
    assert runs["w2-none"]["bytes_per_step"] == 4 * n_params


def test_first_step_gradients_do_not_depend_on_the_worker_count():
    one = D.first_step_gradients("seed_cnn", "digits", workers=1, global_batch=32, seed=1)
    two = D.first_step_gradients("seed_cnn", "digits", workers=2, global_batch=32, seed=1)
    assert one.keys() == two.keys() and len(one) > 0
    for name in one:
        torch.testing.assert_close(two[name], one[name], rtol=1.3e-6, atol=1e-5)


def test_crashed_worker_fails_the_run_naming_it_and_leaves_no_process():
    config = D.DistributedConfig(workers=(2,), compressions=("none",), crash_rank=1, **FAST)
    [run] = D.run_distributed(config, warn=lambda text: None)
    assert "worker rank 1" in run["error"] and "injected crash" in run["error"]
    assert run["throughput"] is None
    assert child_pids() == set()


def test_hung_worker_times_out_naming_it_and_leaves_no_process():
    config = D.DistributedConfig(workers=(2,), compressions=("none",), hang_rank=1,
                                 timeout_s=3, **FAST)
    [run] = D.run_distributed(config, warn=lambda text: None)
    assert "worker rank 1" in run["error"] and "hung" in run["error"]
    assert run["wall_s"] < 60
    assert child_pids() == set()


def test_busy_port_is_replaced_by_a_free_one():
    with socket.socket() as busy:
        busy.bind((D.HOST, 0))
        busy.listen()
        port = busy.getsockname()[1]
        warnings = []
        config = D.DistributedConfig(workers=(1,), compressions=("none",), port=port, **FAST)
        [run] = D.run_distributed(config, warn=warnings.append)
    assert run["error"] is None, run["error"]
    assert any(str(port) in w for w in warnings)


# -- CLI: one parser, generated from the config's fields --------------------------------------

def test_the_command_is_generated_from_the_config_fields():
    from benchmarks.cli.parser import build_parser, config_flag, config_from_args
    from benchmarks.spec.distributed import DistributedConfig
    from optimizers.settings import setting_fields
    parser = build_parser()
    dist = parser._subparsers._group_actions[0].choices["distributed"]
    usage = dist.format_help()
    for field, meta, default in setting_fields(DistributedConfig):
        flag = config_flag(field, meta)
        assert (flag in usage) is not meta.hidden, flag  # test hooks are accepted, not listed
        assert meta.hidden or meta.help.split(" (")[0][:30] in " ".join(usage.split())
    # Defaults are the config's: no flags, the config's defaults.
    assert config_from_args(DistributedConfig, parser.parse_args(["distributed"])) == \
        DistributedConfig()
    args = parser.parse_args(["distributed", "--workers", "2,1", "--compression", "fp16,bf16",
                              "--amp", "--timeout", "30", "--input-shape", "3,16,16",
                              "--dataset", "synthetic", "--crash-rank", "1"])
    assert config_from_args(DistributedConfig, args) == DistributedConfig(
        workers=(1, 2), compressions=("fp16", "bf16"), amp=True, timeout_s=30.0,
        input_shape=(3, 16, 16), dataset="synthetic", crash_rank=1)


@pytest.mark.parametrize("argv,needle", [
    (["--model", "nope"], "unknown model"),
    (["--dataset", "nope"], "unknown dataset 'nope'; choose one of digits"),
    (["--dataset", "synthetic"], "synthetic needs --input-shape"),
    (["--workers", "1,x"], "--workers must be an integer, got 'x'"),
    (["--workers", "1,1"], "distributed.workers must be an integer >= 1, one or more distinct"),
    (["--workers", "0"], "distributed.workers must be >= 1"),
    (["--compression", "zip"], "distributed.compressions must be one of none, fp16, bf16"),
    (["--steps", "0"], "distributed.steps must be >= 1"),
    (["--timeout", "nan"], "distributed.timeout_s must be a number"),
    (["--port", "70000"], "distributed.port must be >= 1 and <= 65535"),
    (["--input-shape", "3,8"], "distributed.input_shape must be"),
    (["--crash-rank", "0", "--steps", "2"], "distributed.steps must be > 2 when crash_rank"),
    (["--workers", "999"], "per core"),
    (["--json", "/nowhere/d.json"], "folder /nowhere does not exist"),
    (["--bogus"], "unrecognized"),
])
def test_cli_bad_input_is_one_line_and_exit_2(argv, needle, capsys):
    from benchmarks.cli.main import main
    assert main(["distributed", *argv, "--no-store"]) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_bad_input_records_nothing(tmp_path, capsys):
    from benchmarks.cli.main import main
    store = tmp_path / "s.db"
    assert main(["distributed", "--workers", "999", "--store", str(store)]) == 2
    assert not store.exists()


def test_cli_end_to_end_writes_json_and_store(tmp_path):
    out, store = tmp_path / "d.json", tmp_path / "s.db"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.distributed", "--workers", "1", "--compression",
         "fp16", "--steps", "4", "--batch-size", "16", "--device", "cpu", "--json", str(out),
         "--store", str(store)], cwd=ROOT, capture_output=True, text=True, timeout=scaled(120))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["schema"] == 1 and "torch" in doc["environment"]
    [run] = doc["runs"]
    for key in ("workers", "compression", "amp", "backend", "device", "throughput",
                "scaling_efficiency", "bytes_per_step", "comm_ms_per_step", "step_ms", "loss",
                "accuracy", "steps", "global_batch_size", "error"):
        assert key in run
    from benchmarks.store.database import ResultsStore
    [stored] = ResultsStore(store).runs(kind="distributed")
    assert stored["status"] == "complete"


@pytest.mark.skipif(torch.cuda.device_count() < 1, reason="needs a CUDA GPU")
def test_cuda_nccl_run_with_amp():
    config = D.DistributedConfig(workers=(1,), compressions=("none", "fp16"), amp=True,
                                 model="seed_cnn", dataset="digits", steps=6, batch_size=16,
                                 device="cuda")
    runs = D.run_distributed(config, warn=lambda text: None)
    for run in runs:
        assert run["error"] is None and run["backend"] == "nccl"
    assert runs[1]["bytes_per_step"] * 2 == runs[0]["bytes_per_step"]


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
def test_cuda_two_gpus_in_sync():
    config = D.DistributedConfig(workers=(2,), compressions=("fp16",), model="seed_cnn",
                                 dataset="digits", steps=6, batch_size=16, device="cuda")
    [run] = D.run_distributed(config, warn=lambda text: None)
    assert run["error"] is None and run["param_max_diff_after_training"] == 0.0
