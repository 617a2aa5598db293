"""How a shell reads a command line that the docs or a ``--help`` page shows, shared by
tests/project/test_docs_commands.py and tests/cli/test_help_pages.py."""

from __future__ import annotations

import re

#: a placeholder such as ``<run dir>``, which stands for one word
PLACEHOLDER = re.compile(r"<[^<>`]+>")


def unquoted_globs(line: str) -> list[str]:
    """Words of ``line`` with ``[`` or ``]`` outside quotes: zsh expands them as a pattern (``no matches found``)."""
    words = re.findall(r"(?:'[^']*'|\"[^\"]*\"|[^\s'\"])+", line.split(" #")[0])
    return [w for w in words if re.search(r"[\[\]]", re.sub(r"'[^']*'|\"[^\"]*\"", "", w))]
