"""Every ``ganlab-*`` command line that README.md and docs/ show is checked against the config, so the docs cannot
drift from it: composed with Hydra (each value of a sweep under ``-m``), then run through ganlab's own config checks.
Nothing is trained. Every shell line the docs show must also paste as printed into bash and into an interactive zsh
(macOS's default shell), which reads ``#`` as a word, not a comment (``INTERACTIVE_COMMENTS`` is off), and brackets
outside quotes as a file pattern.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from shell_words import PLACEHOLDER, unquoted_globs

from ganlab import CONFIG_DIR
from ganlab.config.check import ConfigError, check_command_line

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
COMMANDS = {"ganlab-train": "train", "ganlab-eval": "train", "ganlab-sample": "sample"}
SHELLS = {"bash", "sh", "shell", "console", "zsh"}
#: the first line of an unlabelled block that holds commands (a block of output or a usage pattern is labelled text)
COMMAND_START = re.compile(r"^(\$ |[A-Z_]+=\S+ |\.venv/bin/|ganlab-|python3? |pip |sudo |mkdocs |tensorboard )")
FENCE_LINE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^`\s]*)")
INLINE = re.compile(r"`((?:[A-Z_]+=\S+ )*(?:\.venv/bin/)?ganlab-[a-z]+(?: [^`]*)?)`")
INDENTED = re.compile(r"(?:^|\n\n)(    \S[^\n]*\n?(?:    [^\n]*\S[^\n]*\n?)*)")  # a continuation may indent more


def _joined_lines(block: str) -> Iterator[str]:
    """The lines of a shell block, backslash continuations joined, comments and prompts left in."""
    buf = ""
    for line in block.splitlines():
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        yield buf + line
        buf = ""


def fenced_blocks(text: str) -> tuple[list[tuple[str, str]], str]:
    """((language, body) of every fenced code block, the text outside them). Fences pair line by line as Markdown
    pairs them: a block ends at a fence of its own character at least as long, with nothing after it."""
    blocks, outside, lang, fence, body = [], [], "", None, []
    for line in text.splitlines(keepends=True):
        m = FENCE_LINE.match(line)
        if fence is None and m:
            lang, fence, body = m.group(3).lower(), m.group(2), []
        elif fence is not None and m and m.group(2).startswith(fence) and not line.strip().strip(fence[0]):
            blocks.append((lang, "".join(body)))
            fence = None
        elif fence is not None:
            body.append(line)
        else:
            outside.append(line)
    return blocks, "".join(outside)


def shell_lines(text: str) -> list[str]:
    """Every command line of ``text``'s shell blocks (backslash continuations joined): all lines of a ``bash``/``sh``/
    ``shell``/``zsh`` block or of an unlabelled block that starts like a command; the ``$ `` lines, prompt left off, of
    a ``console``, ``text`` or unlabelled block of output."""
    found = []
    for lang, body in fenced_blocks(text)[0]:
        lines = [line.strip() for line in _joined_lines(body) if line.strip()]
        if lang in SHELLS - {"console"} or (lang == "" and lines and COMMAND_START.match(lines[0])
                                             and not lines[0].startswith("$ ")):
            found += lines
        elif lang in {"console", "text", ""}:
            found += [line[2:] for line in lines if line.startswith("$ ")]
    for block in indented_blocks(text):  # as an unlabelled fenced block: commands, or a transcript's ``$ `` lines
        lines = [line.strip() for line in _joined_lines(block) if line.strip()]
        if lines and COMMAND_START.match(lines[0]) and not lines[0].startswith("$ "):
            found += lines
        else:
            found += [line[2:] for line in lines if line.startswith("$ ")]
    return found


def indented_blocks(text: str) -> list[str]:
    """The bodies (indent left off) of the 4-space-indented code blocks outside ``text``'s fenced blocks."""
    return [re.sub(r"^    ", "", b, flags=re.M) for b in INDENTED.findall(fenced_blocks(text)[1])]


