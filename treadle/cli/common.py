"""What the ``treadle`` commands share: the consoles, options, error lines and progress."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console

from treadle.errors import InputError, PluginError, TreadleError
from treadle.importers import FORMATS as TRACE_FORMATS, or_list
from treadle.live.logs import LEVELS

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from treadle.sim import ProgressFn

# Every `treadle` command imports this module and the command modules: what they import
# at the top is paid by `treadle --help` too, so heavy modules (the simulator, metrics,
# the trace readers, gRPC, rich.progress) are imported where they are used
# (tests/integration/test_cli_startup.py, tests/benchmarks/bench_startup.py).

err = Console(stderr=True)
out = Console()


@dataclass
class Invocation:
    """This process's command line: when its code began (``--timings``' setup, where the
    process's own start is not known), and whether the process ends with the command
    (the console script), which lets a run skip tidying up its heap."""

    started: float = field(default_factory=time.perf_counter)
    standalone: bool = False


INVOCATION = Invocation()

WorkloadArg = Annotated[
    str, typer.Argument(help="A workload file (YAML, SLS or Rumen JSON) or a built-in name.")
]
FormatOpt = Annotated[
    str | None,
    typer.Option(
        "--format",
        help=f"Workload format: {or_list(('yaml', 'parquet', *TRACE_FORMATS))} "
        "(default: inferred).",
    ),
]
NodesFileOpt = Annotated[
    Path | None, typer.Option("--nodes-file", help="SLS nodes file giving the cluster.")
]
HomoFilterOpt = Annotated[
    str | None,
    typer.Option(
        "--homo-filter",
        help="WTA CSV: keep only workflows of total work below F x the median (the UWFQ "
        "paper's homo filter: 5 in the authors' code, 10 in the paper's text).",
        metavar="F",
        show_default=False,
    ),
]
WtaScalingOpt = Annotated[
    str | None,
    typer.Option(
        "--wta-scaling",
        help="WTA CSV: the authors' SCALING, task work = resource_run_time x S x 0.75 / 1000 "
        "core-s [default: 20, as for the homo CSV; 2 for the hetero one].",
        metavar="S",
        show_default=False,
    ),
]
OutOpt = Annotated[Path, typer.Option("--out", help="Directory for the results.")]
ForceOpt = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Write into an --out directory that already holds files (those of the same "
        "names are replaced; others stay).",
    ),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="Policy parameter as key=value (repeatable)."),
]


def _log_level(value: str) -> str:
    if value.lower() not in LEVELS:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(LEVELS)}")
    return value.lower()


LogLevelOpt = Annotated[
    str, typer.Option("--log-level", help=f"{', '.join(LEVELS)}.", callback=_log_level)
]
DilationOpt = Annotated[
    float,
    typer.Option("--dilation", help="Local clusters: emulated seconds per wall second."),
]
NmProcessesOpt = Annotated[
    int,
    typer.Option("--nm-processes", help="Local clusters: NM host processes to spread nodes over."),
]
ManagedAmOpt = Annotated[
    bool,
    typer.Option(
        "--managed-am/--unmanaged-am",
        help="Run AMs in containers launched by the NMs instead of one unmanaged-AM host.",
    ),
]


#: Exit statuses. USAGE is click's own for a bad flag: every wrong command line or input
#: (an unknown name, a bad --set value, a workload that does not load, a missing file)
#: exits with it, before anything runs.
FAILED, USAGE, UNFAITHFUL = 1, 2, 3


def fail(message: str, code: int = FAILED) -> NoReturn:
    err.print(f"error: {message}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def check_out(out_dir: Path, force: bool) -> None:
    """Refuse an --out that is a file, or a directory that already holds something
    (earlier results would be overwritten or mixed with these), unless ``force``."""
    if out_dir.exists() and not out_dir.is_dir():
        fail(f"--out {out_dir} is a file, not a directory", USAGE)
    if not force and out_dir.is_dir() and any(out_dir.iterdir()):
        fail(
            f"--out {out_dir} already holds files (earlier results?); choose another "
            "directory, or pass --force to write into it",
            USAGE,
        )


#: Files that are not there (or not files): the path the user gave is wrong.
_MISSING = (FileNotFoundError, IsADirectoryError, NotADirectoryError)


@contextmanager
def errors() -> Iterator[None]:
    """Every expected failure becomes one line on stderr and a non-zero exit: USAGE for
    wrong input (``InputError``, a ``PluginError`` of a name or parameter, a missing
    file), FAILED for the rest (a plugin that crashes while running raises its
    ``PluginError`` from the crash)."""
    try:
        yield
    except (InputError, PluginError) as e:
        fail(str(e), USAGE if e.__cause__ is None else FAILED)
    except TreadleError as e:
        fail(str(e))
    except OSError as e:
        where = f" {e.filename}" if getattr(e, "filename", None) else ""
        fail(
            f"{e.strerror or e}{':' if where else ''}{where}",
            USAGE if isinstance(e, _MISSING) else FAILED,
        )


def say(text: str) -> None:
    """One plain line on stdout (never wrapped: a pipe gets it whole)."""
    out.print(text, markup=False, highlight=False, soft_wrap=True)


def trace_options(homo_filter: str | None = None, wta_scaling: str | None = None) -> dict[str, Any]:
    """The importer options the flags set (``--homo-filter``, ``--wta-scaling``): each a
    number > 0, or a one-line error naming the flag."""
    out: dict[str, Any] = {}
    for flag, key, text in (
        ("--homo-filter", "homo_filter", homo_filter),
        ("--wta-scaling", "scaling", wta_scaling),
    ):
        if text is None:
            continue
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            fail(f"{flag} must be a number > 0, got {text!r}", USAGE)
        out[key] = value
    return out


_OPTION_FLAGS = {"homo_filter": "--homo-filter", "scaling": "--wta-scaling"}


def load(
    workload: str,
    fmt: str | None,
    nodes_file: Path | None,
    options: dict[str, Any] | None = None,
    *,
    stream: bool = False,
) -> Any:
    """The workload; ``options`` (``trace_options``) apply to a WTA CSV only. Loaded with
    the cyclic garbage collector paused (``treadle.study.heap``); ``stream``: streamed if
    its format can be (``load_workload``)."""
    from treadle.live import logs
    from treadle.study import heap
    from treadle.workload import load_workload, workload_format

    logs.configure_once()  # an importer's notes on stderr (a command's level, if it set one)
    if options:
        used = workload_format(workload, fmt)
        if used != "wta":
            flags = " and ".join(_OPTION_FLAGS[k] for k in options)
            verb = "applies" if len(options) == 1 else "apply"
            fail(f"{flags} {verb} only to a WTA CSV (format wta); {workload} is {used}", USAGE)
    with heap.building():
        return load_workload(
            workload,
            fmt,
            nodes_file=str(nodes_file) if nodes_file else None,
            trace_options=options,
            stream=stream,
        )


def _job_bars(detail: str) -> Progress:
    """Bars of jobs done with their ETA, on stderr when it is a terminal; ``detail`` is
    the column after the count (rich imported here: a command that shows no bar skips it)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("jobs"),
        TextColumn(detail),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=False,
        disable=not err.is_terminal,
    )


