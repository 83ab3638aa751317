"""Helpers the tests share (imported by name: ``from helpers import ...``)."""

from __future__ import annotations

import os
import sys
from html.parser import HTMLParser
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The fast budgets: one training epoch, timing stopped at 10 runs or 0.05 s, whichever is
# later. FAST is SweepSpec's keywords (FAST_TIMING without the training), FAST_CLI the same for
# `run` (the CLI's warmup is its default). A test whose budget differs writes the difference
# where it uses one: {**FAST, "epochs": 2}, [*FAST_CLI, "--epochs", "2"] (argparse keeps the
# last value of a repeated flag).
FAST_TIMING = dict(min_time_s=0.05, min_runs=10, warmup=1)
FAST = dict(FAST_TIMING, epochs=1)
FAST_CLI = ["--epochs", "1", "--min-time", "0.05", "--quiet"]


def run_cli(*args: str, timeout: float = 300, env: dict | None = None):
    """The CLI in a fresh process, as a user runs it (``timeout`` on a quiet machine, scaled)."""
    import subprocess
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "benchmarks", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=scaled(timeout), env=full_env)


def process_holding_a_run(store_path: Path):
    """A separate process that opens ``store_path``, starts a run, stores its baseline and then
    sleeps: the stand-in for a sweep that will be killed. Returns (process, run_id)."""
    import subprocess
    code = ("import time;"
            "from benchmarks.store.database import ResultsStore;"
            f"s=ResultsStore({str(store_path)!r});"
            "r=s.start_run(model='m',dataset='d',device='cpu',spec={},environment={});"
            "s.add_variant(r, {'name':'baseline'}); print(r, flush=True); time.sleep(120)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()




# A wait's timeout is written for a machine of the suite's size with nothing else on it. On a
# loaded machine every step is slower by about the load per core, so a wait grants that much
# more (up to MAX_SLOWDOWN, so a hang still fails): slower, not red.
MAX_SLOWDOWN = 4.0


def machine_slowdown() -> float:
    """How many times slower than a quiet machine this one runs now: the runnable processes
    per core over the last minute (the load average), at least 1, at most MAX_SLOWDOWN."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # no load average on this platform: take the machine as quiet
        return 1.0
    return min(MAX_SLOWDOWN, max(1.0, load / (os.cpu_count() or 1)))


def scaled(seconds: float) -> float:
    """``seconds`` written for a quiet machine, granted this one's slowdown now: for the waits
    that cannot poll (a subprocess's timeout, ``communicate``, a thread's ``join``)."""
    return seconds * machine_slowdown()


def scaled_ms(ms: int) -> int:
    """``scaled`` in milliseconds, for Playwright's ``expect(...).to_...(timeout=...)`` and
    ``wait_for_*`` (they take milliseconds and cannot be asked again mid-wait)."""
    return int(ms * machine_slowdown())


def wait_until(predicate, timeout: float, what, every: float = 0.05):
    """Poll ``predicate`` until it returns something true; fail naming ``what`` after
    ``timeout`` seconds (times the machine's slowdown while it waited, machine_slowdown).
    Returns what the predicate returned. ``what`` is a string, or a callable asked only at the
    failure (to show the state things were left in). The one wait of the suite: the job and
    page waits below are written over it."""
    import time
    start = time.monotonic()
    slowdown = 1.0
    while True:
        value = predicate()
        if value:
            return value
        # The most loaded moment of the wait counts: a burst of other work delays everything
        # after it, not only what ran during it.
        slowdown = max(slowdown, machine_slowdown())
        waited = time.monotonic() - start
        if waited > timeout * slowdown:
            described = what() if callable(what) else what
            raise AssertionError(f"{described} did not happen within {waited:.0f} s "
                                 f"({timeout:g} s on a quiet machine, x{slowdown:.1f} for "
                                 f"the load)")
        time.sleep(every)


def finished_job(queue, job_id: str, timeout: float = 180, every: float = 0.05):
    """The queue's job ``job_id`` once it has ended (complete, failed, cancelled or
    interrupted); the failure shows the job as it was left."""
    return wait_until(lambda: (job := queue.get(job_id)).finished and job, timeout,
                      lambda: f"job {job_id} ending (left as {queue.get(job_id)})", every)


def finished_jobs(queue, job_ids: list[str], timeout: float, every: float = 0.5) -> list:
    """The jobs ``job_ids`` once every one has ended."""
    def all_ended():
        jobs = [queue.get(i) for i in job_ids]
        return all(j.finished for j in jobs) and jobs
    return wait_until(all_ended, timeout, lambda: "jobs ending (left as "
                      f"{[queue.get(i).status for i in job_ids]})", every)


class MemoryWatchdog:
    """Samples the machine's available memory (MemAvailable) every few milliseconds on a
    thread, for a test to assert it never fell below a share of the total."""

    def __init__(self, every: float = 0.02):
        import threading
        self.every = every
        self.lowest = None
        self.total = self._read("MemTotal")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    @staticmethod
    def _read(field: str) -> int:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
        raise RuntimeError(f"/proc/meminfo has no {field}")

    def _watch(self) -> None:
        while not self._stop.is_set():
            available = self._read("MemAvailable")
            self.lowest = available if self.lowest is None else min(self.lowest, available)
            self._stop.wait(self.every)

    def __enter__(self) -> "MemoryWatchdog":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def listening_addresses(pids) -> list[str]:
    """The local addresses (host:port, as /proc shows them, hex) the processes ``pids`` listen
    on over TCP: their socket inodes matched against /proc/net/tcp and tcp6."""
    inodes = set()
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                try:
                    target = os.readlink(fd)
                except OSError:
                    continue
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                found.append(fields[1])
    return found


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (children, their children...): the memory guard's
    own walk of the process tree."""
    from benchmarks.service.memory_guard import tree
    return [p for p in tree(pid) if p != pid]


def zombies_of(pid: int) -> list[int]:
    """Children of ``pid`` that died and were never reaped."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            after = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if after[0] == "Z" and int(after[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def chromium():
    """A context manager giving a headless Debian Chromium (playwright's Browser); the test is
    skipped where Chromium is missing (failed with REQUIRE_BROWSER=1)."""
    from contextlib import contextmanager

    import pytest
    from playwright.sync_api import sync_playwright

    from tools.browser import CHROMIUM, CHROMIUM_ARGS
    if not os.path.exists(CHROMIUM):
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail(f"{CHROMIUM} is missing and REQUIRE_BROWSER=1")
        pytest.skip("chromium is missing")

    @contextmanager
    def launched():
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                        args=CHROMIUM_ARGS)
            try:
                yield browser
            finally:
                browser.close()
    return launched()


def choose(page, label: str, option: str) -> None:
    """Choose ``option`` in the select box ``label`` of a Streamlit page in Playwright; again
    if a rerun (the URL following a widget, the worker's card appearing) redrew the open menu
    away mid-click, which detaches the option being clicked."""
    import re

    def picked() -> bool:
        box = page.get_by_role("combobox", name=label, exact=True)
        try:
            box.click()
            box.fill(option)
            page.get_by_role("option", name=re.compile(f"^{re.escape(option)}")).first.click(
                timeout=scaled_ms(5_000))
        except Exception:  # playwright's TimeoutError: the menu was redrawn away
            pass
        page.keyboard.press("Escape")  # the menu closed, the box shows what is chosen
        return page.get_by_role("combobox", name=label, exact=True).input_value(
        ).startswith(option)
    wait_until(picked, 60, f"{option} chosen in {label}", every=0.2)


def open_tab(page, name: str, shown, timeout: float = 60) -> None:
    """Open the tab ``name`` until ``shown`` (a locator of what it draws) is visible: clicked
    again, as a person would, where the click landed while a redraw replaced the tabs (a job
    ending reruns the page; a run's tabs grow as its variants land)."""
    tab = page.get_by_role("tab", name=name, exact=True)

    def opened() -> bool:
        try:
            if tab.count() and tab.get_attribute("aria-selected") != "true":
                tab.click(timeout=scaled_ms(5_000))
            return shown.count() > 0 and shown.first.is_visible()
        except Exception:  # playwright's TimeoutError: the tab was redrawn away mid-click
            return False
    wait_until(opened, timeout, f"the {name} tab open", every=1.0)


def torchvision_weights_file(torch_home: Path, name: str, weights: str = "DEFAULT",
                             favour: int | None = None):
    """Fabricated weights of torchvision's ``name`` (seeded random, 1000 classes) saved where
    torch hub keeps ``weights``' file under ``torch_home``; with ``favour``, the classifier
    answers that class for every input. Returns (path, state dict)."""
    import torch
    from torchvision.models import get_model

    from benchmarks.zoo import catalogue
    torch.manual_seed(1)
    model = get_model(name, num_classes=1000)
    if favour is not None:
        head = [m for m in model.modules() if isinstance(m, torch.nn.Linear)][-1]
        with torch.no_grad():
            head.weight.zero_()
            head.bias.zero_()
            head.bias[favour] = 10.0
    entry = catalogue.entry("torchvision", name)
    url = entry["urls"][entry["default"] if weights == "DEFAULT" else weights]
    target = Path(torch_home) / "hub" / "checkpoints" / os.path.basename(url)
    target.parent.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), target)
    return target, model.state_dict()


# The HTML report's size limit (the promise for the default sweep, plotly inside).
REPORT_MAX_BYTES = 5 * 10**6


def report_runs(store) -> tuple[dict, dict]:
    """(default sweep, axis sweep) of conftest's ``report_store``, as the store returns them."""
    from benchmarks.store.database import ResultsStore
    newest_first = ResultsStore(store).runs(kind="sweep")
    return newest_first[1], newest_first[0]


class HtmlScan(HTMLParser):
    """What an HTML file would load: every src/href, <link>, <iframe>, CSS url() and
    @import; and the ids and data-chart names of its chart divs."""

    def __init__(self):
        super().__init__()
        self.loads, self.charts, self.scripts, self.in_style = [], [], 0, False
        self.tables = set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("src", "href", "data", "poster", "srcset"):
            if attrs.get(key):
                self.loads.append((tag, attrs[key]))
        if tag in ("link", "iframe", "object", "embed", "img"):
            self.loads.append((tag, str(attrs)))
        if tag == "script":
            self.scripts += 1
        if tag == "style":
            self.in_style = True
        if "data-chart" in attrs:
            self.charts.append(attrs["data-chart"])
        if tag == "table" and attrs.get("id"):
            self.tables.add(attrs["id"])

    def handle_endtag(self, tag):
        if tag == "style":
            self.in_style = False

    def handle_data(self, data):
        if self.in_style and ("url(" in data or "@import" in data):
            self.loads.append(("style", data))



def png_folder(root: Path, count: int, classes: int = 2, size: int = 8) -> Path:
    """``count`` small PNGs in ``classes`` class folders: one image per class, the rest hard
    links to it (a large folder in a second, the loader still opens every file)."""
    from PIL import Image
    per_class = count // classes
    for c in range(classes):
        folder = root / f"class{c}"
        folder.mkdir(parents=True)
        first = folder / "0.png"
        Image.new("RGB", (size, size), (60 * c, 90, 200 - 60 * c)).save(first)
        for i in range(1, per_class):
            os.link(first, folder / f"{i}.png")
    return root


def small_tmpfs(folder: Path, size: str = "600k", leave_free: int | None = None):
    """A context manager: a tmpfs of ``size`` mounted on ``folder`` (created), optionally
    filled up to ``leave_free`` bytes free, unmounted after; pytest.skip where mounting is not
    allowed (not root, a container without CAP_SYS_ADMIN). The tests that need one also run
    with an injected ENOSPC, so they run everywhere."""
    import contextlib
    import shutil
    import subprocess

    import pytest

    @contextlib.contextmanager
    def mounted():
        folder.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                               str(folder)], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()[:120]}")
        try:
            if leave_free is not None:
                free = shutil.disk_usage(folder).free
                filler = folder / "filler"
                with filler.open("wb") as f:
                    f.write(b"\0" * max(0, free - leave_free))
            yield folder
        finally:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)
    return mounted()


