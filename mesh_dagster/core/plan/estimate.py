"""What a plan's backfill will cost: estimated from how long earlier batches took.

Every batch an apply, a `mesh run` or a Dagster run writes is timed and kept in the state store
(`BatchTiming`, state schema 8). A plan's backfill is then estimated model by model, from what the
model's own batches took — this version's first, else its earlier versions' — and, for a model
with no history (a new one), from its parents' batches. A batch costs a fixed part (planning the
query, writing files) and a part growing with the intervals it covers: with timings of batches of
several sizes both are fitted; with one size only, the cost of a batch of another size is
scaled from it, and said to be a guess. Each estimate says how sure it is, and the total is only
as sure as its least sure large part.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from pydantic import BaseModel

from mesh_dagster.core.plan.backfills import Backfill, interval_count
from mesh_dagster.core.snapshots.snapshot import Snapshot


@dataclass(frozen=True)
class BatchTiming:
    """One batch written: its model, version, intervals covered (`units`) and seconds taken."""

    name: str
    version: str
    units: int
    seconds: float
    full_refresh: bool = False


class Sureness(str, Enum):
    HIGH = "high"  # this version's own batches, of the sizes asked, steady
    MEDIUM = "medium"  # its earlier versions', or few or unsteady timings
    LOW = "low"  # scaled to another batch size, or its parents' timings
    NONE = "none"  # nothing to go by

    @property
    def rank(self) -> int:
        return list(Sureness).index(self)


class ModelEstimate(BaseModel):
    seconds: float | None  # None: nothing to go by
    sureness: Sureness
    basis: str  # what it is estimated from, in words


class BackfillEstimate(BaseModel):
    """A plan's backfill, estimated per model and in total (seconds of work, models one after another)."""

    models: dict[str, ModelEstimate]
    total_s: float
    sureness: Sureness
    unknown: list[str]  # models with nothing to go by (not in the total)

    @property
    def known(self) -> bool:
        """Whether anything was estimated (a first plan, nothing timed yet: nothing)."""
        return len(self.unknown) < len(self.models)

    def suffix(self, name: str, sureness: bool = False) -> str:
        """` ~12s` (with `sureness`: ` ~12s (high)`), as model `name`'s backfill line ends; nothing
        when there is nothing to go by."""
        found = self.models.get(name)
        if found is None or found.seconds is None:
            return ""
        return f" ~{duration_text(found.seconds)}" + (f" ({found.sureness.value})" if sureness else "")

    def took(self, seconds: float) -> str:
        """What the backfill took, beside what was estimated."""
        return (f"Backfill took {duration_text(seconds)} of work; estimated {duration_text(self.total_s)} "
                f"({self.sureness.value} confidence)")

    def line(self) -> str:
        """The estimate in one line, as `mesh plan` prints it."""
        counted = len(self.models) - len(self.unknown)
        missing = f"; {len(self.unknown)} model(s) with no timings to go by" if self.unknown else ""
        return (f"Estimated backfill: {duration_text(self.total_s)} of work ({self.sureness.value} confidence, "
                f"{counted} model(s) from earlier batches{missing})")


@dataclass(frozen=True)
class Work:
    """A model's backfill as batches: how many intervals each covers (one entry per batch)."""

    name: str
    version: str
    batches: tuple[int, ...]
    full_refresh: bool
    parents: tuple[str, ...] = ()


def backfill_work(snapshots: Mapping[str, Snapshot], backfills: Mapping[str, Backfill]) -> list[Work]:
    """The batches a plan's `backfills` will write, model by model (as the scheduler cuts them:
    `batch_size` intervals a batch, else one batch a contiguous range; a full refresh is one)."""
    out = []
    for name, backfill in backfills.items():
        snap = snapshots[name]
        model = snap.model
        full = backfill.full_refresh or not model.kind.is_incremental
        if full:
            sizes: tuple[int, ...] = (interval_count(model, backfill.intervals) or 1,)
        elif model.batch_size:
            units = interval_count(model, backfill.intervals)
            sizes = (model.batch_size,) * (units // model.batch_size) + ((units % model.batch_size,) if
                                                                          units % model.batch_size else ())
        else:
            sizes = tuple(interval_count(model, [interval]) for interval in backfill.intervals)
        out.append(Work(name, snap.version or "", sizes, full, tuple(p.name for p in snap.parents)))
    return out


