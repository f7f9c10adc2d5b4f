"""core/config/redaction.py: which settings are secrets, and secrets inside URLs."""

from __future__ import annotations

import pytest

from mesh_dagster.core.config.redaction import is_secret_name, redact_settings, redact_text, shorten


@pytest.mark.parametrize("name", [
    "spark.hadoop.fs.s3a.secret.key", "spark.hadoop.fs.s3a.access.key", "password", "metastore.passwd",
    "fs.azure.sas.token", "spark.authenticate.secret", "accessKey", "awsSecretAccessKey", "SASToken",
    "spark.hadoop.javax.jdo.option.ConnectionPassword", "google.cloud.auth.service.account.json.keyfile.credentials",
])
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", [
    "spark.sql.shuffle.partitions", "spark.driver.memory", "spark.authenticate", "spark.sql.warehouse.dir",
    "master", "remote", "monkey", "keyword_case",
])
def test_not_secret_names(name: str) -> None:
    assert not is_secret_name(name)


@pytest.mark.parametrize(("text", "shown"), [
    ("sc://h:15002/;token=abc;user_id=ann", "sc://h:15002/;token=***;user_id=ann"),
    ("sc://h:15002/; Token = abc", "sc://h:15002/; Token = ***"),
    ("https://bob:pw@hooks.example.com/x", "https://bob:***@hooks.example.com/x"),
    ("https://bob@hooks.example.com/x", "https://bob@hooks.example.com/x"),
    ("jdbc:postgresql://h/db?user=a&password=b&ssl=true", "jdbc:postgresql://h/db?user=a&password=***&ssl=true"),
    ("no url here: a=b; c", "no url here: a=b; c"),
])
def test_redact_text(text: str, shown: str) -> None:
    assert redact_text(text) == shown


def test_redact_settings_hides_values_by_name_and_inside_text() -> None:
    settings = {"remote": "sc://h:1/;token=t", "config": {"fs.s3a.secret.key": "s", "spark.sql.shuffle.partitions": 8},
                "metastore": {"password": "p", "user": "u", "token": None}, "list": ["https://a:b@c/"]}
    assert redact_settings(settings) == {
        "remote": "sc://h:1/;token=***", "config": {"fs.s3a.secret.key": "***", "spark.sql.shuffle.partitions": 8},
        "metastore": {"password": "***", "user": "u", "token": None}, "list": ["https://a:***@c/"]}


def test_shorten() -> None:
    assert shorten("abc", 5) == "abc"
    assert shorten("x" * 1005, 5) == "xxxxx... (1,000 more characters)"
