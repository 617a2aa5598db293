"""Sphinx roles in ganlab's docstrings as Markdown for mkdocstrings (issue 44).

ganlab's docstrings name other objects with Sphinx roles (``:func:`run```, ``:class:`~ganlab.data.GANData```,
``:attr:`Trainer.stats <ganlab.trainer.stats.Stats>```), which Markdown shows as they are typed. This Griffe
extension (``extensions`` in ``mkdocs.yml``'s mkdocstrings options) rewrites each docstring once the package is
loaded, before mkdocstrings renders it: a role whose target is an object the API reference shows becomes a
cross-reference (``[`GANData`][ganlab.data.base.GANData]``, a link mkdocs-autorefs resolves), any other target (torch,
a private helper, an object without a docstring, so without a heading) a code span (```GANData```), so a build in
strict mode never meets a link it cannot resolve. :func:`convert_roles` is the text conversion itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import griffe

#: A Sphinx role of the Python domain: ``:func:`x```, ``:py:class:`~a.b.C```, ``:attr:`text <target>```.
ROLE = re.compile(r":(?:py:)?(?:mod|class|func|meth|attr|data|exc|obj|const|type):`([^`]+)`")

#: ``text <target>`` inside a role: the text shown and the object named.
EXPLICIT = re.compile(r"(?s)(.*\S)\s*<([^<>]+)>")


def label_and_target(role: re.Match[str]) -> tuple[str, str]:
    """A :data:`ROLE` match's label and target. The label is what Sphinx shows: the target as typed, its last name
    with a leading ``~`` (``:class:`~a.b.C``` -> ``C``), or the text of ``text <target>``; the target loses a leading
    ``~``, ``!`` or ``.``."""
    body = role.group(1).strip()
    explicit = EXPLICIT.fullmatch(body)
    if explicit:
        label, target = explicit.group(1), explicit.group(2).strip()
    else:
        target = body.lstrip("~!")
        label = target.rsplit(".", 1)[-1] if body.startswith("~") else target.lstrip(".")
    return label, target.lstrip("~!.")


def convert_roles(text: str, resolve: Callable[[str], str | None]) -> str:
    """``text`` with every Sphinx role replaced by Markdown (:func:`label_and_target`): a cross-reference
    ``[`label`][path]`` where ``resolve(target)`` gives the full path of an object the site shows, else the code
    span ```label```."""
    def repl(match: re.Match[str]) -> str:
        label, target = label_and_target(match)
        path = resolve(target)
        return f"[`{label}`][{path}]" if path else f"`{label}`"

    return ROLE.sub(repl, text)


def strip_roles(text: str) -> str:
    """``text`` with every Sphinx role replaced by its bare label, for text shown verbatim (a code block)."""
    return ROLE.sub(lambda match: label_and_target(match)[0], text)


def _member(obj: Any, dotted: str) -> Any:
    """The object ``dotted`` names below ``obj`` (through imports to their targets), or None."""
    for name in dotted.split("."):
        if obj.is_alias:
            obj = obj.final_target
        obj = obj.members.get(name)
        if obj is None:
            return None
    return obj.final_target if obj.is_alias else obj


def find(obj: Any, target: str, pkg: Any) -> Any:
    """The object ``target`` names in ``obj``'s docstring: a full path in ``pkg`` (``ganlab.data.GANData``), else a
    name in the scope of ``obj``, of its class or of its module (``GANData``, ``Trainer.fit``); None if none is
    found or an import cannot be followed."""
    try:
        if target == pkg.name or target.startswith(f"{pkg.name}."):
            return pkg if target == pkg.name else _member(pkg, target.removeprefix(f"{pkg.name}."))
        scope = obj
        while scope is not None:
            if not scope.is_alias and (scope.is_module or scope.is_class):
                found = _member(scope, target)
                if found is not None:
                    return found
            scope = scope.parent
    except (griffe.AliasResolutionError, griffe.CyclicAliasError, KeyError):
        return None
    return None


def shown(obj: Any, root: str = "ganlab") -> bool:
    """Whether the API reference has a heading (an anchor) for ``obj``: an object of ``root`` with no private name
    on its path, and a docstring on it and on each class it is in (mkdocs.yml: ``show_if_no_docstring: false``);
    a module always (each has its page)."""
    path = str(obj.path)
    if path != root and not path.startswith(f"{root}."):
        return False
    if any(part.startswith("_") for part in path.split(".")):
        return False
    while not obj.is_module:
        if not obj.docstring:
            return False
        obj = obj.parent
    return True


class SphinxRoles(griffe.Extension):
    """The Griffe extension: every docstring of the loaded package through :func:`convert_roles`."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        """Rewrite the docstrings of ``pkg`` and of everything in it (imports left to their own module)."""
        def resolve_in(obj: Any) -> Callable[[str], str | None]:
            def resolve(target: str) -> str | None:
                found = find(obj, target, pkg)
                return str(found.path) if found is not None and shown(found, pkg.name) else None
            return resolve

        stack: list[Any] = [pkg]
        while stack:
            obj = stack.pop()
            if obj.docstring is not None and ":" in obj.docstring.value:
                obj.docstring.value = convert_roles(obj.docstring.value, resolve_in(obj))
            stack.extend(m for m in obj.members.values() if not m.is_alias)
