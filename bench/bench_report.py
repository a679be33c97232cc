"""Report quality benchmark (issue 14): the DeepSearcher report on the demo question,
written in one call (``pipeline.report_style: single``) or section by section
(``sections``), run N times each, interleaved, in the same process.

Measures, per run, from ``result.answer`` (an overview paragraph, then ``## Heading``
sections whose points end in ``[n]`` citations) and ``result.sources``:

- sections: ``## `` headings; min pts: the fewest points in a section (a point is a
  text followed by its ``[n]`` citations);
- cited: distinct numbered sources cited that exist in ``result.sources``; files: the
  distinct documents behind them;
- repeated: sentences (overview and points; normalised: lowercase, no citations, no
  punctuation) equal to an earlier one, or whose word-trigram Jaccard similarity with an
  earlier one is >= 0.6;
- cut: the overview or a point that does not end in ``.``, ``!``, ``?`` or a closing
  quote/bracket once its trailing citations are removed, or that ends in an ellipsis;
- supported %: points that cite at least one source and whose every number (dates, counts,
  seasons) occurs in the full text of one of their cited passages (the stored chunk, read
  back from the vector store by ``chunk_id``; the trace only keeps 200 characters);
  numbers written in words are not checked;
- facts / contra: checklist facts stated and contradicted (``data/qa/simpsons_report_facts.json``;
  its "about" gives the sentence-level matching rules);
- themes: the seed blog's four themes covered (keywords from the same file);
- calls, prompt tok, compl tok, seconds: from the result's usage ledger and wall time;
- writer: which writer produced the report (``sections`` when the trace has ``section``
  steps; a sections run that fell back to one call shows ``single``).

It prints one row per run, the medians per style, the ratio of median seconds
sections/single (same process, runs interleaved), and the issue's goals as met / NOT met
on the medians, with how many runs met each.  Figures are printed, never asserted.
Reports and traces: ``outputs/bench/report/<model>/<style>-<n>.md`` and ``.json``.

A style may carry settings for itself alone after ``+``, so two settings of one style are
compared in the same run: ``--styles single,sections,sections+pipeline.section_passages=4``
(``--set`` applies to every style).

Usage: python bench/bench_report.py [--runs 3] [--styles single,sections] [--fast] [--set KEY=VALUE]

The metric functions use only the standard library (helpers is imported in ``main``), so
they can be tried on a hand-written report without loading anything.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
from pathlib import Path

FACTS_FILE = Path(__file__).resolve().parent.parent / "data" / "qa" / "simpsons_report_facts.json"

CITATION = re.compile(r"\[(\d{1,3})\]")  # the same pattern as helpers.results.CITATION
CITED = re.compile(r"\s*\[\d{1,3}\]")  # a citation with the space before it
CITATION_RUN = re.compile(r"((?:\s*\[\d{1,3}\])+)")
TRAILING_CITATIONS = re.compile(r"(?:\s*\[\d{1,3}\])*\s*$")
BULLET = re.compile(r"^\s*(?:[-*+]|\d+\.)\s+")
SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|(?<=[.!?][\"'\u201d\u2019)\]])\s+")
ABBREVIATION = re.compile(r"(?:\b(?:Mr|Mrs|Ms|Dr|St|Jr|Sr|vs|No)|\b[A-Z]|\b[a-z]\.[a-z])\.$")
ENDINGS = ".!?\"'\u201d\u2019)]"
NUMBER = re.compile(r"\d+(?:\.\d+)?")


# -- parsing the report ---------------------------------------------------------------
def parse_report(answer: str) -> tuple[str, list[tuple[str, list[dict]]]]:
    """(overview, [(heading, points)]); a point is {"text": ..., "cites": [n, ...]}.
    A "Sources" section, if any, is left out."""
    overview: list[str] = []
    sections: list[tuple[str, list[str]]] = []
    for line in answer.splitlines():
        if line.startswith("## "):
            sections.append((line[3:].strip(), []))
        elif line.startswith("# "):
            continue  # a title
        elif sections:
            sections[-1][1].append(line)
        elif line.strip():
            overview.append(line.strip())
    return " ".join(overview), [(heading, split_points("\n".join(body)))
                                for heading, body in sections if heading.lower() != "sources"]


def split_points(body: str) -> list[dict]:
    """Points of a section body: each text up to its run of [n] citations (bullets or one
    paragraph); punctuation written after the citations ("... 2002 [3].") stays with its point;
    trailing text without a citation is a point citing nothing."""
    points: list[dict] = []
    for line in body.splitlines():
        parts = CITATION_RUN.split(BULLET.sub("", line).strip())
        last = None
        for text, cites in zip(parts[0::2], parts[1::2] + [""]):
            text = text.strip()
            lead = re.match(r"[.!?;:,]+", text)
            if lead and last is not None:
                last["text"] += lead.group()
                text = text[lead.end():].strip()
            if text:
                last = {"text": text, "cites": []}
                points.append(last)
            if last is not None:
                last["cites"] += [int(n) for n in CITATION.findall(cites) if int(n) not in last["cites"]]
    return points


def normalise(text: str) -> str:
    """Lowercase, citations removed, curly quotes straightened, dashes as '-', no thousands commas."""
    text = CITED.sub("", text).lower()
    text = text.translate(str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"',
                                         "\u2013": "-", "\u2014": "-", "\u00a0": " "}))
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)
    return " ".join(text.split())


def sentences(text: str) -> list[str]:
    """Sentences of a text (citations removed); a break after an abbreviation or an initial
    ("Mr.", "James L.") or before a lowercase word is not a sentence end."""
    pieces = [p for p in SENTENCE_BREAK.split(CITED.sub("", text).strip()) if p.strip()]
    merged: list[str] = []
    for piece in pieces:
        if merged and (ABBREVIATION.search(merged[-1]) or piece[0].islower()):
            merged[-1] += " " + piece
        else:
            merged.append(piece)
    return [" ".join(s.split()) for s in merged]


def report_sentences(answer: str) -> list[str]:
    """The overview's and every point's sentences, in report order."""
    overview, sections = parse_report(answer)
    found = sentences(overview)
    for _, points in sections:
        for point in points:
            found += sentences(point["text"])
    return found


# -- the measures ---------------------------------------------------------------------
def bare(sentence: str) -> str:
    """A sentence for the repetition check: lowercase, no citations, no punctuation."""
    return " ".join(re.sub(r"[^\w\s]", " ", normalise(sentence)).split())


def trigrams(text: str) -> set[tuple[str, ...]]:
    words = text.split()
    return set(zip(words, words[1:], words[2:]))


def repeated_sentences(answer: str, threshold: float = 0.6) -> list[str]:
    """Sentences equal to an earlier one once normalised, or whose word-trigram Jaccard
    similarity with an earlier one is at least ``threshold``."""
    seen: list[tuple[str, set]] = []
    repeats = []
    for sentence in report_sentences(answer):
        text = bare(sentence)
        if not text:
            continue
        grams = trigrams(text)
        if any(text == old or (grams and old_grams and len(grams & old_grams) / len(grams | old_grams) >= threshold)
               for old, old_grams in seen):
            repeats.append(sentence)
        seen.append((text, grams))
    return repeats


def is_cut(text: str) -> bool:
    """True when a text, without its trailing citations, does not end like a sentence (an ellipsis
    is a sentence that was cut)."""
    text = TRAILING_CITATIONS.sub("", text)
    return bool(text) and (text[-1] not in ENDINGS or text.endswith(("...", "\u2026")))


def cut_strings(answer: str) -> list[str]:
    """The overview and points that stop mid-sentence."""
    overview, sections = parse_report(answer)
    texts = [overview] + [p["text"] for _, points in sections for p in points]
    return [t for t in texts if is_cut(t)]


def numbers_in(text: str) -> list[str]:
    return NUMBER.findall(normalise(text))


def holds_number(passage: str, number: str) -> bool:
    """True when ``number`` occurs in the passage as a whole number ("33" is not in "33.6")."""
    return re.search(rf"(?<![\d.]){re.escape(number)}(?!\d|\.\d)", normalise(passage)) is not None


def point_supported(point: dict, passages: dict[int, str]) -> bool:
    """A point cites at least one known passage, and each of its numbers is in one of them."""
    cited = [passages[n] for n in point["cites"] if n in passages]
    return bool(cited) and all(any(holds_number(p, num) for p in cited) for num in numbers_in(point["text"]))


def term_pattern(term: str) -> re.Pattern:
    """A checklist string: it starts at a word boundary; an all-digit one also ends at a number boundary."""
    return re.compile(r"(?<![a-z0-9])" + re.escape(term) + (r"(?!\d)" if term.isdigit() else ""))


def matches(sentence: str, alternatives: list[list[str]]) -> bool:
    """True when every string of some alternative occurs in the (normalised) sentence."""
    return any(all(term_pattern(t).search(sentence) for t in alt) for alt in alternatives)


def check_facts(answer: str, facts: list[dict]) -> tuple[list[str], list[str]]:
    """Ids of the checklist facts stated and of those contradicted, sentence by sentence."""
    found = [normalise(s) for s in report_sentences(answer)]
    stated = [f["id"] for f in facts if any(matches(s, f["stated_if"]) for s in found)]
    contradicted = [f["id"] for f in facts if f["contradicted_if"] and any(matches(s, f["contradicted_if"])
                                                                           for s in found)]
    return stated, contradicted


def themes_covered(answer: str, themes: dict[str, list[str]]) -> list[str]:
    """Themes with at least one keyword anywhere in the report."""
    text = normalise(answer)
    return [name for name, words in themes.items() if any(term_pattern(w).search(text) for w in words)]


def measure(answer: str, sources: list, passages: dict[int, str], checklist: dict) -> dict:
    """The report measures of one run (``sources``: objects with ``.number``, ``.collection``, ``.source``)."""
    _, sections = parse_report(answer)
    points = [p for _, pts in sections for p in pts]
    by_number = {s.number: s for s in sources}
    cited = {n for n in map(int, CITATION.findall(answer)) if n in by_number}
    stated, contradicted = check_facts(answer, checklist["facts"])
    covered = themes_covered(answer, checklist["themes"])
    supported = [point_supported(p, passages) for p in points]
    return {"sections": len(sections), "min pts": min((len(pts) for _, pts in sections), default=0),
            "cited": len(cited), "files": len({(by_number[n].collection, by_number[n].source) for n in cited}),
            "repeated": len(repeated_sentences(answer)), "cut": len(cut_strings(answer)),
            "supported %": round(100 * sum(supported) / len(supported), 1) if supported else None,
            "facts": len(stated), "contra": len(contradicted), "themes": len(covered),
            "_contradicted": contradicted, "_missing themes": [t for t in checklist["themes"] if t not in covered]}


# -- goals (issue 14) -----------------------------------------------------------------
GOALS = [
    ("≥ 4 sections, each ≥ 2 points", lambda m: m["sections"] >= 4 and m["min pts"] >= 2),
    ("≥ 8 distinct sources cited", lambda m: m["cited"] >= 8),
    ("0 repeated sentences", lambda m: m["repeated"] == 0),
    ("0 strings cut mid-sentence", lambda m: m["cut"] == 0),
    ("≥ 90 % of points supported", lambda m: (m["supported %"] or 0) >= 90),
    ("0 contradicted facts", lambda m: m["contra"] == 0),
    ("4/4 themes", lambda m: m["themes"] == 4),
    ("≤ 20 LLM calls", lambda m: m["calls"] <= 20),
    ("≤ 15k prompt tokens", lambda m: m["prompt tok"] <= 15000),
]
TIME_GOAL = 1.3  # pipeline wall time at most this many times the single-prompt report's, same run

NUMERIC = ["sections", "min pts", "cited", "files", "repeated", "cut", "supported %", "facts", "contra",
           "themes", "calls", "prompt tok", "compl tok", "seconds"]


def medians(rows: list[dict]) -> dict:
    out = {}
    for key in NUMERIC:
        values = [r[key] for r in rows if r[key] is not None]
        out[key] = statistics.median(values) if values else None
    return out


def passage_texts(result, store, numbers: set[int]) -> dict[int, str]:
    """Full text of each cited source: its stored chunk (matched by ``chunk_id``), else the
    200-character excerpt a ``synthesize`` or ``section`` trace step kept."""
    excerpts = {k["id"]: k.get("text", "") for step in result.trace if step.step in ("synthesize", "section")
                for k in step.kept}
    chunks: dict[tuple[str, str], dict[str, str]] = {}
    texts = {}
    for s in result.sources:
        if s.number not in numbers:
            continue
        key = (s.collection, s.source)
        if key not in chunks:
            chunks[key] = {h.id: h.text for h in store.source_chunks(s.collection, s.source)}
        texts[s.number] = chunks[key].get(s.chunk_id) or excerpts.get(s.chunk_id, "")
    return texts


def shown(row: dict) -> dict:
    """A row for the table: no private keys ("_..."), "-" for a missing figure."""
    return {k: ("-" if v is None else v) for k, v in row.items() if not k.startswith("_")}


def style_settings(spec: str) -> dict[str, str]:
    """The overrides of one ``--styles`` entry: ``STYLE[+KEY=VALUE...]``."""
    style, *settings = [part.strip() for part in spec.split("+")]
    bad = [item for item in settings if "=" not in item]
    if bad:
        raise ValueError(f"a style's settings are KEY=VALUE, e.g. sections+pipeline.section_passages=4 "
                         f"(got {bad[0]!r} in {spec!r})")
    return {"pipeline.report_style": style, **dict(item.split("=", 1) for item in settings)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per style (default 3)")
    parser.add_argument("--styles", default="single,sections",
                        help="pipeline.report_style values, comma-separated; a style may add its own settings "
                             "after '+', e.g. sections+pipeline.section_passages=4")
    parser.add_argument("--fast", action="store_true", help="the 0.5B model (fast profile)")
    # helpers is imported here so that the metric functions above load without it
    from common import BENCH_OUT, add_settings_argument, bench_config, parsed_settings, table
    add_settings_argument(parser)
    args = parser.parse_args()
    settings = parsed_settings(parser, args.settings)

    from helpers.config import with_overrides
    from helpers.demo import DEMO_QUESTION
    from helpers.errors import ConfigError
    from helpers.knowledge.ingest import ingest_manifest
    from helpers.knowledge.vectorstore import open_store
    from helpers.models.llm import get_backend
    from helpers.strategies.pipeline import run_pipeline

    checklist = json.loads(FACTS_FILE.read_text())
    if checklist["question"] != DEMO_QUESTION:
        print(f"note: the checklist is for {checklist['question']!r}, the demo question is {DEMO_QUESTION!r}")
    config = bench_config(fast=args.fast, **settings)
    configs = {}
    for style in [s.strip() for s in args.styles.split(",") if s.strip()]:
        try:
            configs[style] = with_overrides(config, style_settings(style))
        except ValueError as exc:
            parser.error(str(exc))
        except ConfigError as exc:
            print(f"style {style!r} skipped: {exc}")
    if not configs:
        return
    ingest_manifest(config, progress=False)
    get_backend(config.llm)  # load the model before timing
    store = open_store(config)
    model = re.sub(r"[^\w.-]+", "_", config.llm.model)
    out = BENCH_OUT / "report" / model

    rows = []
    for n in range(1, args.runs + 1):
        for style, style_config in configs.items():  # interleaved: drift hits every style alike
            result = run_pipeline(DEMO_QUESTION, style_config)
            stem = re.sub(r"[^\w.=-]+", "_", style) + f"-{n}"
            result.save(out / f"{stem}.json")
            (out / f"{stem}.md").write_text(result.report_markdown())
            cited = set(map(int, CITATION.findall(result.answer)))
            row = {"style": style, "run": n,
                   "writer": "sections" if result.steps("section") else "single",
                   **measure(result.answer, result.sources, passage_texts(result, store, cited), checklist),
                   "calls": result.usage.calls, "prompt tok": result.usage.prompt_tokens,
                   "compl tok": result.usage.completion_tokens, "seconds": round(result.seconds, 1),
                   "failed": result.failed}
            rows.append(row)
            print(f"{style} run {n}: {row['seconds']} s, {row['calls']} calls", flush=True)

    print(f"\nmodel {config.llm.model}, {args.runs} run(s) per style, question: {DEMO_QUESTION}"
          + "".join(f", {key}={value}" for key, value in settings.items()) + "\n")
    print(table([shown(r) for r in rows]))
    for r in rows:
        if r["_contradicted"] or r["_missing themes"]:
            print(f"  {r['style']}-{r['run']}: contradicted {r['_contradicted'] or '-'}; "
                  f"themes missing {r['_missing themes'] or '-'}")

    by_style = {style: [r for r in rows if r["style"] == style] for style in configs}
    med = {style: medians(style_rows) for style, style_rows in by_style.items()}
    print(f"\nmedians (facts of {len(checklist['facts'])}, themes of {len(checklist['themes'])})\n")
    print(table([{"style": style, **shown(m)} for style, m in med.items()]))
    base = med.get("single", {}).get("seconds")
    ratios = {style: m["seconds"] / base for style, m in med.items() if base and style != "single"}
    for style, ratio in ratios.items():
        print(f"\nmedian seconds {style}/single: {ratio:.2f}x (goal ≤ {TIME_GOAL}x)")

    goal_rows = []
    for name, check in GOALS:
        goal_rows.append({"goal": name, **{
            style: f"{'met' if check(med[style]) else 'NOT met'} ({sum(check(r) for r in by_style[style])}/"
                   f"{len(by_style[style])} runs)" for style in configs}})
    goal_rows.append({"goal": f"time ≤ {TIME_GOAL}× single", **{
        style: ("-" if style not in ratios else f"{'met' if ratios[style] <= TIME_GOAL else 'NOT met'} "
                f"({ratios[style]:.2f}×)") for style in configs}})
    print("\ngoals (issue 14), on the medians\n")
    print(table(goal_rows))
    (out / "summary.json").write_text(json.dumps({"model": config.llm.model, "runs": rows, "medians": med,
                                                  "time_ratios": ratios}, indent=2, default=str))
    print(f"\nreports and traces: {out}/<style>-<n>.md, .json; figures: {out}/summary.json")


if __name__ == "__main__":
    main()
