"""Command line: ``python -m helpers <command>``.  Run with ``-h`` for the list."""
from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from typing import TYPE_CHECKING, Callable

from helpers.config import FAST_OVERRIDES, PROJECT_ROOT, Config, check_question_fits, is_server_uri, load_config
from helpers.errors import DeepSearchLabError, InputError, VectorStoreError
from helpers.prompts import PromptSet

if TYPE_CHECKING:
    from helpers.knowledge.vectorstore import MilvusStore

COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Callable]] = {}


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return int(text)


def positive_ints(text: str) -> tuple[int, ...]:
    """An argparse type: whole numbers of at least 1, separated by commas ("2,5")."""
    return tuple(positive_int(part) for part in text.split(","))


def command(name: str, help_text: str, arguments: Callable[[argparse.ArgumentParser], None] = lambda p: None):
    """Register a sub-command: its help, its arguments, and the function that runs it."""
    def register(func: Callable) -> Callable:
        COMMANDS[name] = (help_text, arguments, func)
        return func
    return register


@command("models", "assemble and verify the catalogue GGUF models (setup runs this)",
         lambda p: p.add_argument("names", nargs="*", help="catalogue names (default: all)"))
def _models(args: argparse.Namespace) -> None:
    from helpers.models.model_files import CATALOGUE, ensure_model
    for name in args.names or list(CATALOGUE):
        path = ensure_model(name)
        print(f"{name:<22} {path} ({path.stat().st_size / 2**20:.0f} MiB, sha256 verified)")


def _chat_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("prompt", nargs="?", default="In one sentence, what is retrieval-augmented generation?")
    p.add_argument("--fast", action="store_true", help="use the small model")


@command("chat", "one chat call through the configured backend, with its usage table", _chat_args)
def _chat(args: argparse.Namespace) -> None:
    from helpers.models.llm import make_llm
    llm = make_llm(load_config(overrides=_overrides(args)))
    print(llm.chat([{"role": "user", "content": args.prompt}], step="chat"))
    print()
    print(llm.ledger.table())


def _serve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fast", action="store_true", help="serve the small model")
    p.add_argument("--threads", type=int, default=0, help="llama.cpp threads (0: all cores)")


@command("serve", "serve the configured GGUF model on an OpenAI-compatible API (llama.cpp's server) until Ctrl-C",
         _serve_args)
def _serve(args: argparse.Namespace) -> None:
    from helpers.models.llama_server import serve_until_stopped
    config = load_config(overrides=_overrides(args))
    serve_until_stopped(config.llm, args.threads or os.cpu_count() or 1)


def _ingest_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("sources", nargs="*", help="files, folders, URLs or wikipedia:Title "
                   "(none: the knowledge base in data/collections.json)")
    p.add_argument("--collection", help="collection name (required with sources)")
    p.add_argument("--description", default="", help="what the collection holds (the router reads it)")
    p.add_argument("--force", action="store_true", help="drop and rebuild the collection(s)")
    p.add_argument("--keep-removed", action="store_true",
                   help="keep the chunks of files deleted from an ingested folder (default: remove them)")


@command("ingest", "ingest sources into a described collection (default: the Simpsons knowledge base)",
         _ingest_args)
def _ingest(args: argparse.Namespace) -> None:
    from helpers.knowledge.ingest import MANIFEST, ingest, ingest_manifest, read_manifest
    config = load_config()
    if not args.sources:
        known = [entry["name"] for entry in read_manifest()]
        if args.description or (args.collection and args.collection not in known):
            given = f"--collection {args.collection}" if args.collection else "--description"
            raise InputError(f"no sources given for {given}: name the files, "
                             f"folders or URLs to ingest (`python -m helpers ingest docs/ --collection NAME "
                             f"--description ...`); without sources only the collections of {MANIFEST.name} are "
                             f"ingested ({', '.join(known)}), each with its own description")
        reports = ingest_manifest(config, force=args.force, keep_removed=args.keep_removed,
                                  only=[args.collection] if args.collection else None)
    else:
        if not args.collection:
            raise InputError("--collection is required when sources are given (and --description says what they hold)")
        reports = [ingest(args.sources, args.collection, args.description or args.collection, config,
                          force=args.force, keep_removed=args.keep_removed)]
    for report in reports:
        print(report.summary())


