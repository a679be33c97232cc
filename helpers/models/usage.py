"""Accounting: every model call is recorded with its step, tokens and time."""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import asdict, dataclass, field

_calls_in_process = 0  # every call any ledger of this process recorded (the notebook tests compare it)


def calls_in_process() -> int:
    """Model calls recorded by every ledger of this process so far."""
    return _calls_in_process


@dataclass
class CallRecord:
    step: str
    backend: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    ok: bool = True


@dataclass
class UsageLedger:
    """All calls of one run.  ``table()`` gives per-step and total figures."""

    records: list[CallRecord] = field(default_factory=list)

    def add(self, record: CallRecord) -> None:
        global _calls_in_process
        self.records.append(record)
        _calls_in_process += 1

    @property
    def calls(self) -> int:
        return len(self.records)

    @property
    def prompt_tokens(self) -> int:
        return sum(r.prompt_tokens for r in self.records)

    @property
    def completion_tokens(self) -> int:
        return sum(r.completion_tokens for r in self.records)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.records)

    def by_step(self) -> list[dict]:
        """One row per step (in order of first use) plus a final 'total' row."""
        rows: OrderedDict[str, dict] = OrderedDict()
        for r in self.records:
            row = rows.setdefault(r.step, {"step": r.step, "calls": 0, "prompt_tokens": 0,
                                           "completion_tokens": 0, "seconds": 0.0})
            row["calls"] += 1
            row["prompt_tokens"] += r.prompt_tokens
            row["completion_tokens"] += r.completion_tokens
            row["seconds"] += r.seconds
        total = {"step": "total", "calls": self.calls, "prompt_tokens": self.prompt_tokens,
                 "completion_tokens": self.completion_tokens, "seconds": self.seconds}
        return [*rows.values(), total]

    def table(self) -> str:
        """The per-step rows as aligned text, for terminals and notebooks."""
        lines = [f"{'step':<22}{'calls':>6}{'prompt tok':>12}{'compl. tok':>12}{'seconds':>10}"]
        for row in self.by_step():
            if row["step"] == "total":
                lines.append("-" * 62)
            lines.append(f"{row['step']:<22}{row['calls']:>6}{row['prompt_tokens']:>12}"
                         f"{row['completion_tokens']:>12}{row['seconds']:>10.1f}")
        return "\n".join(lines)

    def summary(self) -> dict:
        return {"calls": self.calls, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "seconds": round(self.seconds, 2),
                "by_step": self.by_step()}

    def to_list(self) -> list[dict]:
        return [asdict(r) for r in self.records]

    @classmethod
    def from_list(cls, rows: list[dict]) -> "UsageLedger":
        return cls([CallRecord(**row) for row in rows])
