"""How a failed step reads, as the UI shows it: Dagster's line naming the op, then the model's own
one-line error (mesh.ModelFailed, without a stack trace); for the promote and plan jobs (ops, not
models), the Failure's description."""

from __future__ import annotations

import dagster as dg


def failure_text(result: dg.ExecuteInProcessResult | dg.JobExecutionResult) -> str:
    """Every step failure of the run, each as its message and its cause's."""
    lines = []
    for event in result.all_events:
        if event.event_type_value != "STEP_FAILURE":
            continue
        error = event.step_failure_data.error
        lines.append(error.message.strip())
        if error.cause is not None:
            assert error.cause.stack == [], error.cause.stack  # one line: no stack trace shown
            lines.append(error.cause.message.strip())
    return "\n".join(lines)