def knowledge_base(config: Config) -> tuple[MilvusStore, list[str]]:
    """The vector store of ``config`` and its collections; a database with none (or not created yet, which
    is left uncreated) says to ingest first."""
    from helpers.knowledge.milvus_client import check_local_path
    from helpers.knowledge.vectorstore import open_store
    uri = config.vector_db.uri
    local = None if is_server_uri(uri) else config.resolve_path(uri)
    if local is not None:
        check_local_path(local)
    store = open_store(config) if local is None or local.exists() else None
    names = store.list_collections() if store else []
    if not names:
        raise InputError(f"the database {uri} holds no collection yet: run `python -m helpers ingest` first (the "
                         "Simpsons knowledge base), or ingest your own sources with --collection")
    return store, names


@command("collections", "list collections with descriptions, counts and embedding model")
def _collections(args: argparse.Namespace) -> None:
    from helpers.knowledge.vectorstore import open_store
    store = open_store(load_config())
    names = store.list_collections()
    if not names:
        print("no collections yet: run `python -m helpers ingest`")
    for name in names:
        try:
            info = store.info(name)
        except VectorStoreError as exc:  # a damaged collection: named, and the others are listed
            print(f"{name:<24}error: {exc}")
            continue
        print(f"{info.name:<24}{info.count:>6} chunks  {info.embedding_model} ({info.dimension}d)\n"
              f"    {info.description}")


def _search_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("query")
    p.add_argument("--collection", action="append", help="collection(s) to search (default: all)")
    p.add_argument("-k", type=positive_int, default=5)
    p.add_argument("--mode", choices=["dense", "hybrid"], default=None)
    p.add_argument("--json", action="store_true", help="machine-readable output")


@command("search", "search collections and print hits with scores and sources", _search_args)
def _search(args: argparse.Namespace) -> None:
    from helpers.knowledge.embeddings import get_embedder
    from helpers.strategies.registry import check_question
    check_question(args.query)
    config = load_config()
    store, stored = knowledge_base(config)
    names = args.collection or stored
    embedder = get_embedder(config.embedding)
    hits = []
    for name in names:
        hits += store.search(name, args.query, embedder, k=args.k, mode=args.mode or config.search.mode,
                             ranker=config.search.ranker)
    hits.sort(key=lambda h: h.score, reverse=True)
    if args.json:
        print(json.dumps([h.to_dict() for h in hits[: args.k]], indent=2))
        return
    for hit in hits[: args.k]:
        print(f"{hit.score:.3f}  [{hit.collection}] {hit.source} / {hit.section or '-'}")
        print("       " + hit.text.replace("\n", " ")[:160])


def _query_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("question")
    p.add_argument("--strategy", default="deepsearcher",
                   help="naive, naive_titles, deepsearcher (or pipeline), chain or deepsearch (or agent); default deepsearcher")
    p.add_argument("--max-iter", type=int, help="DeepSearcher loop iterations, 1-20 (default from config)")
    p.add_argument("--token-budget", type=int, help="DeepSearch agent token budget, 500 or more (default from config)")
    p.add_argument("--fast", action="store_true", help="the small model and small budgets")
    p.add_argument("--json", action="store_true", help='print {"short_answer", "answer", "sources", "usage"} as JSON')
    p.add_argument("--trace", help="also save the full trace as JSON to this file")
    p.add_argument("--prompts", help="a JSON file of edited prompts ({name: text}, e.g. saved by a notebook)")


