"""Every `teachback` command: what it does and where it lives. This table is all that `teachback
--help` loads; a command's module is imported only when a command line names it, so `teachback lsp`
never loads the model stack, and the trainer's torch only loads for train, eval and learn."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    summary: str
    module: str  # the cli module that holds the command
    arguments: str  # its function(parser) that adds the command's arguments
    main: str  # its function(args) -> exit status


COMMANDS = {
    "run": Command("run the agent on an instruction, headless", "cli.run", "add_run_arguments", "run_main"),
    "undo": Command(
        "restore the working tree to the last checkpoint", "cli.workspace", "add_undo_arguments", "undo_main"
    ),
    "doctor": Command(
        "check git, the model, the database, the configuration, MCP servers and hooks",
        "cli.workspace",
        "add_doctor_arguments",
        "doctor_main",
    ),
    "export": Command("export feedback pairs as training data", "cli.export", "add_export_arguments", "export_command"),
    "stats": Command("summarise the feedback store", "cli.export", "add_stats_arguments", "stats_main"),
    "lessons": Command(
        "see, pin, edit and delete the lessons sessions are shown",
        "cli.lessons",
        "add_lessons_arguments",
        "lessons_main",
    ),
    "import": Command(
        "import Claude Code or Codex CLI sessions, or any agent's ATIF trajectories (and their feedback pairs)",
        "cli.team",
        "add_import_arguments",
        "import_main",
    ),
    "hooks": Command(
        "install teachback in Claude Code's or Codex's hooks, to record their sessions live",
        "cli.hooks",
        "add_hooks_arguments",
        "hooks_main",
    ),
    "capture": Command(
        "the command those hooks run (a hook payload on stdin); --drain records what they sent",
        "cli.capture",
        "add_capture_arguments",
        "capture_main",
    ),
    "share": Command(
        "share sessions, a repository or a workspace with your team", "cli.team", "add_share_arguments", "share_main"
    ),
    "unshare": Command(
        "stop sharing sessions, a repository or a workspace", "cli.team", "add_share_arguments", "unshare_main"
    ),
    "merge": Command("merge feedback stores into one team store", "cli.team", "add_merge_arguments", "merge_main"),
    "mcp": Command(
        "allow or revoke the MCP servers and hooks a workspace defines", "cli.mcp", "add_mcp_arguments", "mcp_main"
    ),
    "lsp": Command("run the language server (stdio unless --tcp)", "cli.doors", "add_lsp_arguments", "lsp_main"),
    "acp": Command(
        "run the Agent Client Protocol agent on stdio (an editor's agent panel)",
        "cli.doors",
        "add_acp_arguments",
        "acp_main",
    ),
    "tui": Command("open the terminal app", "cli.doors", "add_tui_arguments", "tui_main"),
    "map": Command("print the repository map", "cli.map", "add_map_arguments", "map_command"),
    "demo": Command(
        "run the agent offline on a sample project with the embedded model",
        "cli.demo",
        "add_demo_arguments",
        "demo_main",
    ),
    "tasks": Command(
        "make graded tasks from a repository (synth), run attempts at them (run), sample training data at "
        "their recorded states (branch)",
        "cli.tasks",
        "add_tasks_arguments",
        "run_action",
    ),
    "bench": Command(
        "score a model on a task suite, or compare two bench runs", "cli.tasks", "add_bench_arguments", "run_action"
    ),
    "train": Command(
        "train a LoRA adapter on exported feedback pairs (sdpo, sft, dpo, mix)",
        "cli.train",
        "add_train_arguments",
        "train_main",
    ),
    "eval": Command(
        "evaluate a trained adapter against the model without it", "cli.evaluate", "add_eval_arguments", "eval_main"
    ),
    "learn": Command(
        "one round of export, train, evaluate and promote (or keep the current adapter)",
        "cli.learn",
        "add_learn_arguments",
        "learn_main",
    ),
}
TRAINER_COMMANDS = ("train", "eval", "learn")  # what `python -m trainer` runs

# How `teachback --help` lists the commands: a newcomer's path first, then by what they serve.
GROUPS = {
    "start here": ("demo", "run", "tui", "stats", "export"),
    "in your editor": ("lsp", "acp"),
    "the workspace": ("undo", "doctor", "mcp", "map"),
    "the feedback store": ("lessons", "import", "share", "unshare", "merge"),
    "other agents": ("hooks", "capture"),
    "learning from it": ("tasks", "bench", "train", "eval", "learn"),
}
