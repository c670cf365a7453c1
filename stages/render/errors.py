"""The error of a fact, table or evidence block that cannot be produced."""
from __future__ import annotations

from stages.core.config import CampaignError


class FactError(CampaignError):
    """A fact, table or evidence block that cannot be produced (unknown name, wrong row count)."""