def store_history(store_path: Path, runs: int = 5, slow_run: int = 3,
                  machine: str = "bench-a", model: str = "seed_cnn") -> list[str]:
    """``runs`` stored sweeps of ``model`` on digits, a day apart, a commit each, all timed on
    ``machine``: the baseline and prune-l1-0.5, the same test examples right each time, five
    timing rounds each. Run ``slow_run`` (0-based) is made twice as slow on purpose. Returns
    the run ids, oldest first."""
    import sqlite3

    from benchmarks.report import stats
    from benchmarks.report.results import VariantResult
    from benchmarks.store.database import ResultsStore
    s = ResultsStore(store_path)
    ids = []
    for i in range(runs):
        slow = 2.0 if i == slow_run else 1.0
        run_id = s.start_run(model=model, dataset="digits", device="cpu", spec={},
                             environment={"host": machine, "git_commit": f"c0ffee{i}",
                                          "cpu": "test"})
        for name, base_ms, wrong in (("baseline", 1.0, 20), ("prune-l1-0.5", 0.8, 24)):
            right = [True] * (360 - wrong) + [False] * wrong
            rounds = [slow * base_ms * (1 + 0.01 * ((r + i) % 3)) for r in range(5)]
            s.add_variant(run_id, VariantResult.of(
                name=name, techniques=[] if name == "baseline" else ["prune"],
                accuracy=sum(right) / 360, correct_bits=stats.pack_bits(right), n_test=360,
                latency_samples_ms=[x * (1 + 0.002 * k) for x in rounds for k in range(8)],
                round_p50_ms=rounds, batch_size=32, size_bytes=400_000,
                timing={"method": "interleaved", "rounds": 5}))
        s.finish_run(run_id, "complete")
        ids.append(run_id)
    with sqlite3.connect(store_path) as db:  # a day apart, oldest first
        for day, run_id in enumerate(ids):
            db.execute("UPDATE runs SET created_at=? WHERE run_id=?",
                       (f"2026-01-{day + 1:02d}T09:00:00.000+00:00", run_id))
    return ids