def trailing_comment(line: str) -> bool:
    """Whether ``line`` holds a ``#`` comment outside quotes (a word that starts with ``#``): bash drops it, but an
    interactive zsh (``INTERACTIVE_COMMENTS`` off by default) passes ``#`` and the rest to the command."""
    return bool(re.search(r"(^|\s)#", re.sub(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"", "''", line)))


def command_lines(text: str) -> list[str]:
    """Every ganlab command of ``text``: from shell code blocks, fenced or indented (each ``cmd && cmd`` part), and
    inline code spans."""
    found = []
    blocks = fenced_blocks(text)[0]
    fenced = [body for lang, body in blocks if lang in SHELLS or lang == ""]
    indented = indented_blocks(text)
    for block in fenced + indented:
        for line in _joined_lines(block):
            for part in re.split(r"&&|;", line.removeprefix("$ ")):  # a transcript's prompt left off
                if re.search(r"(^|\s|/)ganlab-(train|eval|sample)\b", part):
                    found.append(part.strip())
    found += [" ".join(m.split()) for m in INLINE.findall(text) if re.search(r"ganlab-(train|eval|sample)\b", m)]
    return found


def usage_pattern(line: str) -> bool:
    """Whether ``line`` shows a command's syntax rather than a command: ``...``, alternatives ``a | b``, optional
    parts ``[key=value ...]``, ``[overrides]``, ``[--flag]``."""
    return "..." in line or "|" in line or bool(re.search(r"\[(key=value|overrides|--)", line))


def parse(line: str) -> tuple[str, list[str], bool] | None:
    """(command, overrides, multirun) of one command line, or None when it is a pattern rather than a command
    (``...``, ``[key=value ...]``, alternatives ``a | b``). Placeholders (``<run dir>``) stand for a path."""
    if usage_pattern(line):
        return None
    words = shlex.split(PLACEHOLDER.sub("PLACEHOLDER", line), comments=True)
    start = next((i for i, w in enumerate(words) if re.search(r"(^|/)ganlab-(train|eval|sample)$", w)), None)
    if start is None:
        return None
    name = words[start].rsplit("/", 1)[-1]
    args = words[start + 1:]
    multirun = "-m" in args or "--multirun" in args
    overrides = [a for a in args if "=" in a and not a.startswith("-") and "PLACEHOLDER" not in a]
    return name, overrides, multirun


def collected() -> list[tuple[str, str]]:
    return [(f"{page.relative_to(ROOT)}", line) for page in PAGES for line in command_lines(page.read_text())]


def test_the_extraction_by_hand() -> None:
    text = ("x `ganlab-train 'strategy=[pacgan]' seed=1` y `ganlab-eval <run dir> metrics.num_samples=10`\n"
            "```bash\nOMP_NUM_THREADS=1 ganlab-train -m seed=0,1 \\\n  trainer.steps=5  # two jobs\n"
            "python3 -m venv .venv && .venv/bin/ganlab-train\n```\n\n    ganlab-sample <run> n=16\n")
    lines = command_lines(text)
    assert lines == ["OMP_NUM_THREADS=1 ganlab-train -m seed=0,1    trainer.steps=5  # two jobs",
                     ".venv/bin/ganlab-train", "ganlab-sample <run> n=16", "ganlab-train 'strategy=[pacgan]' seed=1",
                     "ganlab-eval <run dir> metrics.num_samples=10"]
    assert [parse(x) for x in lines] == [("ganlab-train", ["seed=0,1", "trainer.steps=5"], True),
                                         ("ganlab-train", [], False),
                                         ("ganlab-sample", ["n=16"], False),
                                         ("ganlab-train", ["strategy=[pacgan]", "seed=1"], False),
                                         ("ganlab-eval", ["metrics.num_samples=10"], False)]
    assert unquoted_globs("ganlab-train strategy=[pacgan] 'strategy=[r1]' x") == ["strategy=[pacgan]"]
    assert len(collected()) > 20  # the docs show many; an empty list would pass everything below


