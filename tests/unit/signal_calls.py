"""Where the test signals of tests/unit/test_signals.py record their calls: a plan captures a
signal's code into the snapshot (core/snapshots/capture.py), so the list must live in an installed module the
stored code imports, not in the signals/ file (each capture runs its own copy of that file)."""

CALLS: list[tuple] = []
