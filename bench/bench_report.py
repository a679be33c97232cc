"""Report quality benchmark (issues 14 and 58): the DeepSearcher report on the demo question,
written by each writer of ``--styles``, run N times each, interleaved, in the same process:

- ``single``: one call writes the whole report (``pipeline.report_style: single``);
- ``topics``: section by section, one section per collection (``report_shape: topics``: the writer
  before issue 58);
- ``story``: the story of change told in time order (``report_shape: auto`` on a question about change:
  timeline search, plan, sections in time order, conclusion; ``helpers/strategies/report_story.py``).

Measures, per run, from ``result.answer`` (``## Heading`` sections whose points end in ``[n]``
citations, a ``## Conclusion`` or an overview paragraph) and ``result.sources``:

- changes / contra: the knowledge base's documented changes the report states, and contradicts
  (``bench/simpsons_changes.json``, written by hand from ``data/simpsons/``; its "about" gives the
  sentence-level matching rules; no prompt or pipeline code reads it);
- themes: the six themes of that file the report touches (keywords);
- sections; min pts: the fewest points in a section; cited; files: the distinct documents cited;
- repeated: sentences equal to an earlier one, or with word-trigram Jaccard >= 0.6;
- cut: a text that does not end as a sentence;
- supported %: points whose every number occurs in one of their cited passages (the stored chunk);
- leaning: sentences that lean on text the reader never saw (``helpers.strategies.report_checks
  .standalone``, the check the story writer applies: it should find none left);
- in order %: adjacent sentences (that write a year) within each section whose first year does not go back;
- gaps: citation numbers missing from 1..n; uncited: listed sources the report does not cite;
- conclusion: 1 when the report ends with a conclusion (or opens with an overview) of >= 1 sentence;
- calls, prompt tok, compl tok, seconds: from the usage ledger and wall time.

It prints one row per run, the medians per style, the ratio of median seconds against the first
style (same process, runs interleaved), and the goals of issue 58 as met / NOT met on the medians.
Figures are printed, never asserted.  Reports and traces: ``outputs/bench/report/<model>/<style>-<n>.md``
and ``.json``; ``--out DIR`` also writes the rows as ``report.jsonl`` there (``docs/demo-reports.md`` is generated
from them and the report they name, by ``bench/tables.py``).

A style may carry settings for itself alone after ``+``: ``--styles topics,story,story+pipeline.story_passages=4``.

Usage: python bench/bench_report.py [--runs 3] [--styles topics,story] [--fast] [--set KEY=VALUE] [--out DIR]

The metric functions use only the standard library (helpers is imported where a measure needs it),
so they can be tried on a hand-written report without loading a model.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
from pathlib import Path

CHANGES_FILE = Path(__file__).resolve().parent / "simpsons_changes.json"
STYLES = {"single": {"pipeline.report_style": "single"},
          "topics": {"pipeline.report_style": "sections", "pipeline.report_shape": "topics"},
          "story": {"pipeline.report_style": "sections", "pipeline.report_shape": "auto"}}
CLOSING = ("conclusion",)

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
    """(overview or conclusion, [(heading, points)]); a point is {"text": ..., "cites": [n, ...]}.
    A "Sources" section, if any, is left out; a "Conclusion" section is the closing text."""
    overview: list[str] = []
    sections: list[tuple[str, list[str]]] = []
    for line in answer.splitlines():
        if line.startswith("## "):
            sections.append((line[3:].strip(), []))
        elif line.startswith("# "):
            continue  # a title
        elif sections and sections[-1][0].lower() in CLOSING:
            overview.append(line.strip())
        elif sections:
            sections[-1][1].append(line)
        elif line.strip():
            overview.append(line.strip())
    return " ".join(l for l in overview if l), [(heading, split_points("\n".join(body))) for heading, body in sections
                                                if heading.lower() not in ("sources", *CLOSING)]


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


def check_changes(answer: str, changes: list[dict]) -> tuple[list[str], list[str]]:
    """Ids of the checklist changes stated and of those contradicted, sentence by sentence."""
    found = [normalise(s) for s in report_sentences(answer)]
    stated = [c["id"] for c in changes if any(matches(s, c["stated_if"]) for s in found)]
    contradicted = [c["id"] for c in changes if c["contradicted_if"] and any(matches(s, c["contradicted_if"])
                                                                             for s in found)]
    return stated, contradicted


YEAR = re.compile(r"(?<![\d,.])(1[5-9]\d\d|20\d\d)(?![\d,])")


def years_in_order(answer: str) -> float | None:
    """The share (%) of adjacent sentences within a section, among those that write a year, whose first
    year does not go back from the one before: the order the section tells its story in."""
    pairs = []
    for _, points in parse_report(answer)[1]:
        years = [int(found[0]) for p in points for s in sentences(p["text"])
                 if (found := YEAR.findall(normalise(s)))]
        pairs += [b >= a for a, b in zip(years, years[1:])]
    return round(100 * sum(pairs) / len(pairs), 1) if pairs else None


def numbering_gaps(answer: str) -> int:
    """Citation numbers missing from 1..n (n: the highest cited)."""
    cited = set(map(int, CITATION.findall(answer)))
    return len(set(range(1, max(cited, default=0) + 1)) - cited)


def leaning_sentences(answer: str) -> list[str]:
    """Sentences that lean on text the reader never saw, by the story writer's own check."""
    from helpers.strategies.report_checks import standalone
    overview, sections = parse_report(answer)
    earlier, leaning = [], []
    for heading, points in sections:
        earlier.append(heading)
        for sentence in (s for p in points for s in sentences(p["text"])):
            if not standalone(sentence, " ".join(earlier))[0]:
                leaning.append(sentence)
            earlier.append(sentence)
    leaning += [s for s in sentences(overview) if not standalone(s, " ".join(earlier))[0]]
    return leaning