def _overrides(args: argparse.Namespace) -> dict:
    overrides = dict(FAST_OVERRIDES) if getattr(args, "fast", False) else {}
    chosen = os.environ.get("DSL_MODEL", "")
    if overrides and chosen and chosen != FAST_OVERRIDES["llm.model"]:
        raise InputError(f"--fast picks the model {FAST_OVERRIDES['llm.model']}, but DSL_MODEL={chosen} picks "
                         "another: drop --fast (DSL_FAST=1 keeps DSL_MODEL with the small budgets), or unset DSL_MODEL")
    if getattr(args, "max_iter", None) is not None:  # out-of-range values are refused by the config
        overrides["pipeline.max_iter"] = args.max_iter
    if getattr(args, "token_budget", None) is not None:
        overrides["agent.token_budget"] = args.token_budget
    return overrides


@command("query", "answer a question with naive RAG, the DeepSearcher pipeline, chain search or the agent",
         _query_args)
def _query(args: argparse.Namespace) -> None:
    from helpers.strategies.registry import check_question, run_strategy, strategy_name
    config = load_config(overrides=_overrides(args))
    check_question(args.question)
    check_question_fits(args.question, config)
    prompts = PromptSet.load(args.prompts) if args.prompts else None
    strategy_name(args.strategy)
    knowledge_base(config)
    result = run_strategy(args.strategy, args.question, config, prompts=prompts)
    if args.json:  # the answer first: a failed side write below must not lose it
        print(json.dumps(result.summary_json(), indent=2, ensure_ascii=False))
    else:
        print(result.report_markdown())
        print(result.usage.table())
    if args.trace:
        try:
            result.save(args.trace)
        except OSError as exc:
            print(f"warning: the trace was not saved to {args.trace} ({exc.strerror or exc}); "
                  "the answer above is complete", file=sys.stderr)
    if result.error:
        raise SystemExit(f"error: {result.error}")


def _demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fast", action="store_true", help="the small model and small budgets (a quick look)")
    p.add_argument("--out", default="outputs/simpsons", help="where to write report.md, trace.json, steps.png")
    p.add_argument("--quiet", action="store_true", help="print the log of the steps after the run, not as they end")
    p.add_argument("--prompts", help="a JSON file of edited prompts ({name: text}, e.g. saved by a notebook)")


@command("demo", "the Simpsons demo: ingest if needed, ask the question, write report, trace and plot",
         _demo_args)
def _demo(args: argparse.Namespace) -> None:
    from helpers.demo import run_demo
    run_demo(load_config(overrides=_overrides(args)), args.out, quiet=args.quiet,
             prompts=PromptSet.load(args.prompts) if args.prompts else None)


def _eval_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--benchmark", choices=["2wiki", "varied"], help="a public benchmark shipped in data/ "
                   "(2wiki: 6,119 Wikipedia paragraphs, 200 dev questions; varied: 60 questions of other "
                   "shapes over the same paragraphs); replaces --corpus/--questions")
    p.add_argument("--corpus", default="data/collections.json",
                   help="a collections manifest or a JSON corpus of {title, text} paragraphs")
    p.add_argument("--questions", default="data/qa/simpsons_qa.jsonl")
    p.add_argument("--strategies", default=None,
                   help="comma-separated name[:parameter][/mode]: naive, naive_titles, deepsearcher[:max_iter], "
                        "chain[:max_hops], deepsearch[:token_budget], oracle (the answer step given the gold "
                        "passages); /dense or /hybrid sets the search mode "
                        "(default: naive,deepsearcher:1,deepsearcher:2,deepsearcher:3; with --benchmark "
                        "naive,chain,deepsearcher:1)")
    p.add_argument("--k", type=positive_ints, default="2,5", help="recall cut-offs, e.g. 2,5")
    p.add_argument("--limit", type=positive_int, help="at most N questions, taking each question type in turn")
    p.add_argument("--judge", action="store_true", help="also ask the LLM judge (reported separately)")
    p.add_argument("--why-missed", action="store_true",
                   help="print, per strategy, why gold titles were missed (never retrieved / dropped / ranked below k)")
    p.add_argument("--fast", action="store_true", help="the small model and small budgets")
    p.add_argument("--prompts", help="a JSON file of edited prompts ({name: text}, e.g. saved by a notebook)")
    p.add_argument("--workers", type=positive_int, default=1,
                   help="questions run at once against a model server (llm.provider openai or ollama; the "
                        "embedded model runs one)")
    p.add_argument("--out", default=None, help="output folder (default outputs/eval, or outputs/eval-<benchmark>)")


