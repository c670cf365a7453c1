"""What every `campaign` command shares: the command group, the --root option, loading the
project's params, progress lines, and one line (never a traceback) for a user's error or a storage
fault. The commands are stages/cli.py's (the stages) and stages/cli_tools.py's (the tools)."""
from __future__ import annotations

import functools
import sys
import time

import click

from stages.core.config import CampaignError, Paths, load_params
from stages.core.faults import one_line


def progress(msg: str) -> None:
    click.echo(f"{time.strftime('%H:%M:%S')} {msg}", err=True)


def user_errors(fn):
    """Turn a CampaignError into one line on stderr (one per problem for a ParamsError) and exit
    status 2, never a traceback."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except CampaignError as exc:
            for line in str(exc).splitlines() or [""]:
                click.echo(f"campaign: error: {line}", err=True)
            sys.exit(2)
        except Exception as exc:
            # the storage failing (a full disk, an I/O error, a file gone) is one line too
            if not (isinstance(exc, OSError) or type(exc).__name__ in DUCKDB_IO_ERRORS
                    or COMMIT_NOT_WRITTEN in str(exc)):
                raise
            click.echo(f"campaign: error: {one_line(exc)}", err=True)
            sys.exit(1)
    return wrapper


# DuckDB's errors for a failed read or write, and for a database it stopped after one
DUCKDB_IO_ERRORS = ("IOException", "FatalException")
COMMIT_NOT_WRITTEN = "Failed to commit: Could not write file"   # a TransactionException


def load_project(root: str) -> tuple[dict, Paths]:
    params = load_params(root)
    return params, Paths.from_params(params, root)


root_option = click.option("--root", default=".", show_default=True, type=click.Path(file_okay=False),
                           help="Project root (where params.yaml is).")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Run the long-context serving campaign and publish it as an audited article series."""


def echo_summary(summary: dict) -> None:
    """A stage's summary as one line of key=value (nested counts left out)."""
    click.echo(" ".join(f"{k}={v}" for k, v in summary.items() if not isinstance(v, dict)))