def store_answer_run(store_path, extra: dict | None = None) -> str:
    """A small complete run: a baseline and three pruned variants (scored on the same 2,000
    examples, losing 2, 40 and 200 of those the baseline got right; timed in five rounds,
    each faster than the one before), one variant carrying ``extra`` fields."""
    from benchmarks.report import stats
    from benchmarks.report.results import VariantResult
    from benchmarks.store.database import ResultsStore
    s = ResultsStore(store_path)
    run_id = s.start_run(model="seed_cnn", dataset="digits", device="cpu", spec={},
                         environment={"torch": "-", "cpu": "test", "threads": 1})
    for i, name in enumerate(["baseline", "prune-l1-0.2", "prune-l1-0.5", "prune-l1-0.8"]):
        lost = (0, 2, 40, 200)[i]
        right = [True] * (1900 - lost) + [False] * (100 + lost)
        rounds = [1.0 - 0.2 * i + 0.01 * r for r in range(5)]
        data = VariantResult.of(
            name=name, techniques=[] if i == 0 else ["prune"], accuracy=sum(right) / 2000,
            correct_bits=stats.pack_bits(right), n_test=2000, batch_size=32,
            latency_samples_ms=[x + 0.001 * k for x in rounds for k in range(8)],
            round_p50_ms=rounds, size_bytes=400_000 - 50_000 * i, peak_memory_bytes=10**6,
            memory_method="live_tensor_bytes", layer_sparsity=None if i == 0 else
            {"0": 0.2 * i, "2": 0.25 * i}, timing={"method": "interleaved", "rounds": 5},
            axes={} if i == 0 else {"prune.ratio": [0.2, 0.5, 0.8][i - 1]}).to_dict()
        if i == 1 and extra:
            data.update(extra)
        s.add_variant(run_id, data)
    s.finish_run(run_id, "complete")
    return run_id


