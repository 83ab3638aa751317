"""What a planned sweep or recommendation will take, said before the click: from this
worker's earlier runs of the model and data set (``benchmarks.run.estimate``), else from the
machine's speed in the worker's card (``benchmarks.run.first_estimate``)."""

from __future__ import annotations

import streamlit as st

from dashboard.state import queue, store_path, worker_card


# Keyed by the store's finished mark as well as a short lifetime: a run that ends is in the
# next estimate drawn, however soon after it the page is drawn again.
@st.cache_data(ttl=15, show_spinner=False)
def _history(path: str, model: str, dataset: str, mark: tuple) -> list[dict]:
    from benchmarks.run.estimate import HISTORY_RUNS
    return queue().store.runs(limit=HISTORY_RUNS, kind="sweep", model=model, dataset=dataset)


@st.cache_data(ttl=15, show_spinner=False)
def _any_history(path: str, mark: tuple) -> list[dict]:
    from benchmarks.run.estimate import HISTORY_RUNS
    return queue().store.runs(limit=HISTORY_RUNS, kind="sweep")


def _mark() -> tuple:
    return queue().store.finished_mark()


def describe_estimate(spec) -> str:
    """"N variants; about T" for a planned sweep, from this worker's earlier runs of its model
    and data set, else from the machine's speed in the worker's card."""
    from benchmarks.run.estimate import estimate_sweep
    try:
        runs = _history(str(store_path()), spec.model, spec.dataset, _mark())
    except Exception:
        runs = []
    estimate = estimate_sweep(spec, runs)
    speed = (worker_card("cpu") or {}).get("speed")
    if estimate.seconds is None and speed:
        try:
            earlier = _any_history(str(store_path()), _mark())
        except Exception:
            earlier = []
        estimate = estimate_sweep(spec, runs, speed=speed, earlier=earlier)
    return estimate.describe()


def describe_recommend_estimate(model: str, dataset: str, trials: int,
                                budget_s: float | None, spec: dict | None = None) -> str:
    """"about T (from ...)" for a planned recommendation, from this worker's earlier runs;
    before any, from the machine's speed and the work of ``spec`` (the page's sweep on the
    recommendation's data)."""
    from benchmarks.run.estimate import estimate_recommend
    try:
        runs = _history(str(store_path()), model, dataset, _mark())
        earlier = _any_history(str(store_path()), _mark())
    except Exception:
        runs, earlier = [], []
    speed = (worker_card("cpu") or {}).get("speed")
    return estimate_recommend(trials, runs, budget_s, spec=spec, speed=speed,
                              earlier=earlier).describe()
