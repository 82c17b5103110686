"""Everything known about each export format, one record per format.

The command line reads this table at start-up (the names in `--format`'s help), so it imports
nothing heavy: a record names its builder in feedback_store.export.formats and loads it on first use.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from importlib import import_module
from typing import Any

BUILDERS = "feedback_store.export.formats"


def _fields(names: str) -> tuple[str, ...]:
    return tuple(names.split())


@dataclass(frozen=True)
class Format:
    kind: str
    version: int
    trainer: str  # what reads it, as the dataset card says
    columns: tuple[str, ...]  # the top-level fields of every record (an export adds `provenance`)
    builder: str | None  # its function in BUILDERS (an example -> records or Left); None: whole sessions
    file: str = "jsonl"  # jsonl | parquet
    needs_correction: bool = False  # a pair without a fitting correction has no record
    accepted_edits: bool = False  # edits a user accepted are records too, not only failures

    @property
    def name(self) -> str:
        return f"teachback-{self.kind}-{self.version}"

    @property
    def parquet(self) -> bool:
        return self.file == "parquet"

    @property
    def suffix(self) -> str:
        return f".{self.file}"

    @cached_property
    def build(self) -> Callable[[Any], Any]:
        if self.builder is None:
            raise ValueError(f"{self.kind} is written from whole sessions, not built from one pair")
        return getattr(import_module(BUILDERS), self.builder)


FORMATS: dict[str, Format] = {
    "sdpo": Format(
        "sdpo",
        3,
        "teachback's own trainer, or any offline analysis: the full record",
        _fields(
            "format id session_id source tool error_kind model created_at corrected_at target prompt tools "
            "completion feedback correction chosen chosen_derived chosen_left_out teacher_prompt rendered"
        ),
        "sdpo",
    ),
    "trl-sdpo": Format(
        "trl-sdpo",
        2,
        "trl.experimental.sdpo.SDPOTrainer with SDPOConfig(include_environment_feedback=True) and "
        "reward_funcs=[feedback_store.rewards.tool_call_reward]",
        _fields("format id session_id source prompt privileged_context ground_truth tools rendered"),
        "trl_sdpo",
    ),
    "trl-sdft": Format(
        "trl-sdft",
        3,
        "trl.experimental.sdft.SDFTTrainer",
        _fields("format id session_id source prompt privileged_context chosen_derived tools rendered"),
        "trl_sdft",
        needs_correction=True,
    ),
    "dpo": Format(
        "dpo",
        3,
        "trl.DPOTrainer",
        _fields("format id session_id source prompt chosen rejected chosen_derived tools rendered"),
        "dpo",
        needs_correction=True,
    ),
    "sft": Format(
        "sft",
        3,
        "trl.SFTTrainer (prompt/completion: only the completion is trained)",
        _fields("format id session_id source prompt completion chosen_derived tools rendered"),
        "sft",
        needs_correction=True,
    ),
    "kto": Format(
        "kto",
        2,
        "trl.KTOTrainer",
        # `chosen_derived` only on a correction's record (id `-fix`)
        _fields("format id session_id source prompt completion label chosen_derived tools rendered"),
        "kto",
        accepted_edits=True,
    ),
    "verl": Format(
        "verl",
        2,
        "verl's RLHFDataset, scored with custom_reward_function.path=<feedback_store/rewards.py> "
        "custom_reward_function.name=compute_score",
        _fields("format data_source prompt ability reward_model extra_info"),
        "verl",
        file="parquet",
    ),
}
# Whole sessions, written by feedback_store.export.atif rather than built pair by pair.
# Version 2: ATIF v1.7, the tool schemas in the agent's `tool_definitions` (no longer `extra.tools`),
# each result's outcome in its `extra`, and a folder of `<session id>.json` files unless --out ends in .jsonl.
TRAJECTORIES = Format(
    "atif",
    2,
    "any ATIF reader (Harbor, NVIDIA NeMo Agent toolkit, `teachback import atif`): whole sessions, one "
    "trajectory per line (.jsonl) or per file in a folder",
    ("schema_version", "session_id", "agent", "steps", "final_metrics", "extra"),
    None,
)


def format_of(kind: str) -> Format:
    """The record of a format by its kind, trajectories included."""
    return TRAJECTORIES if kind == TRAJECTORIES.kind else FORMATS[kind]