def signed(store_path, owner: str) -> dict:
    """A new run's owner as the dashboard's server signs it (its secret, the one public
    ``owner_tag``): ``start_run(..., **signed(path, owner))``. A dashboard believes only an
    owner whose signature verifies."""
    from benchmarks.store.database import new_run_id, owner_tag
    from dashboard.identity import server_secret
    run_id = new_run_id()
    return {"owner": owner, "run_id": run_id,
            "owner_tag": owner_tag(server_secret(Path(store_path)), run_id, owner)}


def sign_owner(store_path, run_id: str, owner: str) -> None:
    """Give unowned (CLI) run ``run_id`` to ``owner``, signed as the dashboard's server would."""
    from benchmarks.store.database import ResultsStore
    from dashboard.identity import server_secret
    ResultsStore(store_path, server_secret(Path(store_path))).sign_owner(run_id, owner)


def owned_copy(store_path, run_id: str, owner: str) -> str:
    """A copy of stored run ``run_id`` (its variants with it) owned by ``owner``, signed: a
    run's owner is set when it starts and never changed, and only its owner queues jobs on it
    (a CLI run has none). Returns the copy's id."""
    import sqlite3
    import uuid
    copy_id = f"{run_id.rsplit('-', 1)[0]}-{uuid.uuid4().hex[:8]}"
    with sqlite3.connect(store_path) as db:
        for table in ("runs", "variants"):
            columns = [c[1] for c in db.execute(f"PRAGMA table_info({table})")
                       if c[1] not in ("run_id", "owner", "owner_tag")]
            extra = ", owner" if table == "runs" else ""
            values = ", ?" if table == "runs" else ""
            db.execute(f"INSERT INTO {table} (run_id{extra}, {', '.join(columns)}) "
                       f"SELECT ?{values}, {', '.join(columns)} FROM {table} WHERE run_id=?",
                       (copy_id, owner, run_id) if table == "runs" else (copy_id, run_id))
    from benchmarks.store.database import ResultsStore, owner_tag
    from dashboard.identity import server_secret
    with ResultsStore(store_path).transaction() as db:
        db.execute("UPDATE runs SET owner_tag=? WHERE run_id=?",
                   (owner_tag(server_secret(Path(store_path)), copy_id, owner), copy_id))
    return copy_id


