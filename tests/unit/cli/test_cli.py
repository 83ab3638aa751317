"""The CLI end to end, in fresh processes, as a user runs it; and its refusals of what the
machine cannot hold, in process (the memory check runs before anything is allocated)."""

import json
import os
import sqlite3

import pytest
import torch

from benchmarks.cli.main import main

# Not helpers.FAST_CLI: the default training (the baseline's accuracy bound needs it), fast
# timing.
FAST = ["--min-time", "0.05"]


def runs_in(store):
    if not store.exists():
        return 0
    return sqlite3.connect(store).execute("SELECT COUNT(*) FROM runs").fetchone()[0]


def test_run_on_digits_writes_json_csv_and_store(tmp_path, cli):
    store, out, csv = tmp_path / "s.db", tmp_path / "r.json", tmp_path / "r.csv"
    p = cli("run", "--store", str(store), "--json", str(out), "--csv", str(csv), *FAST)
    assert p.returncode == 0, p.stderr
    report = json.loads(out.read_text())
    assert report["schema"] == 1
    for key in ("torch", "device_name", "cuda", "cpu", "threads", "created_at", "git_commit"):
        assert key in report["environment"]
    (v,) = report["variants"]
    assert v["name"] == "baseline" and v["techniques"] == [] and v["error"] is None
    assert v["accuracy"] >= 0.96  # seeds 0-4 read 96.9-97.8% (+-2 points at 95%)
    assert set(v["latency_ms"]) >= {"p50", "p90", "p99", "mean", "std", "n", "batch_size"}
    assert v["latency_ms"]["n"] >= 10 and v["latency_ms"]["batch_size"] == 32
    assert "baseline" in p.stdout and "p50 ms" in p.stdout  # the table on stdout
    assert csv.read_text().startswith("variant,")
    h = cli("history", "--json", "--store", str(store))
    (run,) = json.loads(h.stdout)
    assert run["status"] == "complete" and run["model"] == "seed_cnn"
    assert run["variants"][0]["name"] == "baseline"
    assert set(run) >= {"run_id", "created_at", "model", "dataset", "status", "variants"}


def test_synthetic_run(tmp_path, cli):
    out = tmp_path / "r.json"
    p = cli("run", "--model", "mlp", "--dataset", "synthetic", "--input-shape", "3,16,16",
            "--store", str(tmp_path / "s.db"), "--json", str(out), *FAST)
    assert p.returncode == 0, p.stderr
    (v,) = json.loads(out.read_text())["variants"]
    assert v["accuracy"] is None and v["latency_ms"]["p50"] > 0


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="cores are pinned on Linux")
def test_a_run_that_finds_every_core_held_says_which_it_shared(tmp_path, cli):
    import fcntl
    locks = tmp_path / "locks"
    locks.mkdir()
    # Every core this run may use, held as another timing process would hold it.
    held = [os.open(locks / f"core-{core}.lock", os.O_RDONLY | os.O_CREAT)
            for core in os.sched_getaffinity(0)]
    try:
        for fd in held:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        out = tmp_path / "r.json"
        p = cli("run", "--model", "mlp", "--dataset", "synthetic", "--input-shape", "3,16,16",
                "--store", str(tmp_path / "s.db"), "--json", str(out), "--quiet", *FAST,
                env={"COMPRESSION_BENCH_CORE_LOCKS": str(locks)})
    finally:
        for fd in held:
            os.close(fd)
    assert p.returncode == 0, p.stderr
    report = json.loads(out.read_text())
    pinning = report["environment"]["pinning"]
    # The last cores, as with none held; each said shared, on the card and the row's timing.
    assert pinning["cores"] == pinning["shared"] == sorted(os.sched_getaffinity(0))[
        -report["environment"]["threads"]:]
    assert report["variants"][0]["timing"]["pinning"] == pinning
    core = pinning["cores"][-1]
    assert "warning: timed on core" in p.stderr and f"{core}, shared" in p.stderr


def test_list(cli):
    p = cli("list", "--json")
    info = json.loads(p.stdout)
    assert "seed_cnn" in info["models"] and "digits" in info["datasets"]


def _evil_pt(path):
    import os

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {path.parent / 'PWNED'}",))
    torch.save({"0.weight": Evil()}, path)


