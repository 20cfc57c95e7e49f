"""Matplotlib for the HTML reports: headless (Agg), figures rendered to PNG bytes to embed."""

from __future__ import annotations

import io
from typing import Any


def pyplot() -> Any:
    """Return ``matplotlib.pyplot`` on the Agg backend (no display needed)."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    return plt


def to_png(fig: Any) -> bytes:
    """Render ``fig`` to PNG bytes (90 dpi, tight) and close it."""
    buf = io.BytesIO()
    fig.savefig(buf, format='png', dpi=90, bbox_inches='tight')
    pyplot().close(fig)
    return buf.getvalue()