def themes_covered(answer: str, themes: dict[str, list[str]]) -> list[str]:
    """Themes with at least one keyword anywhere in the report."""
    text = normalise(answer)
    return [name for name, words in themes.items() if any(term_pattern(w).search(text) for w in words)]


def measure(answer: str, sources: list, passages: dict[int, str], checklist: dict) -> dict:
    """The report measures of one run (``sources``: objects with ``.number``, ``.collection``, ``.source``,
    ``.cited``)."""
    overview, sections = parse_report(answer)
    points = [p for _, pts in sections for p in pts]
    by_number = {s.number: s for s in sources}
    cited = {n for n in map(int, CITATION.findall(answer)) if n in by_number}
    stated, contradicted = check_changes(answer, checklist["changes"])
    covered = themes_covered(answer, checklist["themes"])
    supported = [point_supported(p, passages) for p in points]
    listed = [s for s in sources if s.cited] or sources[:12]  # what Result.report_markdown lists
    return {"sections": len(sections), "min pts": min((len(pts) for _, pts in sections), default=0),
            "cited": len(cited), "files": len({(by_number[n].collection, by_number[n].source) for n in cited}),
            "repeated": len(repeated_sentences(answer)), "cut": len(cut_strings(answer)),
            "supported %": round(100 * sum(supported) / len(supported), 1) if supported else None,
            "changes": len(stated), "contra": len(contradicted), "themes": len(covered),
            "leaning": len(leaning_sentences(answer)), "in order %": years_in_order(answer),
            "gaps": numbering_gaps(answer), "uncited": sum(1 for s in listed if not s.cited),
            "conclusion": int(bool(sentences(overview))),
            "_stated": stated, "_contradicted": contradicted,
            "_missing themes": [t for t in checklist["themes"] if t not in covered]}


# -- goals (issue 58) -----------------------------------------------------------------
GOALS = [
    ("≥ 14 documented changes stated", lambda m: m["changes"] >= 14),
    ("a conclusion", lambda m: m["conclusion"] == 1),
    ("0 sentences leaning on unseen text", lambda m: m["leaning"] == 0),
    ("≥ 90 % of adjacent years in order", lambda m: (m["in order %"] or 0) >= 90),
    ("sources numbered without gaps", lambda m: m["gaps"] == 0),
    ("every listed source cited", lambda m: m["uncited"] == 0),
    ("0 contradicted changes", lambda m: m["contra"] == 0),
    ("0 repeated sentences", lambda m: m["repeated"] == 0),
    ("0 strings cut mid-sentence", lambda m: m["cut"] == 0),
]
TIME_GOAL = 1.3  # wall time at most this many times the first style's (today's writer), same run

