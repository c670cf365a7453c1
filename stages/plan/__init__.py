"""The plan stage (`campaign plan`): each spec's plan, printed and written (stages/plan/stage.py)."""
