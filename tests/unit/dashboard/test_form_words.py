"""The Experiment page's words (the demo's second pass): a model file named relative to the
models folder and no other server path, the engine's flags in the page's words, a checkpoint
run read back as training nothing, an added model file's safe name."""

from __future__ import annotations

from benchmarks.spec.sweep import SweepSpec
from dashboard.experiment_form import page_words
from dashboard.markup import HIDDEN_PATH, no_paths, relative_names
from dashboard.model_files import safe_name
from dashboard.readback import settings_line


def test_a_model_file_is_named_relative_to_the_operators_folders(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPRESSION_BENCH_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("COMPRESSION_BENCH_DATA_DIR", str(tmp_path / "data"))
    line = (f"model file {tmp_path}/models/se_net.py failed to import; "
            f"imagefolder:{tmp_path}/data/flowers; checkpoint /srv/jobs/ab/c.pt")
    assert relative_names(line) == ("model file se_net.py failed to import; "
                                    "imagefolder:flowers; checkpoint /srv/jobs/ab/c.pt")
    assert no_paths(line).endswith(f"checkpoint {HIDDEN_PATH}")
    assert str(tmp_path) not in no_paths(line)


def test_the_engines_flags_read_in_the_pages_words():
    assert page_words("give a smaller --input-shape, --batch-size or --eval-batch-size") == \
        "give a smaller input shape, Batch size or Eval batch sizes"
    assert "--" not in page_words("give --student NAME or drop --combine, --max-variants 9")


def test_a_run_from_a_checkpoint_reads_back_as_training_nothing():
    plain = SweepSpec.from_toggles(prune=0.5).to_dict()
    assert " · 8 epochs · " in settings_line("sweep", plain)
    loaded = {**plain, "checkpoint": "/srv/jobs/ab/c.safetensors"}
    line = settings_line("sweep", loaded)
    assert "trains nothing (the checkpoint is evaluated as loaded)" in line
    assert " epochs · " not in line and "/srv" not in line
    students = {**SweepSpec.from_toggles(distill=True).to_dict(), "checkpoint": "c.pt"}
    assert ("the baseline trains nothing (the checkpoint is evaluated as loaded) · students 8 "
            "epochs") in settings_line("sweep", students)
    assert "trains nothing (the model is evaluated as loaded)" in settings_line(
        "sweep", {**plain, "epochs": 0})


def test_an_added_model_file_takes_a_plain_name():
    assert safe_name("My Net!.py") == "My_Net.py"
    assert safe_name("_hidden.py") == "hidden.py"
    assert safe_name("3d-net.py") == "model_3d_net.py"
    assert safe_name("../../etc/x.py") == "x.py"
    assert safe_name("!!!.py") == "model.py"
