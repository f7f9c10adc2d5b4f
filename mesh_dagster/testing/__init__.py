"""YAML unit tests: definitions (`tests/test*.yaml`) and their runner on Spark."""

from mesh_dagster.testing.definition import ExpectedOutput, TestInput, UnitTest, load_tests
from mesh_dagster.testing.runner import TestReport, TestResult, run_test, run_tests

__all__ = ["ExpectedOutput", "TestInput", "TestReport", "TestResult", "UnitTest", "load_tests", "run_test", "run_tests"]
