"""The `teachback` command: the composition root. It parses the command's name, then imports only
that command's module (cli.commands names them all), so `teachback --help` and `teachback lsp`
start fast."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    line = sys.argv[1:] if argv is None else argv
    if line[:1] == ["capture"] and "--drain" not in line and not {"-h", "--help"} & set(line):
        from cli.capture import hook_main  # another agent's hook: nothing else may load (cli.capture)

        return hook_main(line[1:])
    import argparse
    import io
    import logging
    from importlib import import_module

    from cli.commands import COMMANDS
    from cli.options import EXIT_OK

    top = _parser()
    args = top.parse_args(argv)
    if args.command is None:  # a bare `teachback` is someone looking for where to start
        top.print_help()
        return EXIT_OK
    command = COMMANDS[args.command]
    module = import_module(command.module)
    parser = argparse.ArgumentParser(prog=f"teachback {args.command}", description=command.summary)
    getattr(module, command.arguments)(parser)
    options = parser.parse_args(args.arguments)
    options.command = args.command
    for stream in (sys.stdout, sys.stderr):  # text the model sent may hold lone surrogates: shown escaped
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    return _run(getattr(module, command.main), options)


def _run(entry, options) -> int:
    from agent.config import ConfigError
    from cli.options import EXIT_USAGE
    from feedback_store.errors import StoreError

    try:
        return entry(options)
    except ConfigError as exc:
        print(f"teachback: configuration error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except StoreError as exc:
        print(f"teachback: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("teachback: interrupted", file=sys.stderr)
        return 130


def _parser():
    """The command names; the rest of the line is parsed by the named command's own parser, built
    once its module is imported (prefix_chars keeps argparse from reading its options here)."""
    import argparse

    from cli.commands import COMMANDS

    parser = argparse.ArgumentParser(
        prog="teachback",
        usage="teachback [-v] COMMAND [ARGUMENTS ...]",
        description="A coding agent that learns from its mistakes.",
        epilog=command_list(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    # Listed by the epilog, in groups; argparse would list them flat.
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", help="`teachback COMMAND --help` for its options")
    for name in COMMANDS:
        each = sub.add_parser(name, add_help=False, prefix_chars="\0")
        each.add_argument("arguments", nargs=argparse.REMAINDER)
    return parser


def command_list() -> str:
    """The commands by group (cli.commands.GROUPS), each with its summary."""
    from cli.commands import COMMANDS, GROUPS

    width = max(map(len, COMMANDS)) + 2
    blocks = []
    for title, names in GROUPS.items():
        rows = [f"  {name:<{width}}{COMMANDS[name].summary}" for name in names]
        blocks.append("\n".join([f"{title}:", *rows]))
    return "\n\n".join(blocks)