# Every answer card's text (a browser test's page.evaluate): an ellipsis, or an element that
# clips what it holds (wider content than its box, overflow not visible), or text past the
# card's own right edge.
CUT_JS = """() => {
  const cut = [];
  for (const card of document.querySelectorAll('[data-testid="stMetric"]')) {
    const edge = card.getBoundingClientRect().right;
    if (card.innerText.includes('\\u2026')) cut.push(['ellipsis', card.innerText]);
    for (const el of card.querySelectorAll('*')) {
      if (!el.textContent.trim() || el.clientWidth === 0) continue;
      const s = getComputedStyle(el);
      if (el.scrollWidth > el.clientWidth + 1 && s.overflowX !== 'visible')
        cut.push(['clipped', el.textContent, el.scrollWidth, el.clientWidth]);
      if (s.textOverflow === 'ellipsis' && el.scrollWidth > el.clientWidth + 1)
        cut.push(['text-overflow', el.textContent]);
      if (el.getBoundingClientRect().right > edge + 1)
        cut.push(['past the card', el.textContent]);
    }
  }
  return cut;
}"""


def cut_cards(page, timeout_ms: int = 30_000) -> list:
    """What ``CUT_JS`` finds on the page's answer cards, once it finds nothing or
    ``timeout_ms`` (scaled) has passed: the cards' style (``answer_cards.CARDS_CSS``) can land
    after the cards on a loaded machine, and a card cut for that moment is not cut."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    try:
        page.wait_for_function(f"({CUT_JS})().length === 0", timeout=scaled_ms(timeout_ms))
    except PlaywrightTimeout:
        pass  # cut for good: the caller's assertion shows what
    return page.evaluate(CUT_JS)


def namespace_command(base: Path, command: list[str]) -> list[str]:
    """``command`` in a private mount namespace where the interpreter's closed ancestor (if
    any: /root, 0700, holding pyenv) is an open tmpfs holding just the interpreter's
    installation, so a worker of another user can run it (nothing changes outside it)."""
    from benchmarks.service.account import Account, blocked_at
    python = Path(sys.executable).resolve()
    closed = blocked_at(python, Account("nobody", 65534, 65534))
    if closed is None:
        return command
    inside = python.relative_to(closed).parts[0]  # e.g. .pyenv under /root
    stage = base / "stage"
    stage.mkdir()
    script = (f"set -e; mount --make-rprivate /; mount --bind {closed / inside} {stage}; "
              f"mount -t tmpfs -o mode=0755 tmpfs {closed}; mkdir -p {closed / inside}; "
              f"mount --bind {stage} {closed / inside}; exec \"$@\"")
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
            *command]


def root_server(base: Path, user: str, models: Path, **env: str):
    """A context manager: `streamlit run serve.py` as root over ``base/srv/results.db``, its
    worker as ``user`` (created by the product if absent, and removed afterwards once its
    processes are gone); yields the store's path. The server's output is ``base/server.log``."""
    import pwd
    import shutil
    import subprocess
    from contextlib import contextmanager

    from tools.browser import free_port, stop_server, wait_healthy

    @contextmanager
    def running():
        try:
            pwd.getpwnam(user)
            created = False
        except KeyError:
            created = True  # the product creates it (useradd --system)
        store = base / "srv" / "results.db"
        port = free_port()
        full = {**os.environ, "COMPRESSION_BENCH_STORE": str(store),
                "COMPRESSION_BENCH_CACHE": str(base / "cache"),
                "COMPRESSION_BENCH_MODELS_DIR": str(models),
                "COMPRESSION_BENCH_WORKER_USER": user, "COMPRESSION_BENCH_WORKER_MEMORY": "off",
                "TORCH_HOME": str(base / "hub"), "HF_HOME": str(base / "hub"), **env}
        full.pop("COMPRESSION_BENCH_SECRET", None)
        log = open(base / "server.log", "wb")  # noqa: SIM115 (the server's, closed below)
        proc = subprocess.Popen(namespace_command(base, [
            sys.executable, "-m", "streamlit", "run", "serve.py", "--server.port", str(port),
            "--server.headless", "true"]), cwd=ROOT, env=full, stdout=log, stderr=log,
            start_new_session=True)
        try:
            wait_healthy(f"http://localhost:{port}", proc)
            yield store
        finally:
            try:
                stop_server(proc, store)
                log.close()
                if created:  # once its processes are gone (userdel refuses a running user)
                    uid = pwd.getpwnam(user).pw_uid

                    def runs_as_user(proc: Path) -> bool:
                        try:
                            return proc.stat().st_uid == uid
                        except OSError:  # ended meanwhile
                            return False
                    wait_until(lambda: not any(runs_as_user(p) for p in Path("/proc").glob(
                        "[0-9]*")), 30, f"{user}'s processes ending")
                    done = subprocess.run(["userdel", user], capture_output=True, text=True)
                    assert done.returncode == 0, done.stderr
            finally:
                shutil.rmtree(base, ignore_errors=True)
    return running()
