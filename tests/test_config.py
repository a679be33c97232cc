from __future__ import annotations

import pytest
import yaml

from helpers.config import DEFAULT_CONFIG_FILE, Config, load_config
from helpers.errors import ConfigError


def test_file_defaults():
    config = load_config(environ={})
    assert config.llm.provider == "llamacpp" and config.llm.model == "qwen2.5-coder-1.5b"
    assert config.llm.context_size >= 4096


def _flat(tree: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in tree.items():
        out.update(_flat(value, f"{prefix}{key}.") if isinstance(value, dict) else {f"{prefix}{key}": value})
    return out


def test_the_yaml_file_shows_every_default_of_config_py_and_agrees_with_it():
    """The defaults are defined once, in helpers/config.py; deepsearch.yaml is their annotated copy."""
    shown, defaults = _flat(yaml.safe_load(DEFAULT_CONFIG_FILE.read_text())), _flat(Config().model_dump())
    assert {key: value for key, value in shown.items() if defaults.get(key) != value} == {}
    assert sorted(set(defaults) - set(shown)) == []


def test_environment_and_overrides_layer_in_order():
    env = {"DSL_FAST": "1", "DSL_CONTEXT_SIZE": "6000", "MILVUS_URI": "http://127.0.0.1:19530"}
    config = load_config(environ=env, overrides={"search.top_k": 3})
    assert config.llm.model == "qwen2.5-coder-0.5b"           # from DSL_FAST
    assert config.llm.context_size == 6000                    # env beats DSL_FAST
    assert config.vector_db.uri == "http://127.0.0.1:19530"
    assert config.search.top_k == 3


def test_ollama_host_applies_only_to_ollama():
    assert load_config(environ={"OLLAMA_HOST": "http://h:1"}).llm.base_url is None
    cfg = load_config(environ={"OLLAMA_HOST": "http://h:1", "DSL_PROVIDER": "ollama"})
    assert cfg.llm.provider == "ollama" and cfg.llm.base_url == "http://h:1"


def test_bad_values_give_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="provider"):
        load_config(environ={}, overrides={"llm.provider": "gpt-cloud"})
    bad = tmp_path / "c.yaml"
    bad.write_text("llm: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad, environ={})


def test_milvus_uri_must_be_a_server():
    with pytest.raises(ConfigError, match="DSL_MILVUS_URI"):
        load_config(environ={"MILVUS_URI": "data/milvus/x.db"})
    assert load_config(environ={"DSL_MILVUS_URI": "/tmp/x.db"}).vector_db.uri == "/tmp/x.db"