NUMERIC = ["changes", "contra", "themes", "sections", "min pts", "cited", "files", "repeated", "cut", "supported %",
           "leaning", "in order %", "gaps", "uncited", "conclusion", "calls", "prompt tok", "compl tok", "seconds"]


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
    """The overrides of one ``--styles`` entry: ``STYLE[+KEY=VALUE...]``, STYLE one of ``STYLES``."""
    style, *settings = [part.strip() for part in spec.split("+")]
    if style not in STYLES:
        raise ValueError(f"unknown style {style!r}: one of {', '.join(STYLES)}")
    bad = [item for item in settings if "=" not in item]
    if bad:
        raise ValueError(f"a style's settings are KEY=VALUE, e.g. story+pipeline.story_passages=4 "
                         f"(got {bad[0]!r} in {spec!r})")
    return {**STYLES[style], **dict(item.split("=", 1) for item in settings)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per style (default 3)")
    parser.add_argument("--styles", default="topics,story",
                        help=f"writers, comma-separated ({', '.join(STYLES)}; the first is the time baseline); a "
                             "style may add its own settings after '+', e.g. story+pipeline.story_passages=4")
    parser.add_argument("--out", help="also write the rows (with commit, date and CPU) to DIR/report.jsonl")
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

    checklist = json.loads(CHANGES_FILE.read_text())
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
            if args.out:  # the reports beside the rows, for docs/demo-reports.md
                Path(args.out).mkdir(parents=True, exist_ok=True)
                (Path(args.out) / f"{stem}.md").write_text(result.report_markdown())
            cited = set(map(int, CITATION.findall(result.answer)))
            row = {"style": style, "run": n,
                   "writer": "story" if result.steps("story plan") else "sections" if result.steps("section")
                   else "single",
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
        missing = [c["id"] for c in checklist["changes"] if c["id"] not in r["_stated"]]
        print(f"  {r['style']}-{r['run']}: changes not stated {missing or '-'}; contradicted "
              f"{r['_contradicted'] or '-'}; themes missing {r['_missing themes'] or '-'}")

    by_style = {style: [r for r in rows if r["style"] == style] for style in configs}
    med = {style: medians(style_rows) for style, style_rows in by_style.items()}
    print(f"\nmedians (changes of {len(checklist['changes'])}, themes of {len(checklist['themes'])})\n")
    print(table([{"style": style, **shown(m)} for style, m in med.items()]))
    first = next(iter(configs))
    base = med[first]["seconds"]
    ratios = {style: m["seconds"] / base for style, m in med.items() if base and style != first}
    for style, ratio in ratios.items():
        print(f"\nmedian seconds {style}/{first}: {ratio:.2f}x (goal ≤ {TIME_GOAL}x)")

    goal_rows = []
    for name, check in GOALS:
        goal_rows.append({"goal": name, **{
            style: f"{'met' if check(med[style]) else 'NOT met'} ({sum(check(r) for r in by_style[style])}/"
                   f"{len(by_style[style])} runs)" for style in configs}})
    goal_rows.append({"goal": f"time ≤ {TIME_GOAL}× {first}", **{
        style: ("-" if style not in ratios else f"{'met' if ratios[style] <= TIME_GOAL else 'NOT met'} "
                f"({ratios[style]:.2f}×)") for style in configs}})
    print("\ngoals (issue 58), on the medians\n")
    print(table(goal_rows))
    (out / "summary.json").write_text(json.dumps({"model": config.llm.model, "runs": rows, "medians": med,
                                                  "time_ratios": ratios}, indent=2, default=str))
    if args.out:
        from helpers.evaluation.harness import run_stamp
        write_rows(Path(args.out), rows, run_stamp(config))
    print(f"\nreports and traces: {out}/<style>-<n>.md, .json; figures: {out}/summary.json")


def write_rows(folder: Path, rows: list[dict], stamp: dict) -> None:
    """The rows as ``folder/report.jsonl``, each with ``stamp`` (commit, date, CPU, model: what the
    docs/ tables read)."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "report.jsonl").open("w") as handle:
        for row in rows:
            handle.write(json.dumps({**stamp, **{k.lstrip("_"): v for k, v in row.items()}}, default=str) + "\n")
    print(f"rows: {folder}/report.jsonl")


if __name__ == "__main__":
    main()
