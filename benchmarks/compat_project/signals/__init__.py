from sqlmesh import DatetimeRanges, signal
from sqlmesh.utils.date import to_datetime


@signal()
def settled_before(batch: DatetimeRanges, cutoff: str) -> bool | DatetimeRanges:
    """Only intervals that end by `cutoff` are settled (their refunds are known)."""
    limit = to_datetime(cutoff)
    return [(start, end) for start, end in batch if end <= limit]
