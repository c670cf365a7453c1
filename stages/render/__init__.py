"""The render stage: pages, facts, charts, the Compare and warehouse pages, trace."""
