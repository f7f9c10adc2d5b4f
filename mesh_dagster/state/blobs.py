"""Content snapshots captured that is too large for their JSON payload (a seed's CSV bytes).

Stored once per digest, zlib-compressed, in the same transaction as the snapshots that refer to
it, and never changed: an evaluation of a snapshot read back fetches its content by digest,
whatever the file on disk holds by then.
"""

from __future__ import annotations

import zlib

from sqlalchemy import Connection, select

from mesh_dagster.state import schema


def blob_rows(content: dict[str, bytes], ts: int) -> list[dict]:
    return [{"digest": digest, "content": zlib.compress(data, 6), "size": len(data), "created_ts": ts}
            for digest, data in content.items()]


def read_blob(conn: Connection, digest: str) -> bytes | None:
    row = conn.execute(select(schema.blobs.c.content).where(schema.blobs.c.digest == digest)).first()
    return zlib.decompress(row[0]) if row is not None else None
