"""Commands ganlab prints, quoted twice: for Hydra's override grammar, then for the shell (bash and zsh).

Every command line ganlab prints or stores (resume advice, the command that continues a sweep, a refusal's fix)
is built here, so that pasted as printed it gives Hydra the same values: a folder name with a space, ``=``,
``,``, brackets or quotes included. A leaf: it imports nothing from ganlab.
"""

from __future__ import annotations

import re
import shlex

#: A value Hydra's grammar reads back unchanged without quotes (a plain path, a number, a name).
_PLAIN = re.compile(r"[A-Za-z0-9_./@+-]+")
#: The characters that keep a word out of double quotes (the shell would expand or unescape them there).
_DOUBLE_QUOTE_SPECIAL = '"$`\\!'


def hydra_value(text: str, force: bool = False) -> str:
    """``text`` as the value of a Hydra override that Hydra reads back as exactly the string ``text``: as it is
    when plain (letters, digits and ``_./@+-``, not a null, bool or number) and ``force`` is False, else in single
    quotes, a quote escaped (``\\'``) and a run of backslashes before a quote or the closing quote doubled (Hydra's
    rule for quoted values). :func:`shell_join` then quotes the whole ``key=value`` for the shell.

    Args:
        text: the value (a folder name, a string setting).
        force: quote even a plain value (a string setting whose commas must not make a sweep reads the same).
    """
    if not force and _PLAIN.fullmatch(text) and not _typed(text):
        return text
    escaped = re.sub(r"(\\*)('|$)", lambda m: m.group(1) * 2 + ("\\'" if m.group(2) else ""), text)
    return f"'{escaped}'"


def _typed(text: str) -> bool:
    """Whether Hydra reads ``text`` unquoted as something other than that string (null, a bool, a number)."""
    if text.lower() in ("null", "true", "false", "inf", "+inf", "-inf", "nan"):
        return True
    try:
        float(text.replace("_", ""))
    except ValueError:
        return False
    return True


def hydra_override(key: str, value: str, force: bool = False) -> str:
    """``key=<value>`` with the value quoted for Hydra (:func:`hydra_value`); ``key`` as given, ``+``/``++``/``~``
    prefixes included (``++trainer.resume='/a b'``)."""
    return f"{key}={hydra_value(value, force)}"


def shell_join(words: list[str]) -> str:
    """``words`` as one command line for bash and zsh, like :func:`shlex.join`, but a word holding single quotes
    (a Hydra-quoted value, ``hydra.run.dir='/a b'``) goes in double quotes when nothing in it is special there
    (no ``"``, ``$``, backquote, backslash or ``!``), which reads better than shlex's ``'"'"'`` splices."""
    def quote(word: str) -> str:
        if "'" in word and not any(c in word for c in _DOUBLE_QUOTE_SPECIAL):
            return f'"{word}"'
        return shlex.quote(word)

    return " ".join(quote(w) for w in words)


def override_word(key: str, value: str) -> str:
    """``key=value`` as one shell word that Hydra reads as one string setting, commas and all (always quoted for
    Hydra): ``"strategy.diffaugment.policy='color,translation'"``."""
    return shell_join([hydra_override(key, value, force=True)])
