"""How the CLI shows an apply or a run going: rich progress bars and a line per batch, as in the
SQLMesh quickstart (format only).

Apart from console.py because it is Context's listener (`ApplyListener`): only the commands that
apply or run import it, so the others — `mesh --help` first — load none of Context's modules.
"""

from __future__ import annotations

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.text import Text

from mesh_dagster.cli.console import console
from mesh_dagster.context import ApplyListener
from mesh_dagster.core.config.display import printable


def _progress(title: str) -> Progress:
    return Progress(
        TextColumn(f"{title:<23}"),
        BarColumn(bar_width=40),
        TextColumn("{task.percentage:>5.1f}%"),
        TextColumn("•"),
        MofNCompleteColumn(),
        TextColumn("•"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )


class ConsoleListener(ApplyListener):
    """Rich progress bars and per-batch lines, as in the SQLMesh quickstart."""

    def __init__(self) -> None:
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def _start(self, title: str, total: int) -> None:
        console.print()
        if self._progress is not None:  # a stage that failed half-way left its bar running
            self._progress.stop()
        self._progress = _progress(title)
        self._progress.start()
        self._task = self._progress.add_task(title, total=total)

    def _advance(self) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.advance(self._task)

    def _stop(self, message: str) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        console.print(f"\n[green]✔[/green] {message}")

    def close(self) -> None:
        """Stop a live bar left running by a failure, so the error prints cleanly."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def physical_start(self, total: int) -> None:
        self._start("Updating physical layer", total)

    def physical_progress(self, name: str) -> None:
        self._advance()

    def physical_done(self, total: int) -> None:
        self._stop("Physical layer updated")

    def backfill_start(self, total_batches: int) -> None:
        self._start("Executing model batches", total_batches)

    def batch_done(self, name, index, count, description, seconds, audits_passed, audits_failed) -> None:
        line = Text(printable(f"[{index}/{count}] {name:<40} [{description}"))
        if audits_passed or audits_failed:
            line.append(", audits ")
            line.append(f"✔{audits_passed}", style="green")
            if audits_failed:
                line.append(f" ✘{audits_failed}", style="red")
        line.append("]")
        line.pad_right(max(0, 90 - len(line)))
        line.append(f" {seconds:.2f}s")
        # Printed above the live bar, like SQLMesh's per-batch lines.
        (self._progress.console if self._progress is not None else console).print(line)
        self._advance()

    def backfill_done(self, total_batches: int) -> None:
        self._stop("Model batches executed")

    def virtual_start(self, total: int) -> None:
        self._start("Updating virtual layer", total)

    def virtual_progress(self, name: str) -> None:
        self._advance()

    def virtual_done(self, total: int) -> None:
        self._stop("Virtual layer updated")

    def log(self, message: str) -> None:
        console.print(f"\n{escape(printable(message))}")
