"""The pure helpers: edit conversion, options, command arguments, document locations, corrections."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from agent.workspace import FileChange
from lsp_server.commands import parse_ask, parse_review
from lsp_server.corrections import CorrectionTracker, touches, written_lines
from lsp_server.documents import locate
from lsp_server.edits import (
    EditSupport,
    OpenDocument,
    inverse,
    plan_mirror,
    position_at,
    text_edits,
)
from lsp_server.options import resolve_options
from tests.lsp.harness import apply_text_edits


@pytest.mark.parametrize(
    "before, after",
    [
        ("a\nb\nc\n", "a\nB\nc\nd"),
        ("x = '😀'\ny = 1\n", "x = '😀😀'\ny = 2\n"),
        ("one\r\ntwo\r\n", "one\r\n2\r\nthree\r\n"),
        ("", "new\n"),
        ("gone\n", ""),
    ],
)
def test_text_edits_round_trip(before: str, after: str) -> None:
    assert apply_text_edits(before, text_edits(before, after)) == after


def test_positions_count_utf16_units_and_all_line_breaks() -> None:
    assert position_at("😀x", 2) == types.Position(line=0, character=3)
    assert position_at("a\r\nb\rc\n", 5) == types.Position(line=2, character=0)
    assert position_at("é", 1, "utf-8") == types.Position(line=0, character=2)


def test_plan_leaves_resource_operations_on_disk_without_client_support(tmp_path: Path) -> None:
    changes = [
        FileChange("a.py", "modify", "x\n", "y\n"),
        FileChange("b.py", "create", None, "new\n"),
        FileChange("c.py", "delete", "old\n", None),
        FileChange("d.py", "move", "m\n", "m\n", new_path="e.py"),
    ]
    plain = EditSupport(document_changes=False, resource_operations=frozenset())
    plan = plan_mirror(changes, root=tmp_path, open_documents={}, support=plain)
    assert [c.path for c in plan.handed_over] == ["a.py"]
    assert [c.path for c in plan.left_on_disk] == ["b.py", "c.py", "d.py"]
    assert list(plan.edit.changes) == [(tmp_path / "a.py").as_uri()]
    full = plan_mirror(changes, root=tmp_path, open_documents={"a.py": OpenDocument(7, "x\n")}, support=EditSupport())
    kinds = [type(c).__name__ for c in full.edit.document_changes]
    assert kinds == ["TextDocumentEdit", "CreateFile", "TextDocumentEdit", "DeleteFile", "RenameFile"]
    assert full.edit.document_changes[0].text_document.version == 7


def test_inverse_undoes_each_kind() -> None:
    move = FileChange("a", "move", "1", "2", new_path="b")
    assert inverse(move) == FileChange("b", "move", "2", "1", new_path="a")
    assert inverse(FileChange("a", "create", None, "x")).kind == "delete"
    assert inverse(FileChange("a", "delete", "x", None)) == FileChange("a", "create", None, "x")


def test_options_fall_back_per_key(tmp_path: Path) -> None:
    resolved = resolve_options({"approval": "never", "maxCost": True, "model": "ollama/qwen"}, tmp_path)
    settings = resolved.options.settings
    assert (settings.approval, settings.max_cost, settings.model) == ("ask", 1.0, "ollama/qwen")
    assert len(resolved.problems) == 2
    assert resolve_options(["not", "an", "object"], tmp_path).problems[0].startswith("initializationOptions must be")


def test_command_arguments_are_validated() -> None:
    assert parse_ask(("explain",)).instruction == "explain"
    with pytest.raises(JsonRpcInvalidParams, match="needs the 'uri'"):
        parse_ask(
            ({"instruction": "x", "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}}},)
        )
    with pytest.raises(JsonRpcInvalidParams, match="unknown key"):
        parse_ask(({"instruction": "x", "colour": "red"},))
    assert parse_review("teachback.reject", ("e1", "no")).reason == "no"


def test_locate_refuses_anything_but_workspace_files(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "pkg").mkdir(parents=True)
    (tmp_path / "elsewhere.py").write_text("")
    (root / "link.py").symlink_to(tmp_path / "elsewhere.py")
    assert locate((root / "pkg" / "m.py").as_uri(), root).path == "pkg/m.py"
    assert locate("untitled:Untitled-1", root).reason.endswith("an unsaved buffer, not a file in the workspace")
    assert locate((tmp_path / "elsewhere.py").as_uri(), root).path is None
    assert locate((root / "link.py").as_uri(), root).path is None  # a symlink out of the workspace
    assert locate("vscode-notebook-cell:/x#1", root).path is None


def test_corrections_only_for_agent_lines() -> None:
    before, after = "a\nb\nc\n", "a\nB\nc\n"
    assert written_lines(before, after) == frozenset({1})
    assert touches(after, frozenset({1}), "a\nBee\nc\n")
    assert not touches(after, frozenset({1}), "a\nB\nc\nd\n")
    tracker = CorrectionTracker()
    tracker.track("f.py", before, after)
    tracker.observe("f.py", "z\nB\nc\n")
    assert tracker.take("f.py") is None
    tracker.observe("f.py", "a\nBee\nc\n")
    taken = tracker.take("f.py")
    assert taken is not None and taken.pending == "a\nBee\nc\n"
    assert "f.py" not in tracker.files
