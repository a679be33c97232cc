"""DeepSearch Lab helpers: the code the notebooks, the CLI and the tests import."""
from .config import Config, load_config
from .errors import DeepSearchLabError, StructuredOutputError
from .llm import LLM, Budget, make_llm
from .usage import UsageLedger

__all__ = ["Budget", "Config", "DeepSearchLabError", "LLM", "StructuredOutputError",
           "UsageLedger", "load_config", "make_llm"]
