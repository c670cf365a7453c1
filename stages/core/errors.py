"""The project's user error: what the CLI prints as one line, with a non-zero exit."""
from __future__ import annotations


class CampaignError(Exception):
    """A user error: printed as one line by the CLI, with a non-zero exit."""