def pasted_lines() -> list[tuple[str, str]]:
    """(page, line) of every shell line the docs show: the shell blocks' lines and the inline ``ganlab-*`` spans."""
    out = []
    for page in PAGES:
        text = page.read_text()
        spans = [" ".join(m.split()) for m in INLINE.findall(text)]
        spans = [span for span in spans if not usage_pattern(span)]
        out += [(f"{page.relative_to(ROOT)}", line) for line in dict.fromkeys(shell_lines(text) + spans)]
    return out


def zsh_words(line: str) -> list[str]:
    """The words interactive zsh reads in ``line`` (its lexer, ``${(z)...}``, with comments off, as zsh's default
    ``NO_INTERACTIVE_COMMENTS`` has them): a ``# comment`` is words ``#``, ``comment``."""
    done = subprocess.run([ZSH, "-f", "-o", "no_interactive_comments", "-c", 'print -rNC1 -- "${(@z)1}"', "zsh", line],
                          capture_output=True, text=True, check=True)
    return done.stdout.split("\0")[:-1]


def paste_problems(line: str) -> list[str]:
    """Why ``line`` would not run as printed in bash or in interactive zsh (empty when it would). A placeholder
    (``<run dir>``) stands for one word."""
    line = PLACEHOLDER.sub("PLACEHOLDER", line)
    problems = []
    for shell in ("bash", ZSH):
        done = subprocess.run([shell, "-n", "-c", line], capture_output=True, text=True)
        if done.returncode:
            problems.append(f"{Path(shell).name} -n: {done.stderr.strip()}")
    comment = [w for w in zsh_words(line) if w.startswith("#")]
    if comment:
        problems.append(f"zsh reads {comment[0]!r} as a word, not a comment: put the comment in the text")
    if unquoted_globs(line):
        problems.append(f"quote {unquoted_globs(line)}: zsh reads brackets as a file pattern")
    return problems


ZSH = shutil.which("zsh") or ""
needs_zsh = pytest.mark.skipif(not ZSH, reason="zsh is not installed")


@needs_zsh
def test_the_paste_check_by_hand() -> None:
    assert zsh_words("ganlab-train seed=1 'a # b'  # no GPU?") == ["ganlab-train", "seed=1", "'a # b'", "#", "no",
                                                                      "GPU?"]
    assert paste_problems("ganlab-train 'strategy=[pacgan]' seed=1 && ganlab-eval <run dir>") == []
    assert paste_problems("# the tests") == ["zsh reads '#' as a word, not a comment: put the comment in the text"]
    assert paste_problems("ganlab-train x=1   # two jobs")[0].startswith("zsh reads '#'")
    assert paste_problems("ganlab-train strategy=[pacgan]") == [
        "quote ['strategy=[pacgan]']: zsh reads brackets as a file pattern"]
    bad_quote = paste_problems("ganlab-train 'seed=1")
    assert [p.split(":")[0] for p in bad_quote] == ["bash -n", "zsh -n"]
    text = ("```bash\nganlab-train \\\n  seed=1\n```\n```python title=\"x.py\"\nx = 1\n```\n"
            "```text\nscore 1\n$ ganlab-eval <run>\n```\n```\npip install -e .\n```\n```\n[usage] x\n```\n")
    assert shell_lines(text) == ["ganlab-train    seed=1", "ganlab-eval <run>", "pip install -e ."]
    assert len(pasted_lines()) > 60  # the docs show many; an empty list would pass everything below


def test_the_comment_check_by_hand() -> None:
    assert trailing_comment("ganlab-study my_study    # = ganlab-study study=my_study action=run")
    assert trailing_comment("# the tests") and trailing_comment("ganlab-train x=1 #no space")
    assert not trailing_comment("ganlab-train 'a # b' \"c # d\" x=#1 e=f#g")
    text = ("Run:\n\n    ganlab-study my_study    # all of it\n    ganlab-study check my_study\n\nthen\n\n"
            "    x = 1  # python, not a command\n\n```bash\nganlab-train seed=1  # one\n```\n")
    assert shell_lines(text) == ["ganlab-train seed=1  # one", "ganlab-study my_study    # all of it",
                                 "ganlab-study check my_study"]
    assert any(page == "docs/howto/studies.md" and line.startswith("ganlab-study check my_study")
               for page, line in pasted_lines())  # an indented block's command is checked too