def estimate(work: Sequence[Work], history: Mapping[str, Sequence[BatchTiming]]) -> BackfillEstimate:
    """The backfill of `work`, from the timings in `history` (by model name, oldest first)."""
    models = {w.name: _model_estimate(w, history) for w in work}
    known = {n: m for n, m in models.items() if m.seconds is not None}
    total = sum(m.seconds or 0.0 for m in known.values())
    large = [m for m in known.values() if (m.seconds or 0.0) >= total * 0.1] or list(known.values())
    sureness = max((m.sureness for m in large), key=lambda s: s.rank, default=Sureness.NONE)
    return BackfillEstimate(models=models, total_s=total, sureness=sureness,
                            unknown=sorted(n for n, m in models.items() if m.seconds is None))


def _model_estimate(work: Work, history: Mapping[str, Sequence[BatchTiming]]) -> ModelEstimate:
    own = [t for t in history.get(work.name, ()) if t.full_refresh == work.full_refresh]
    same = [t for t in own if t.version == work.version]
    if same:
        return _from(work, same, Sureness.HIGH, f"{len(same)} batch(es) of this version")
    if own:
        return _from(work, own, Sureness.MEDIUM, f"{len(own)} batch(es) of earlier versions")
    parents = [t for p in work.parents for t in history.get(p, ()) if t.full_refresh == work.full_refresh]
    if parents:  # (`_from` never raises LOW)
        return _from(work, parents, Sureness.LOW, f"its parents' {len(parents)} batch(es)")
    return ModelEstimate(seconds=None, sureness=Sureness.NONE, basis="no batch of it or its parents timed yet")


def _from(work: Work, timings: Sequence[BatchTiming], sureness: Sureness, basis: str) -> ModelEstimate:
    recent = list(timings)[-50:]
    fixed, per_unit = _fit(recent)
    sizes = {t.units for t in recent}
    seconds = sum(fixed + per_unit * units for units in work.batches)
    if not set(work.batches) <= sizes and len(sizes) < 2:
        sureness = Sureness.LOW  # another batch size, scaled from one size only
    elif len(recent) < 3 or _unsteady(recent):
        sureness = max(sureness, Sureness.MEDIUM, key=lambda s: s.rank)
    return ModelEstimate(seconds=seconds, sureness=sureness, basis=basis)


def _fit(timings: Sequence[BatchTiming]) -> tuple[float, float]:
    """(fixed seconds per batch, seconds per interval): least squares over batches of several sizes;
    with one size, all of it per interval (a larger batch costs proportionally more: the cautious guess)."""
    xs = [float(t.units) for t in timings]
    ys = [t.seconds for t in timings]
    if len(set(xs)) < 2:
        return 0.0, statistics.median(ys) / max(xs[0], 1.0)
    slope, intercept = statistics.linear_regression(xs, ys)
    if slope < 0 or intercept < 0:  # noise: fall back to the cautious guess
        return 0.0, statistics.median(y / max(x, 1.0) for x, y in zip(xs, ys, strict=True))
    return intercept, slope


def _unsteady(timings: Sequence[BatchTiming]) -> bool:
    per_unit = [t.seconds / max(t.units, 1) for t in timings]
    mean = statistics.fmean(per_unit)
    return mean > 0 and statistics.pstdev(per_unit) / mean > 0.5


def duration_text(seconds: float) -> str:
    """`42s`, `3m 05s`, `1h 02m`."""
    whole = int(math.ceil(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {(whole % 3600) // 60:02d}m"
