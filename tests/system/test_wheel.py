"""The package ships whole: a wheel built from a copy of the checkout holds every package of
the product and its data (the catalogue, the report's template), and installed into a fresh
virtual environment it runs `compression-bench list`, a tiny `run` and `report --html` from a
folder that is not the checkout. The editable install hid a missing subpackage and a missing
data file before; this is the install a user gets.

Installing torch and the rest again would take minutes, so the fresh environment borrows the
project environment's site-packages for its dependencies through a .pth line. Python adds
that folder to sys.path without processing the .pth files inside it, so the editable install's
finder (``__editable__*``) stays inactive there: the product is imported from the wheel alone,
and the test checks that it is."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from helpers import ROOT

pytestmark = pytest.mark.slow

PACKAGES = ("benchmarks", "optimizers", "dashboard")  # pyproject's packages.find include
DATA = ("benchmarks/zoo/catalogue.json", "benchmarks/views/templates/report.html")
# What a build must not see or ship: the checkout's environment, history, results and caches.
NOT_COPIED = shutil.ignore_patterns(".git", ".venv", "results", "data", "build", "dist",
                                    "*.egg-info", "__pycache__", ".pytest_cache",
                                    ".hypothesis", ".cache", "*.db", "*.db-wal", "*.db-shm")


BUILD_OUTPUT: list[str] = []  # what the wheel's build printed (the fixture below)


def quiet_env(**extra: str) -> dict:
    """The environment of a user's shell: no PYTHONPATH (nothing points at the checkout)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return {**env, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1", **extra}


def check(args: list, cwd: Path, env: dict | None = None, timeout: float = 300):
    p = subprocess.run([str(a) for a in args], cwd=cwd, env=env or quiet_env(),
                       capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, (args, p.stdout[-2000:], p.stderr[-3000:])
    return p


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(wheel, venv, site-packages, a working folder): the wheel built from a copy of the
    checkout, installed (no dependencies, no index) into a fresh venv that borrows the project
    environment's site-packages for torch and the rest."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    shutil.copytree(ROOT, source, ignore=NOT_COPIED)
    dist = tmp / "dist"
    built = check([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                   "--no-build-isolation", "--no-index", "--wheel-dir", dist, source], cwd=tmp)
    BUILD_OUTPUT.append(built.stderr)
    (wheel,) = dist.glob("compression_bench-*.whl")

    venv = tmp / "venv"
    check([sys.executable, "-m", "venv", "--without-pip", venv], cwd=tmp)
    python = venv / "bin" / "python"
    # Installed before the dependencies are borrowed: pip sees an empty environment, not the
    # project's editable install of the same name and version.
    check([sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps",
           "--no-index", wheel], cwd=tmp)
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(check([python, "-c", purelib], cwd=tmp).stdout.strip())
    borrowed = Path(sysconfig.get_paths()["purelib"])  # this (the project's) environment's
    assert borrowed.resolve() != site.resolve()
    (site / "zz-borrowed-dependencies.pth").write_text(f"{borrowed}\n")
    work = tmp / "work"
    work.mkdir()
    return wheel, venv, site, work


def test_the_wheel_holds_every_package_and_its_data(installed):
    wheel, *_ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in DATA:
        assert name in names, f"{name} is not in {wheel.name}"
    # Every package of the checkout (a folder with __init__.py) is in the wheel.
    for top in PACKAGES:
        for init in (ROOT / top).rglob("__init__.py"):
            if "__pycache__" not in init.parts:
                name = init.relative_to(ROOT).as_posix()
                assert name in names, f"{name} is not in {wheel.name}"
    # And nothing else at the top: no tests, tools, pages or app.py.
    tops = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert tops == set(PACKAGES), tops
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    scripts = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "compression-bench = benchmarks.cli.main:entry_point" in scripts


def test_the_build_prints_no_setuptools_warning(installed):
    """A set-up prints only what needs reading: setuptools' deprecation of the license table
    (about 40 lines on every install) is gone with the license as an SPDX string."""
    assert BUILD_OUTPUT
    warnings = [line for line in BUILD_OUTPUT[0].splitlines()
                if "Warning" in line or "deprecated" in line]
    assert not warnings, warnings


def test_the_fresh_environment_imports_the_product_from_the_wheel_alone(installed):
    _, venv, site, work = installed
    code = ("import json, sys, benchmarks, benchmarks.executors, benchmarks.cli.main, "
            "optimizers, dashboard; print(json.dumps({'files': [m.__file__ for m in "
            "(benchmarks, benchmarks.executors, benchmarks.cli.main, optimizers, dashboard)], "
            "'path': sys.path, 'modules': sorted(sys.modules), "
            "'finders': [repr(f) for f in sys.meta_path]}))")
    seen = json.loads(check([venv / "bin" / "python", "-c", code], cwd=work).stdout)
    for file in seen["files"]:
        assert Path(file).resolve().is_relative_to(site.resolve()), file
    checkout = ROOT.resolve()
    assert not [p for p in seen["path"] if p and Path(p).resolve() == checkout], seen["path"]
    assert not [m for m in seen["modules"] if "__editable__" in m]
    assert not [f for f in seen["finders"] if "editable" in f.lower()], seen["finders"]


def test_list_a_tiny_run_and_its_html_report_from_the_installed_wheel(installed):
    _, venv, _, work = installed
    command = venv / "bin" / "compression-bench"
    env = quiet_env(COMPRESSION_BENCH_CACHE=str(work / "cache"))
    listed = check([command, "list"], cwd=work, env=env)
    assert "seed_cnn" in listed.stdout and "digits" in listed.stdout

    store, out = work / "r.db", work / "r.json"
    check([command, "run", "--epochs", "1", "--min-time", "0.05", "--quiet", "--store", store,
           "--json", out], cwd=work, env=env)
    report = json.loads(out.read_text())
    assert report["baseline"] == "baseline"
    (baseline,) = [v for v in report["variants"] if v["name"] == "baseline"]
    assert baseline["error"] is None and 0 < baseline["accuracy"] <= 1

    (run,) = json.loads(check([command, "history", "--json", "--store", store], cwd=work,
                              env=env).stdout)
    html = work / "report.html"
    check([command, "report", run["run_id"], "--html", html, "--store", store], cwd=work,
          env=env)
    page = html.read_text(encoding="utf-8")
    assert "Plotly.newPlot" in page and "<td>baseline</td>" in page
