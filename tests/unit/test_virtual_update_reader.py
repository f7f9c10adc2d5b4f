"""Reading `ON_VIRTUAL_UPDATE_BEGIN; ... ON_VIRTUAL_UPDATE_END;` in model files: the statements are
the model's `on_virtual_update` (never post-statements), an edit of them is a metadata change, and a
malformed block is refused at its line (running them on Spark: tests/spark/test_virtual_update_spark.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mesh_dagster.core.config.config import ModelDefaults
from mesh_dagster.core.errors import ModelError
from mesh_dagster.core.project.model_reader import read_model_file


def _read(text: str):
    return read_model_file(text, "models/m.sql", Path("models/m.sql"), ModelDefaults())


def test_the_block_holds_the_models_virtual_update_statements() -> None:
    model = _read("MODEL (name db.m, kind FULL);\nSELECT 1 AS a;\nSET x = 1;\n"
                  "ON_VIRTUAL_UPDATE_BEGIN;\nGRANT SELECT ON VIEW @this_model TO ROLE r;\n"
                  "JINJA_STATEMENT_BEGIN;\nGRANT SELECT ON VIEW {{ this_model }} TO ROLE s;\nJINJA_END;\n"
                  "ON_VIRTUAL_UPDATE_END;\n")
    assert model.post_statements == ["SET x = 1"]
    assert model.on_virtual_update == ["GRANT SELECT ON VIEW @this_model TO ROLE r",
                                       "JINJA_STATEMENT_BEGIN;\nGRANT SELECT ON VIEW {{ this_model }} TO ROLE s;\n"
                                       "JINJA_END"]


@pytest.mark.parametrize("body, line, message", [
    ("ON_VIRTUAL_UPDATE_BEGIN;\nGRANT SELECT ON VIEW @this_model TO ROLE r;\n", 3,
     "ON_VIRTUAL_UPDATE_BEGIN is never closed with ON_VIRTUAL_UPDATE_END;"),
    ("ON_VIRTUAL_UPDATE_BEGIN;\nGRANT SELECT ON VIEW @this_model TO ROLE r\nON_VIRTUAL_UPDATE_END;\n", 3,
     "ON_VIRTUAL_UPDATE_BEGIN is never closed with ON_VIRTUAL_UPDATE_END; (a `;` is missing before "
     "ON_VIRTUAL_UPDATE_END)"),
    ("GRANT SELECT ON VIEW @this_model TO ROLE r;\nON_VIRTUAL_UPDATE_END;\n", 4,
     "ON_VIRTUAL_UPDATE_END without ON_VIRTUAL_UPDATE_BEGIN before it"),
    ("ON_VIRTUAL_UPDATE_BEGIN;\nON_VIRTUAL_UPDATE_BEGIN;\nON_VIRTUAL_UPDATE_END;\n", 4,
     "ON_VIRTUAL_UPDATE_BEGIN inside the block opened at line 3"),
])
def test_malformed_blocks_are_refused_at_their_line(body: str, line: int, message: str) -> None:
    with pytest.raises(ModelError) as e:
        _read("MODEL (name db.m, kind FULL);\nSELECT 1 AS a;\n" + body)
    assert (e.value.path, e.value.line) == ("models/m.sql", line) and message in e.value.message


def test_an_edit_of_the_statements_is_a_metadata_change_only() -> None:
    from mesh_dagster.core.snapshots.capture import Capture
    from mesh_dagster.core.snapshots.fingerprint import data_hash, metadata_hash

    head = "MODEL (name db.m, kind FULL);\nSELECT 1 AS a;\n"
    plain = _read(head)
    one, two = (_read(head + f"ON_VIRTUAL_UPDATE_BEGIN;\nGRANT SELECT ON VIEW @this_model TO ROLE {r};\n"
                             "ON_VIRTUAL_UPDATE_END;\n") for r in ("a", "b"))
    capture = Capture()
    assert data_hash(plain, capture) == data_hash(one, capture) == data_hash(two, capture)
    assert len({metadata_hash(m, capture) for m in (plain, one, two)}) == 3
