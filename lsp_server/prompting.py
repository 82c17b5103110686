"""From a `teachback.ask` request to the agent's UserInput.

A workspace file becomes a ContextRef (path, 1-based lines, diagnostics as its note). A document
that is no file in the workspace (an `untitled:` buffer, another scheme, a file elsewhere) cannot
be read or edited by the agent's tools, so its text (the selected lines, or all of it) goes into
the instruction itself, with a note saying so.
"""

from __future__ import annotations

from agent.protocol import ContextRef, UserInput
from lsp_server.commands import AskRequest, RequestFailed, line_span
from lsp_server.documents import Documents

INLINE_LIMIT = 20_000  # characters of a non-file buffer sent inline


def user_input(request: AskRequest, documents: Documents) -> UserInput:
    if request.uri is None:
        return UserInput(text=request.instruction)
    ref = documents.ref(request.uri)
    first, last = line_span(request.range) if request.range is not None else (None, None)
    note = "; ".join(request.diagnostics) or None
    if ref.path is not None:
        return UserInput(
            text=request.instruction,
            context=(ContextRef(path=ref.path, start_line=first, end_line=last, note=note),),
        )
    buffer = documents.get(request.uri)
    if buffer is None:
        raise RequestFailed(
            f"{ref.reason}, and it is not open in the editor; open it first or point at a workspace file."
        )
    lines = buffer.text.splitlines()
    selected = lines[first - 1 : last] if first is not None and last is not None else lines
    text = "\n".join(selected)
    if len(text) > INLINE_LIMIT:
        text = text[:INLINE_LIMIT] + f"\n[… cut at {INLINE_LIMIT:,} characters]"
    span = f" (lines {first}-{last})" if first is not None else ""
    inline = (
        f"{request.instruction}\n\nThe text is from {request.uri}{span}. It is not a file in the workspace, so "
        f"tools cannot read or edit it: answer with the code in your reply.\n```\n{text}\n```"
    )
    if note:
        inline += f"\nThe editor reports: {note}"
    return UserInput(text=inline)
