"""Everything the notebook series (``notebooks/00_…`` to ``10_…``) imports, from one place.

* ``helpers.lab.workspace``: ``notebook_config(name, ...)`` (the project configuration with a
  Milvus Lite directory of the notebook's own, so two open kernels never fight over one
  database lock; ``DSL_FAST=1`` is applied by ``load_config`` itself), ``knowledge_base(config)``
  (ingest the manifest, idempotent; returns the store and the embedder), ``environment_rows``, and
  the lab's prompt file: ``save_prompt(name, text)`` adds an edited prompt to it, ``lab_prompts()``
  loads it for the other notebooks, ``prompts_file()`` says where it is (for the CLI's ``--prompts``).
* ``helpers.lab.display``: ``table_html``, ``usage_table``, ``format_step``, the widgets
  ``prompt_editor``, ``prompt_browser`` (every prompt of a step, saved to the lab's prompt file),
  ``run_panel`` and ``trace_viewer`` (their runs print one line per step),
  ``stream_steps`` (the same for a long cell), and small analysis glue.
* ``helpers.lab.execution``: ``execute_notebooks(...)`` runs notebooks top to bottom.
"""
from helpers.config import fast_mode
from helpers.lab.display import (check_citations, confusion_matrix, format_step, project_2d, prompt_browser,
                                 prompt_diff, prompt_editor, renumber_citations, run_panel, stream_steps, table_html,
                                 trace_viewer, usage_table)
from helpers.lab.execution import DEFAULT_OUT, NotebookRun, execute_notebook, execute_notebooks, kernel_env
from helpers.lab.workspace import (DB_DIR_ENV, NOTEBOOK_DIR, PROMPTS_ENV, choose_mode, collection_vectors,
                                   config_summary, environment_rows, forget_prompt, knowledge_base, lab_prompts,
                                   milvus_path, notebook_config, notebook_paths, prompts_file, save_prompt)

__all__ = ["DB_DIR_ENV", "DEFAULT_OUT", "NOTEBOOK_DIR", "PROMPTS_ENV", "NotebookRun", "check_citations", "choose_mode",
           "collection_vectors", "config_summary", "confusion_matrix", "environment_rows", "execute_notebook",
           "execute_notebooks", "fast_mode", "forget_prompt", "format_step", "kernel_env", "knowledge_base",
           "lab_prompts", "milvus_path", "notebook_config", "notebook_paths", "project_2d", "prompt_browser",
           "prompt_diff", "prompt_editor", "prompts_file", "renumber_citations", "run_panel", "save_prompt",
           "stream_steps", "table_html", "trace_viewer", "usage_table"]
