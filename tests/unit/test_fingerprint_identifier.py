"""A fingerprint's identifier is computed once (issue 36): it must still follow the hashes it names."""

from types import SimpleNamespace

from mesh_dagster.core.snapshots.fingerprint import with_parents
from mesh_dagster.core.snapshots.snapshot import SnapshotFingerprint, hash_values


def _expected(fp: SnapshotFingerprint) -> str:
    return hash_values([fp.data_hash, fp.metadata_hash, fp.parent_data_hash, fp.parent_metadata_hash])


def test_a_rechained_fingerprint_names_its_own_hashes_not_those_it_was_made_from():
    child = SnapshotFingerprint(data_hash="1", metadata_hash="2")
    before = child.identifier  # computed now, and kept by this (frozen) fingerprint
    parent = SimpleNamespace(fingerprint=SnapshotFingerprint(data_hash="3", metadata_hash="4"))
    rechained = with_parents(child, [parent])  # type: ignore[list-item] - only its fingerprint is read
    assert rechained.parent_data_hash != child.parent_data_hash
    assert rechained.identifier == _expected(rechained) != before
    assert child.identifier == before == _expected(child)
