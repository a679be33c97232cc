"""Plots shared by the demo, the notebooks and the benchmarks."""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from .trace import Result


def plot_steps(result: Result, path: str | Path | None = None):
    """Seconds and tokens for each traced step of a run, in order (a timeline)."""
    steps = [t for t in result.trace if t.calls or t.seconds > 0.05]
    labels = [f"{t.step}#{t.iteration}" if t.iteration else t.step for t in steps]
    fig, (ax_time, ax_tokens) = plt.subplots(2, 1, figsize=(max(6, 0.45 * len(steps) + 2), 6), sharex=True)
    positions = range(len(steps))
    ax_time.bar(positions, [t.seconds for t in steps], color="tab:blue")
    ax_time.set_ylabel("seconds")
    ax_time.set_title(f"{result.strategy}: {result.usage.calls} calls, {result.usage.prompt_tokens} prompt + "
                      f"{result.usage.completion_tokens} completion tokens, {result.seconds:.0f} s")
    ax_tokens.bar(positions, [t.prompt_tokens for t in steps], label="prompt", color="tab:orange")
    ax_tokens.bar(positions, [t.completion_tokens for t in steps], bottom=[t.prompt_tokens for t in steps],
                  label="completion", color="tab:green")
    ax_tokens.set_ylabel("tokens")
    ax_tokens.legend()
    ax_tokens.set_xticks(list(positions), labels, rotation=60, ha="right", fontsize=8)
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=110)
        plt.close(fig)
    return fig
