"""A stored sensitivity map as its readers get it: typed records read from the stored run (a
run of kind "sensitivity": its summary in the environment card, a cell per stored variant),
the JSON contract unchanged. The map's figures read ``MapCell``s, never a row's keys.
Torch-free: the dashboard reads it."""

from __future__ import annotations

from dataclasses import dataclass, field, fields


@dataclass(frozen=True)
class MapCell:
    """One group changed alone at one level: its paired accuracy change against the baseline
    (points, with the interval and p-value of one test) and its group's share of the
    baseline's latency; ``error`` where its measurement failed."""
    name: str
    root: str
    level: float
    kind: str | None = None
    group: tuple[str, ...] = ()
    evaluated_on: str | None = None     # "subset" (screened) or "full" (confirmed)
    latency_share: float | None = None
    accuracy_change: float | None = None
    accuracy_change_ci: tuple[float, float] | None = None
    p_value: float | None = None
    sqnr_db: float | None = None
    error: str | None = None

    @property
    def measured(self) -> bool:
        return self.error is None and self.accuracy_change is not None

    @property
    def within_noise(self) -> bool:
        """Its interval holds zero: no change shown, either way."""
        ci = self.accuracy_change_ci
        return bool(ci) and ci[0] <= 0 <= ci[1]

    @classmethod
    def from_dict(cls, row: dict) -> "MapCell":
        names = {f.name for f in fields(cls)}
        data = {k: v for k, v in row.items() if k in names}
        data["group"] = tuple(row.get("group") or ())
        ci = row.get("accuracy_change_ci")
        data["accuracy_change_ci"] = None if not ci else (float(ci[0]), float(ci[1]))
        return cls(**data)


@dataclass(frozen=True)
class StoredMap:
    """A map as stored: what it measured (technique, levels, the screening subset, the
    confirmed groups), its cells, and the schedule it proposed where it did. ``rows`` are the
    cells as stored, what the schedule builder and the cell table read (the JSON contract)."""
    model: str | None
    technique: str | None
    cells: tuple[MapCell, ...]
    rows: tuple[dict, ...] = ()
    levels: tuple[float, ...] = ()
    baseline: dict = field(default_factory=dict)
    subset: dict = field(default_factory=dict)
    confirmed: tuple[str, ...] = ()
    schedule: dict | None = None
    config: dict = field(default_factory=dict)

    @classmethod
    def from_run(cls, run: dict) -> "StoredMap":
        summary = (run.get("environment") or {}).get("sensitivity") or {}
        rows = tuple(run.get("variants") or [])
        return cls(
            model=summary.get("model") or run.get("model"),
            technique=summary.get("technique") or ((run.get("spec") or {}).get("sensitivity")
                                                   or {}).get("technique"),
            cells=tuple(MapCell.from_dict(r) for r in rows), rows=rows,
            levels=tuple(summary.get("levels") or ()), baseline=summary.get("baseline") or {},
            subset=summary.get("subset") or {},
            confirmed=tuple(map(str, summary.get("confirmed") or ())),
            schedule=summary.get("schedule"), config=summary.get("config") or {})