def progress_bars() -> Progress:
    """One run's bar with its ETA, on a terminal only (the command's result line says the
    rest)."""
    return _job_bars("t={task.fields[sim_t]:.0f}s")


def tracker(progress: Progress, label: str, total: int) -> ProgressFn:
    task = progress.add_task(label, total=total, sim_t=0.0)

    def update(done: int, total_jobs: int, t: float) -> None:
        progress.update(task, completed=done, total=total_jobs, sim_t=t)

    return update


class RunsProgress:
    """Progress of several runs of one workload (``treadle compare``): on a terminal, one
    bar per run and an overall one with an ETA; otherwise one line per finished run on
    stderr (in the order they finish). ``tracker(NAME)`` is a run's progress callback,
    ``finished(NAME, summary)`` says that it ended."""

    def __init__(self, names: Sequence[str], jobs: int) -> None:
        self.bars = _job_bars("{task.fields[detail]}")
        self.jobs = jobs
        self.done = {name: 0 for name in names}
        self.started = time.monotonic()
        width = max((len(n) for n in names), default=0)
        self.overall = self.bars.add_task(
            "all".ljust(width), total=max(1, jobs * len(names)), detail=f"{len(names)} runs"
        )
        self.tasks: dict[str, TaskID] = {
            n: self.bars.add_task(n.ljust(width), total=max(1, jobs), detail="t=0s", start=False)
            for n in names
        }

    def __enter__(self) -> RunsProgress:
        self.bars.__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.bars.__exit__(kind, value, tb)

    def tracker(self, name: str) -> ProgressFn:
        task = self.tasks[name]

        def update(done: int, total_jobs: int, t: float) -> None:
            self.bars.start_task(task)
            self.bars.update(task, completed=done, total=total_jobs, detail=f"t={t:.0f}s")
            self.done[name] = done
            self.bars.update(self.overall, completed=sum(self.done.values()))

        return update

    def finished(self, name: str, summary: dict[str, Any]) -> None:
        if self.bars.disable:
            wall = time.monotonic() - self.started
            err.print(
                f"{name}: {summary['finished']}/{summary['jobs']} jobs, makespan "
                f"{num(summary['makespan_s'])} s, mean JCT {num(summary['mean_jct_s'])} s "
                f"({wall:.1f} s since the start)",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )


def num(v: Any) -> str:
    return "-" if v is None else f"{v:.1f}"