BAD = {
    "unknown model": (["--model", "nope"], "unknown model 'nope'; choose one of"),
    "language model on images": (["--model", "tiny-lm"],
                                 "tiny-lm is a language model: it runs on a text data set"),
    "language model folder": (["--model", "hf:{tmp}/nowhere"], "model folder"),
    "unknown dataset": (["--dataset", "mnist"], "unknown dataset 'mnist'; choose one of"),
    "missing factory file": (["--model", "{tmp}/none.py:build"], "does not exist"),
    "factory import fails": (["--model", "{tmp}/broken.py:build"], "failed to import"),
    "factory returns no module": (["--model", "{tmp}/good.py:notmodule"], "not a torch.nn.Module"),
    "corrupt checkpoint": (["--checkpoint", "{tmp}/junk.pt"], "corrupt"),
    "truncated checkpoint": (["--checkpoint", "{tmp}/half.safetensors"], "truncated"),
    "mismatched checkpoint": (["--checkpoint", "{tmp}/wrong.pt"], "does not match the model"),
    "pickled code": (["--checkpoint", "{tmp}/evil.pt"], "refused"),
    "input shape": (["--dataset", "synthetic", "--input-shape", "3,2,2"], "does not fit"),
    "input shape vs data": (["--input-shape", "3,8,8"], "does not match digits"),
    "batch size": (["--batch-size", "0"], "batch_size must be >= 1"),
    "epochs": (["--epochs", "-1"], "epochs must be >= 0"),
    "missing data root": (["--dataset", "cifar10", "--data-root", "{tmp}/nowhere"],
                          "does not exist"),
    "prune ratio": (["--prune", "0.99"], "prune.ratio must be >= 0.0 and <= 0.95"),
    "temperature": (["--distill", "--temperature", "0"], "distill.temperature must be > 0.0"),
    "alpha": (["--distill", "--alpha", "1.5"], "distill.alpha"),
    "student": (["--distill", "--student", "giant"], "unknown model 'giant'"),
    "int8 mode": (["--int8", "int4"], "invalid choice: 'int4'"),
    "combine alone": (["--prune", "0.5", "--combine"], "combine needs at least two"),
}


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    from safetensors.torch import save_file

    from benchmarks.zoo.models import create_model
    tmp = tmp_path_factory.mktemp("bad")
    (tmp / "broken.py").write_text("raise ImportError('broken on purpose')\n")
    (tmp / "good.py").write_text("def notmodule(num_classes, in_channels):\n    return 'x'\n")
    (tmp / "junk.pt").write_bytes(b"\x00garbage" * 100)
    model = create_model("seed_cnn", 10, 1, (8, 8))
    save_file({k: v.contiguous() for k, v in model.state_dict().items()},
              str(tmp / "full.safetensors"))
    data = (tmp / "full.safetensors").read_bytes()
    (tmp / "half.safetensors").write_bytes(data[: len(data) // 2])
    torch.save(create_model("seed_cnn_narrow", 10, 1, (8, 8)).state_dict(), tmp / "wrong.pt")
    _evil_pt(tmp / "evil.pt")
    return tmp


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_line_exit_2_and_nothing_written(case, bad_files, tmp_path, cli):
    args, expected = BAD[case]
    args = [a.replace("{tmp}", str(bad_files)) for a in args]
    store = tmp_path / "s.db"
    p = cli("run", "--store", str(store), "--quiet", *args, *FAST)
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert expected in lines[0]
    assert "Traceback" not in p.stderr
    assert not store.exists()
    assert not (bad_files / "PWNED").exists()


# Ray is an optional part: a wheel installed without it still refuses --executor ray in one
# line. The child makes `import ray` fail as it would there (None in sys.modules).
WITHOUT_RAY = ("import sys; sys.modules['ray'] = None\n"
               "from benchmarks.cli.main import main; sys.exit(main(sys.argv[1:]))")


@pytest.mark.parametrize("command", [["run", "--quiet"], ["distributed", "--device", "cpu"]])
def test_executor_ray_without_ray_installed_is_one_line_and_exit_2(command, tmp_path):
    import os
    import subprocess
    import sys

    from helpers import ROOT, scaled
    store = tmp_path / "s.db"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    p = subprocess.run([sys.executable, "-c", WITHOUT_RAY, *command, "--store", str(store),
                        "--executor", "ray", "--ray-address", "127.0.0.1:9"], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=scaled(120))
    assert p.returncode == 2, (p.stdout, p.stderr)
    (line,) = p.stderr.strip().splitlines()
    assert line.startswith("error: --executor ray needs Ray, which is not installed here")
    assert "Traceback" not in p.stderr and not store.exists()


def test_list_describes_every_registered_data_set(cli):
    from benchmarks.spec.datasets import dataset_entries
    info = json.loads(cli("list", "--json").stdout)
    assert info["datasets"] == [e.menu for e in dataset_entries()]
    assert info["dataset_entries"]["synthetic"]["has_labels"] is False
    assert info["dataset_entries"]["digits"]["channels"] == 1
    text = cli("list").stdout
    for entry in dataset_entries():
        assert f"  {entry.menu:<26} {entry.description}" in text


# -- refusals in process (from the hardening issue) ----------------------------------------

def test_an_environment_error_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    """STYLE: RuntimeError is the environment's fault; the CLI still shows one line."""
    from benchmarks.zoo import datasets

    def refuse(*args, **kwargs):
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory\nmore detail")

    monkeypatch.setattr(datasets, "load_digits", refuse)
    store = tmp_path / "s.db"
    assert main(["run", "--store", str(store), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "error: RuntimeError: DefaultCPUAllocator: can't allocate memory"]
    assert not store.exists()


@pytest.mark.parametrize("args, expected", [
    (["--dataset", "synthetic", "--input-shape", "3,4096,4096", "--model", "mlp"],
     "COMPRESSION_BENCH_MEMORY_SHARE"),
    (["--dataset", "synthetic", "--input-shape", "3,256,256", "--model", "mlp",
      "--batch-size", "65536"], "at batch size 65536 needs about"),
])
def test_inputs_too_large_for_memory_are_refused_before_allocating(args, expected, tmp_path,
                                                                   capsys):
    store = tmp_path / "s.db"
    assert main(["run", "--store", str(store), "--quiet", *args]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error:") and expected in line
    assert not store.exists()
