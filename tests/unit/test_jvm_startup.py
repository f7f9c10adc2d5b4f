"""The test run's JVM options: a JVM serving a whole module gets tiered compilation back, and the
options of every other JVM are as they were afterwards."""

from __future__ import annotations

import os

import pytest

from tests import jvm_startup


def test_a_long_lived_jvm_starts_without_c1_only_and_the_rest_is_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    options = "-XX:SharedArchiveFile=/x.jsa -Xlog:cds*=off -XX:TieredStopAtLevel=1 -Dmine=1"
    monkeypatch.setenv(jvm_startup.ENV, options)
    with jvm_startup.long_lived():
        assert os.environ[jvm_startup.ENV] == "-XX:SharedArchiveFile=/x.jsa -Xlog:cds*=off -Dmine=1"
    assert os.environ[jvm_startup.ENV] == options


def test_without_options_nothing_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(jvm_startup.ENV, raising=False)
    with jvm_startup.long_lived():
        assert jvm_startup.ENV not in os.environ
    assert jvm_startup.ENV not in os.environ
