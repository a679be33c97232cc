"""Plots shared by the demo, the notebooks and the benchmarks."""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from helpers.evaluation.specs import STRATEGY_PARAMETER, parse_strategy
from helpers.results import Result


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


def _family(spec: str) -> tuple[str, int | None]:
    """A strategy spec's family and setting, as ``parse_strategy`` reads it: 'deepsearcher:2' ->
    ('deepsearcher', 2); 'naive/hybrid' -> ('naive/hybrid', None) (another search mode is another line)."""
    _, name, overrides = parse_strategy(spec)
    mode = overrides.get("search.mode")
    return f"{name}/{mode}" if mode else name, overrides.get(STRATEGY_PARAMETER.get(name, ""))


def plot_evaluation(summary: dict, path: str | Path | None = None):
    """Four panels: recall@k against the pipeline's rounds (naive RAG as dashed lines), recall@k against
    mean tokens per question (one line per strategy family), EM and F1 per strategy, and seconds and
    calls per strategy."""
    specs = list(summary)
    recall_keys = sorted({k for s in summary.values() for k in s if k.startswith("recall@") and " " not in k})
    fig, (ax_rounds, ax_tokens, ax_answers, ax_cost) = plt.subplots(1, 4, figsize=(21, 4.5))
    colours = dict(zip(recall_keys, ["tab:blue", "tab:orange", "tab:green", "tab:red"]))
    rounds = sorted((_family(s)[1], s) for s in specs if _family(s)[0] == "deepsearcher" and _family(s)[1])
    for key in recall_keys:
        if rounds:
            ax_rounds.plot([n for n, _ in rounds], [summary[s][key] or 0 for _, s in rounds], "o-",
                           color=colours[key], label=f"pipeline {key}")
        if "naive" in summary and summary["naive"].get(key) is not None:
            ax_rounds.axhline(summary["naive"][key], color=colours[key], linestyle="--", label=f"naive {key}")
    ax_rounds.set_xlabel("max_iter (rounds of the pipeline)")
    ax_rounds.set_ylabel("recall")
    ax_rounds.set_ylim(0, 1.05)
    ax_rounds.set_title("recall@k vs rounds")
    if rounds:
        ax_rounds.set_xticks([n for n, _ in rounds])
    if ax_rounds.get_legend_handles_labels()[0]:  # neither the pipeline nor naive RAG was run: no legend
        ax_rounds.legend(fontsize=8)
    families = list(dict.fromkeys(_family(s)[0] for s in specs))
    markers = dict(zip(families, "osD^v*"))
    for key in recall_keys[-1:]:  # the largest k, to keep the panel readable
        for family in families:
            mine = sorted((summary[s]["prompt_tokens"] + summary[s]["completion_tokens"], summary[s][key] or 0, s)
                          for s in specs if _family(s)[0] == family)
            ax_tokens.plot([x for x, _, _ in mine], [y for _, y, _ in mine], marker=markers[family], label=family)
            for x, y, spec in mine:
                ax_tokens.annotate(spec, (x, y), fontsize=8, xytext=(3, 3), textcoords="offset points")
        ax_tokens.set_ylabel(key)
    ax_tokens.set_xlabel("mean tokens per question")
    ax_tokens.set_ylim(0, 1.05)
    ax_tokens.set_title("recall vs tokens")
    if ax_tokens.get_legend_handles_labels()[0]:
        ax_tokens.legend(fontsize=8)
    positions = range(len(specs))
    for offset, measure, colour in ((-0.2, "em", "tab:purple"), (0.2, "f1", "tab:olive")):
        ax_answers.bar([x + offset for x in positions], [summary[s].get(measure) or 0 for s in specs], width=0.4,
                       color=colour, label=measure.upper())
    ax_answers.set_xticks(list(positions), specs, rotation=30, ha="right")
    ax_answers.set_ylim(0, 1.05)
    ax_answers.set_title("answers: exact match and token F1")
    ax_answers.legend(fontsize=8)
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
