"""What a code location notes of the versions it counted as pending (dagster/mapping/pending.py), for
`mesh ui`'s watch to reload it when their intervals change."""

from __future__ import annotations

from pathlib import Path

from mesh_dagster.dagster.mapping.pending import note_pending, noted_pending, pending_file


def test_a_note_is_read_back_sorted_and_without_repeats(tmp_path: Path) -> None:
    note_pending(tmp_path, "prod", [("s.b", "v2"), ("s.a", "v1"), ("s.b", "v2")])
    assert noted_pending(tmp_path, "prod") == [("s.a", "v1"), ("s.b", "v2")]
    assert noted_pending(tmp_path, "dev") == []  # nothing noted for it
    assert not list(pending_file(tmp_path, "prod").parent.glob("*.tmp"))  # written whole, nothing left


def test_an_unreadable_note_is_none_and_an_unwritable_folder_notes_nothing(tmp_path: Path) -> None:
    note_pending(tmp_path, "prod", [("s.a", "v1")])
    pending_file(tmp_path, "prod").write_text("{half")
    assert noted_pending(tmp_path, "prod") == []
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where .mesh would go")
    note_pending(blocked, "prod", [("s.a", "v1")])  # no error: only mesh ui reads notes
    assert noted_pending(blocked, "prod") == []
