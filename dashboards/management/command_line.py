"""How a management command names itself in the audit trail and on the run page."""

from __future__ import annotations

import getpass


def command_line_actor(command: str) -> str:
    """The OS user who ran ``manage.py <command>``, said to be the command line's: no ckptweb user stands behind it."""
    return f"{getpass.getuser()} on the command line (manage.py {command})"
