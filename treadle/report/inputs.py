"""What a comparison report is built from besides the runs' files, kept in
``report_inputs.json`` so that ``treadle report DIR`` can build it again: the title, the
policies in their order, the baseline, the reference, ``paper_compat``, the workload's
users and their weights, and every policy's resolved parameters.

A policy's parameters are its pydantic ``Params`` with the defaults filled in, its AM ask
strategy with that strategy's resolved parameters, and, for a policy that sizes jobs with
an estimator (``gs``), the estimator and its resolved parameters. The run options (phase
seed, a forced ask strategy, slowdown, the event log's format...) are the same for all.
The study resolves both (``treadle.study.runner.policy_parameters`` and ``run_options``);
the report only keeps and reads them.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from treadle.errors import InputError

REPORT_INPUTS_JSON = "report_inputs.json"


@dataclass(frozen=True)
class ReportInputs:
    title: str = ""
    policies: list[str] = field(default_factory=list)
    baseline: str | None = None
    reference: str | None = None
    paper_compat: bool = False
    users: list[str] | None = None
    user_weights: dict[str, float] | None = None
    #: Per policy: {"params", "asks": {"name", "params"}, "estimator": {"name", "params"}}.
    parameters: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The run options every policy ran with (``treadle.study.runner.RunOptions``).
    options: dict[str, Any] = field(default_factory=dict)

    def write(self, out_dir: Path) -> None:
        text = json.dumps(asdict(self), sort_keys=True, indent=2, allow_nan=False, default=str)
        (out_dir / REPORT_INPUTS_JSON).write_text(text + "\n", encoding="utf-8")

    @classmethod
    def read(cls, out_dir: Path) -> ReportInputs | None:
        path = out_dir / REPORT_INPUTS_JSON
        if not path.exists():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
            return cls(**known)
        except (json.JSONDecodeError, TypeError) as e:
            raise InputError(str(path), None, f"not a report inputs file: {e}") from None
