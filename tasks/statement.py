"""The instruction of a task, written only from what the deletion left: the signature and
docstring (body), the name and place of what was removed (function, file), and the names of the
failing tests. It never quotes deleted code."""

from __future__ import annotations

from collections.abc import Sequence

from tasks.candidates import definitions
from tasks.mutate import STUBS, Mutation

MAX_LISTED_TESTS = 20
_KIND_WORDS = {"function": "function", "method": "method", "class": "class"}


def problem_statement(mutation: Mutation, fail_to_pass: Sequence[str], tests: str) -> str:
    candidate = mutation.candidate
    if mutation.strategy == "body":
        stub = STUBS[candidate.language]
        head = (
            f"The body of the {_KIND_WORDS[candidate.kind]} `{candidate.qualname}` in `{candidate.path}` "
            f"has been deleted: it now only does `{stub}`. Write the body again so that it does what "
            f"its signature and docstring say:\n\n```{candidate.language}\n{mutation.kept}\n```"
        )
    elif mutation.strategy == "function":
        owner = candidate.qualname.rpartition(".")[0]
        where = f", in `{owner}`" if owner else ""
        head = (
            f"The {_KIND_WORDS[candidate.kind]} `{candidate.qualname}` has been deleted from "
            f"`{candidate.path}` (it stood at line {candidate.start_line}{where}). Write it again so "
            f"that the code and tests that use it work."
        )
    else:
        names = [
            d.qualname
            for d in definitions(candidate.path, candidate.language, mutation.original)
            if "." not in d.qualname
        ]
        listed = ", ".join(f"`{name}`" for name in names)
        head = f"The module `{candidate.path}` has been deleted. Write it again; it defined {listed}."
    return f"{head}\n\n{_tests_paragraph(fail_to_pass, tests)}\n"


def _tests_paragraph(fail_to_pass: Sequence[str], tests: str) -> str:
    intro = (
        "These tests fail until it works again"
        if tests == "visible"
        else "Tests you cannot see check it; these are the ones that fail until it works again"
    )
    shown = [f"- `{test}`" for test in fail_to_pass[:MAX_LISTED_TESTS]]
    if len(fail_to_pass) > MAX_LISTED_TESTS:
        shown.append(f"- and {len(fail_to_pass) - MAX_LISTED_TESTS} more")
    return (
        f"{intro}:\n" + "\n".join(shown) + "\n\nChange the code, not the tests: grading runs the original test files."
    )
