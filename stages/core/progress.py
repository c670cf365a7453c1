"""What a stage or tool is given to say how far it has got: a callable taking one line of text
(the CLI prints it; a test may collect it). Declared once, here, for every stage and tool."""
from __future__ import annotations

from typing import Callable

Progress = Callable[[str], None]