def test_no_shell_line_has_a_comment() -> None:
    """A ``# comment`` after (or as) a command line breaks it in an interactive zsh; this check needs no zsh."""
    found = [f"{page}: {line}" for page, line in pasted_lines() if trailing_comment(line)]
    assert not found, "shell lines with a # comment (put it in the text, or on its own line in prose):\n" + \
        "\n".join(found)


@needs_zsh
@pytest.mark.parametrize(("page", "line"), pasted_lines())
def test_shell_line_pastes_into_zsh_and_bash(page: str, line: str) -> None:
    assert not paste_problems(line), f"{page}: {line}\n" + "\n".join(paste_problems(line))


#: Commands the docs show on purpose as refused (a transcript of the answer), with the answer they must still get.
DOCUMENTED_REFUSALS = {
    "ganlab-train lr=1e-3": "lr is not a setting of ganlab; the settings named lr: optim.generator.lr",
    "ganlab-train +lr=1e-3": "lr is not a setting of ganlab (a + adds a key nothing reads)",
    "ganlab-train -m model=dcgan,mlp model.generator.width=8":
        "model.generator takes: z_dim, hidden, batch_norm (in the sweep's jobs with model=mlp)",
}


def test_commands_the_docs_show_as_refused_are_refused_as_shown() -> None:
    shown = {line.strip() for _, line in collected()}
    assert set(DOCUMENTED_REFUSALS) <= shown  # still in the docs, or this list is stale
    for line, answer in DOCUMENTED_REFUSALS.items():
        with pytest.raises(ConfigError) as err:
            _, overrides, multirun = parse(line)
            check_command_line(overrides, multirun=multirun)
        assert answer in str(err.value)


def test_commands_compose_and_pass_the_config_checks() -> None:
    failures, seen = [], set()
    for page, line in collected():
        if line.strip() in DOCUMENTED_REFUSALS:
            continue
        parsed = parse(line)
        if parsed is None or page.startswith("docs/extending/"):  # the recipes' configs: test_recipes.py
            continue
        name, overrides, multirun = parsed
        config = COMMANDS[name]
        # a search space (Optuna's interval(...)) is the sweeper's; every discrete sweep is expanded
        parsed_overrides = [o for o in OverridesParser.create().parse_overrides(overrides)
                            if not (o.is_sweep_override() and not o.is_discrete_sweep())]
        jobs = BasicSweeper.split_arguments(parsed_overrides, None)[0] if multirun else [overrides]
        if (config, tuple(map(tuple, jobs))) in seen:
            continue
        seen.add((config, tuple(map(tuple, jobs))))
        try:
            # the first job composed as Hydra will (with its launcher and sweeper when the line sets them), then
            # ganlab's own check, which composes each value of each sweep in turn
            hydra = any(o.key_or_group.startswith("hydra") for o in parsed_overrides)
            with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3", job_name="docs_check"):
                compose(config, overrides=list(jobs[0]), return_hydra_config=hydra)
            if config == "train":
                check_command_line(overrides, multirun=multirun)
        except Exception as err:  # noqa: BLE001 - every failure is reported with its page and line
            failures.append(f"{page}: {line}\n    {type(err).__name__}: {str(err).splitlines()[0]}")
    assert not failures, "commands in the docs that the config refuses:\n" + "\n".join(failures)


def test_the_docs_speak_the_projects_words() -> None:
    """No tracker references (``issue 12``, ``issue-15``) in README.md or docs/: a reader has no tracker."""
    pattern = re.compile(r"\bissues?[ -]#?\d+", re.I)
    found = [f"{page.relative_to(ROOT)}:{i}: {line.strip()[:100]}" for page in PAGES
             for i, line in enumerate(page.read_text().splitlines(), 1) if pattern.search(line)]
    assert not found, "tracker references in the docs:\n" + "\n".join(found)
    assert pattern.search("as issue 12, part 4 says") and pattern.search("the issue-15 refactor")
