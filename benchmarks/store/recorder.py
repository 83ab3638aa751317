"""The one run lifecycle: start, record each variant as it is measured, finish or fail.

The CLI, the queue's worker and the distributed benchmark all record through it, so a run
ends the same way whoever ran it.
"""

from __future__ import annotations

from benchmarks.report.results import VariantResult


class RunRecorder:
    """One run's lifecycle in the store: each variant is written the moment it is measured,
    and the run ends ``complete`` (every variant ok), ``failed`` (some variant failed, or the
    run raised: its reason is kept) or ``interrupted`` (stopped: Ctrl-C, SIGTERM, a cancel).

        with store.record(model=..., ...) as run:
            for result in sweep.run():
                run.add(result)
    """

    def __init__(self, store, run_id: str):  # store: a ResultsStore
        self.store, self.run_id = store, run_id
        self.failed: dict[int, str] = {}
        self.finished = False

    def add(self, result: VariantResult | dict, position: int | None = None) -> int:
        data = result.to_dict() if isinstance(result, VariantResult) else result
        position = self.store.add_variant(self.run_id, data, position)
        if data.get("error"):
            self.failed[position] = data.get("name") or str(position)
        else:
            self.failed.pop(position, None)
        return position

    def set_environment(self, environment: dict) -> None:
        self.store.set_environment(self.run_id, environment)

    def finish(self, status: str | None = None, error: str | None = None) -> str:
        """End the run: ``status`` as given, else complete or failed by the variants."""
        if status is None:
            status = "failed" if self.failed else "complete"
            if self.failed and error is None:
                error = f"{len(self.failed)} variant(s) failed: " + \
                    ", ".join(self.failed.values())
        self.store.finish_run(self.run_id, status, error)
        self.finished = True
        return status

    def __enter__(self) -> "RunRecorder":
        return self

    def __exit__(self, kind, exc, tb) -> None:
        if self.finished:
            return
        if kind is None:
            self.finish()
        elif issubclass(kind, (KeyboardInterrupt, SystemExit)):
            self.finish("interrupted", "stopped before the run finished")
        else:
            from benchmarks.spec.atomic import DiskFull
            from optimizers.errors import described
            # A full disk's line names the folder and its free space as it is: kept whole.
            line = str(exc) if isinstance(exc, DiskFull) else described(exc)
            try:
                self.finish("failed", line)
            except DiskFull:
                pass  # the store's own disk is full: the run's error is what to raise
