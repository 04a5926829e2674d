"""Experiment files (TOML) and the built-in demo: schema, data, runner, report."""
from .adapt import AdaptResult, run_adapt, write_adapt_report
from .report import console_table, write_report, write_sweep_report
from .runner import (
    Experiment,
    ExperimentResult,
    SweepResult,
    build,
    demo_config,
    load,
    run,
    run_sweep,
)
from .schema import SCHEMA, ExperimentError, schema_markdown, validate

__all__ = ["Experiment", "ExperimentResult", "ExperimentError", "SCHEMA", "SweepResult", "build",
           "demo_config", "load", "run", "run_sweep", "validate", "schema_markdown",
           "write_report", "write_sweep_report", "console_table", "AdaptResult", "run_adapt",
           "write_adapt_report"]