@command("eval", "evaluate strategies: recall@k, EM and F1, calls, tokens, time (resumable)", _eval_args)
def _eval(args: argparse.Namespace) -> None:
    from helpers.evaluation.harness import (BENCHMARKS, check_corpus, check_questions, current_rows, load_questions,
                                            prepare_corpus, read_rows, run_evaluation, run_keys, sample_by_type)
    from helpers.evaluation.specs import strategy_list
    from helpers.evaluation.summary import answer_table, miss_table
    base = load_config()
    if args.benchmark:
        corpus, questions_file = BENCHMARKS[args.benchmark]
        default_strategies = "naive,chain,deepsearcher:1"
    else:
        corpus, questions_file = base.resolve_path(args.corpus), base.resolve_path(args.questions)
        default_strategies = "naive,deepsearcher:1,deepsearcher:2,deepsearcher:3"
    # every input is checked before the long corpus ingest
    strategies = strategy_list(default_strategies if args.strategies is None else args.strategies)
    questions = sample_by_type(load_questions(questions_file), args.limit)
    check_corpus(corpus)
    prompts = PromptSet.load(args.prompts) if args.prompts else PromptSet()
    out = base.resolve_path(args.out or ("outputs/eval" + (f"-{args.benchmark}" if args.benchmark else "")))
    config = load_config(overrides={**_overrides(args), "vector_db.uri": str(out / "milvus.db")})
    check_questions(questions, config)
    try:
        prepare_corpus(corpus, config)  # an interrupted ingest is completed by the next one
        summary = run_evaluation(questions, strategies, config, out, args.k, judge=args.judge, prompts=prompts,
                                 workers=args.workers)
    except KeyboardInterrupt:
        saved = len(read_rows(out / "results.jsonl"))
        print(f"stopped; {saved} row(s) saved in {out / 'results.jsonl'}; re-run the same command to resume",
              file=sys.stderr)
        raise SystemExit(130) from None
    print(json.dumps(summary, indent=2))
    print("\nanswers, EM / F1 (standard normalisation), overall and per question type:")
    for line in answer_table(summary):
        print("  " + ", ".join(f"{key}: {value}" for key, value in line.items()))
    if args.why_missed:
        print("\nwhy gold titles were missed (at k = %d):" % max(args.k))
        keys = run_keys(questions, strategies, config, prompts, args.judge)
        for line in miss_table(current_rows(out / "results.jsonl", keys)):
            print("  " + ", ".join(f"{key}: {value}" for key, value in line.items()))
    print(f"written: {out}/results.jsonl, results.csv, summary.json, evaluation.png")


def _ab_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--prompts", required=True, help="the edited prompts (B): a JSON file {name: text}, e.g. saved "
                                                    "by a notebook's prompt editor")
    p.add_argument("--strategy", default="chain", help="one strategy spec, as for eval (default chain)")
    p.add_argument("--benchmark", choices=["2wiki", "varied"], default="2wiki", 
                   help="the question set (2wiki or varied dev)")
    p.add_argument("--limit", type=positive_int, default=20, help="N questions, each question type in turn")
    p.add_argument("--fast", action="store_true", help="the small model and small budgets")
    p.add_argument("--out", default="outputs/ab", help="where both runs' rows go (resumable)")


