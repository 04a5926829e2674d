"""Experiment files (TOML) and the built-in demo: schema, data, runner, report."""
from .report import console_table, write_report
from .runner import Experiment, ExperimentResult, build, demo_config, load, run
from .schema import SCHEMA, ExperimentError, schema_markdown, validate

__all__ = ["Experiment", "ExperimentResult", "ExperimentError", "SCHEMA", "build", "demo_config",
           "load", "run", "validate", "schema_markdown", "write_report", "console_table"]
