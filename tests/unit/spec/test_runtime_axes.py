"""The deployment axes: --runtime, --eval-batch-size and --threads parsed into the sweep (a
list, like any axis), round-tripped through its JSON, and every bad value refused in one line
with exit status 2 before anything runs: an unknown runtime, one not installed, a batch size
of 0, more threads than the machine's cores, a batch too big for memory."""

from __future__ import annotations

import pytest

from benchmarks.cli.main import main
from benchmarks.cli.parser import build_parser
from benchmarks.cli.run import spec_from_args
from benchmarks.spec import runtimes as registry
from benchmarks.spec.runtimes import DeploymentConfig, machine_cores
from benchmarks.spec.sweep import SweepSpec


def _spec(*args):
    return spec_from_args(build_parser().parse_args(["run", *args]))


def test_axes_parse_as_lists_into_the_sweep():
    spec = _spec("--runtime", "ort,openvino", "--eval-batch-size", "1,8,32", "--threads", "1")
    # Eager always runs: it is every other row's reference.
    assert spec.runtimes == ("eager", "ort", "openvino")
    assert spec.eval_batch_sizes == (1, 8, 32) and spec.threads == 1
    assert spec.thread_counts == () and spec.has_cells
    two = _spec("--threads", "1,2", "--int8", "static")
    assert two.thread_counts == (1, 2) and two.threads == 2  # pinned: as many as the largest
    plain = _spec()
    assert plain.runtimes == ("eager",) and not plain.has_cells and plain.threads is None
    assert SweepSpec.from_dict(spec.to_dict()) == spec
    old = {k: v for k, v in spec.to_dict().items()
           if k not in ("runtimes", "eval_batch_sizes", "thread_counts")}
    assert SweepSpec.from_dict(old).runtimes == ("eager",)  # a run stored before the axes


def test_the_page_form_values_mean_the_same():
    # The widgets' "(default)" entry is None; an empty pick is unset.
    config = DeploymentConfig(runtimes=("eager", "ort"), eval_batch_sizes=(None,), threads=())
    assert config.eval_batch_sizes is None and config.threads is None
    assert config.sweep_fields()["eval_batch_sizes"] == ()


def test_every_registered_runtime_says_what_it_is():
    for runtime in registry.runtimes():
        entry = runtime.to_dict()
        assert entry["description"] and isinstance(entry["available"], bool)
        assert entry["version"] != "absent" or not entry["available"]
    assert registry.get("eager").available() and registry.get("compile").available()


@pytest.mark.parametrize("args, expected", [
    (["--runtime", "tensorrt"], "deployment.runtimes must be one of eager, compile"),
    (["--runtime", "ort,ort"], "one or more distinct"),
    (["--eval-batch-size", "0"], "deployment.eval_batch_sizes must be >= 1"),
    (["--eval-batch-size", "1,x"], "--eval-batch-size must be an integer, got 'x'"),
    (["--threads", "0"], "deployment.threads must be >= 1"),
    (["--threads", str(machine_cores() + 1)], f"is above this machine's {machine_cores()} core"),
    (["--threads", f"1,{machine_cores() + 3}"], "give at most"),
    (["--runtime", "ort,openvino,compile,compile-freeze", "--eval-batch-size",
      "1,2,4,8,16,32,64,128", "--prune", "0.1:0.9:9"], "above the cap of 256"),
    (["--dataset", "synthetic", "--input-shape", "3,256,256", "--model", "mlp",
      "--eval-batch-size", "1,65536"], "at batch size 65536 needs about"),
])
def test_bad_axes_are_one_line_exit_2_and_nothing_runs(args, expected, tmp_path, capsys):
    store = tmp_path / "s.db"
    assert main(["run", "--store", str(store), "--quiet", *args]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error:") and expected in line, line
    assert not store.exists()


def test_a_runtime_not_installed_is_one_line_exit_2(tmp_path, capsys, monkeypatch):
    real = registry.util.find_spec
    monkeypatch.setattr(registry.util, "find_spec",
                        lambda name, *a: None if name == "openvino" else real(name, *a))
    store = tmp_path / "s.db"
    assert main(["run", "--store", str(store), "--quiet", "--runtime", "eager,openvino"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "--runtime openvino needs openvino, not installed here" in line
    assert "pip install openvino nncf" in line and "installed runtimes: eager" in line
    assert not store.exists()