@command("ab", "a prompt A/B: the shipped prompts against edited ones on the same questions, with a verdict",
         _ab_args)
def _ab(args: argparse.Namespace) -> None:
    from helpers.evaluation.ab import run_prompt_ab
    from helpers.evaluation.harness import (BENCHMARKS, check_questions, load_questions, parse_strategy, prepare_corpus,
                                            sample_by_type)
    parse_strategy(args.strategy)
    edited = PromptSet.load(args.prompts)
    corpus, questions_file = BENCHMARKS[args.benchmark]
    questions = sample_by_type(load_questions(questions_file), args.limit)
    out = load_config().resolve_path(args.out)
    config = load_config(overrides={**_overrides(args), "vector_db.uri": str(out / "milvus.db")})
    check_questions(questions, config)
    prepare_corpus(corpus, config)
    report = run_prompt_ab(questions, args.strategy, config, edited, out)
    print(f"\nA: shipped prompts; B: {', '.join(report.edits) or 'no edit'} ({args.strategy}, "
          f"{len(report.pairs())} questions)")
    for line in report.table():
        print("  " + ", ".join(f"{key}: {value}" for key, value in line.items()))
    print("  (B runs second: the prompt cache holds the model's state for every prompt it shares with A, so its "
          "seconds read low; compare cost by calls and tokens)")
    print(f"\nanswers that changed ({len(report.changed())}):")
    for line in report.changed():
        print(f"  [{line['type']}] {line['question']} gold {line['gold']!r}: {line['answer A']!r} -> "
              f"{line['answer B']!r} (F1 {line['F1 A']:.2f} -> {line['F1 B']:.2f})")
    print("\nverdict: " + report.verdict())


def _notebooks_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("names", nargs="*", help="notebook files (default: the whole series)")
    p.add_argument("--out", default="outputs/notebooks", help="where executed copies and HTML go")
    p.add_argument("--fast", action="store_true", help="the small model and small budgets (DSL_FAST=1)")
    p.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    p.add_argument("--render", action="store_true",
                   help="write the series (or the notebooks named) as plain HTML pages, each stamped, with an "
                        "index, into notebooks/rendered/<mode>; pages of notebooks not named stay")


@command("notebooks", "execute the notebooks and write executed copies and HTML", _notebooks_args)
def _notebooks(args: argparse.Namespace) -> None:
    from helpers.lab.execution import render_notebooks
    from helpers.lab.notebooks import execute_notebooks
    if args.render:
        runs = render_notebooks(PROJECT_ROOT / "notebooks" / "rendered" / ("fast" if args.fast else "full"),
                                fast=args.fast, timeout=args.timeout, paths=args.names or None)
    else:
        runs = execute_notebooks(args.names or None, load_config().resolve_path(args.out), args.timeout,
                                 fast=args.fast or None)
    if not all(run.ok for run in runs):
        raise SystemExit(f"error: {sum(not r.ok for r in runs)} notebook(s) failed")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers", description="DeepSearch Lab command line")
    parser.add_argument("--debug", action="store_true", help="show the full traceback of any error")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (help_text, arguments, func) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text)
        arguments(p)
        p.set_defaults(func=func)
    args = parser.parse_args(argv)
    warnings.formatwarning = lambda message, *rest, **kwargs: f"warning: {message}\n"  # one line, no source
    try:
        args.func(args)
    except KeyboardInterrupt:
        print(f"stopped (Ctrl-C) during `{args.command}`; re-running the same command is safe", file=sys.stderr)
        return 130
    except DeepSearchLabError as exc:
        if args.debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - a bug or a library fault: one line, the traceback on request
        if args.debug:
            raise
        print(f"error: unexpected {type(exc).__name__} during `{args.command}`: {exc}\n"
              f"(`python -m helpers --debug {args.command} ...` shows the traceback; please report it)",
              file=sys.stderr)
        return 1
    return 0
