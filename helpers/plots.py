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


def plot_evaluation(summary: dict, path: str | Path | None = None):
    """Recall@k per strategy (against mean prompt tokens) and the cost of each strategy."""
    specs = list(summary)
    recall_keys = sorted({k for s in summary.values() for k in s if k.startswith("recall@") and " " not in k})
    fig, (ax_recall, ax_cost) = plt.subplots(1, 2, figsize=(12, 4.5))
    for key in recall_keys:
        xs = [summary[s]["prompt_tokens"] + summary[s]["completion_tokens"] for s in specs]
        ys = [summary[s][key] or 0 for s in specs]
        ax_recall.plot(xs, ys, "o-", label=key)
        for x, y, spec in zip(xs, ys, specs):
            ax_recall.annotate(spec, (x, y), fontsize=8, xytext=(3, 3), textcoords="offset points")
    ax_recall.set_xlabel("mean tokens per question")
    ax_recall.set_ylabel("recall")
    ax_recall.set_ylim(0, 1.05)
    ax_recall.legend()
    ax_recall.set_title("recall@k vs cost")
    positions = range(len(specs))
    ax_cost.bar(positions, [summary[s]["seconds"] for s in specs], color="tab:blue")
    ax_cost.set_xticks(list(positions), specs, rotation=30, ha="right")
    ax_cost.set_ylabel("mean seconds per question")
    ax_cost.set_title("cost per strategy (calls on top)")
    for x, spec in zip(positions, specs):
        ax_cost.annotate(f"{summary[spec]['calls']:.1f} calls", (x, summary[spec]["seconds"]), ha="center",
                         fontsize=8, xytext=(0, 3), textcoords="offset points")
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=110)
        plt.close(fig)
    return fig
