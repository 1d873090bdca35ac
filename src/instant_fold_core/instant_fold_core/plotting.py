"""Writing a matplotlib figure the way every plot of the project is written (one place for it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def save_figure(fig: Any, path: str | Path) -> Path:
    """Lay out, write (110 dpi, parent folders created) and close `fig`; returns the path."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
