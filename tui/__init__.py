"""teachback's terminal app: chat with the agent, review its edits, browse and export feedback.

`create_app` builds the app for both `teachback tui` and the tests; `main` runs it. Textual and
the agent runtime are imported inside them so that importing `tui` costs nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent.config import Settings
    from tui.app import TeachbackApp


def create_app(workspace: Path, settings: Settings, *, store_path: Path | None = None) -> TeachbackApp:
    """The terminal app for `workspace`; it records to `store_path` (default: `settings.db_path()`)."""
    from tui.app import TeachbackApp

    return TeachbackApp(Path(workspace), settings, store_path=store_path)


def main(workspace: Path, settings: Settings) -> int:
    """Run the terminal app until the user quits; the exit status for the shell."""
    app = create_app(workspace, settings)
    app.run()
    return app.return_code or 0
