"""The README and docs/ against the code: every command in a fenced block parses with the real
parser, every relative link reaches a file (and its heading), and docs/sweep.md's option table
names exactly the options of ``python -m benches run``. Parsing only: nothing is run."""

from __future__ import annotations

import re
import shlex
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benches.sweep import options as sweep_options  # noqa: E402
from benches.sweep.outdir import UsageError  # noqa: E402
from reports import __main__ as reports_main  # noqa: E402

noxfile = pytest.importorskip("noxfile")  # needs nox, which the tests venv has

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
SEPARATORS = {"&&", "||", ";", "|"}
MICRO = {
    "mfu": "benches.micro.mfu",
    "reset-speed": "benches.micro.reset_speed",
    "clip-speed": "benches.micro.clip_speed",
    "spread": "benches.micro.spread",
}


def fenced_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of every line inside a fenced block, continuations joined."""
    lines, inside, fence = [], False, ""
    for number, text in enumerate(path.read_text().splitlines(), 1):
        match = FENCE.match(text)
        if match and (not inside or match.group(2).startswith(fence)):
            inside, fence = (not inside), match.group(2)
            continue
        if inside:
            if lines and lines[-1][1].endswith("\\"):
                lines[-1] = (lines[-1][0], lines[-1][1][:-1] + " " + text.strip())
            else:
                lines.append((number, text))
    return lines


def commands(text: str) -> list[list[str]]:
    """The shell commands of one line: split at && ; | and parentheses, comments dropped."""
    text = text.strip()
    text = re.sub(r"^(\$ |- run: )", "", text)
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        tokens = list(lexer)
    except ValueError:  # not shell (YAML, Python, TOML)
        return []
    out, current = [], []
    for token in tokens:
        if token in SEPARATORS or token in ("(", ")"):
            if current:
                out.append(current)
            current = []
        else:
            current.append(token)
    if current:
        out.append(current)
    return out


def checked_command(tokens: list[str]) -> tuple[str, list[str]] | None:
    """('benches' | 'reports' | 'nox', args) for a command this test checks, else None."""
    while tokens and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=\S*", tokens[0]):
        tokens = tokens[1:]  # VAR=value before the command
    for i in range(len(tokens) - 1):
        if tokens[i] == "-m" and tokens[i + 1] in ("benches", "reports"):
            program = Path(tokens[0]).name
            if program.startswith("python") or program == "torchrun":
                return tokens[i + 1], tokens[i + 2 :]
    if tokens[:2] == ["nox", "-s"]:
        return "nox", tokens[2:]
    return None


def all_commands() -> list[tuple[str, str, list[str]]]:
    found = []
    for path in DOCS:
        for number, text in fenced_lines(path):
            for tokens in commands(text):
                command = checked_command(tokens)
                if command:
                    where = f"{path.relative_to(ROOT)}:{number}"
                    found.append((where, *command))
    return found


class Parsed(Exception):
    """Raised in place of running a micro-benchmark once its arguments parsed."""


def parse_benches(args: list[str]) -> None:
    """Raise ValueError naming what the benches parsers refuse."""
    if args[:1] in (["run"], ["case"]):
        try:
            sweep_options.build_parser().parse_args(args)
        except UsageError as err:
            raise ValueError(str(err)) from None
        return
    if not args or args[0] not in MICRO:
        raise ValueError(f"unknown command {args[:1]}; valid: run, case, {', '.join(MICRO)}")
    import importlib

    from benches.micro import options as micro_options

    module = importlib.import_module(MICRO[args[0]])
    original = micro_options.Parser.parse_args

    def parse_only(self, argv=None, namespace=None):
        original(self, argv, namespace)
        raise Parsed

    micro_options.Parser.parse_args = parse_only
    try:
        module.main(args[1:])
    except Parsed:
        return
    except SystemExit as exit:
        raise ValueError(f"python -m benches {args[0]} exits {exit.code}") from None
    finally:
        micro_options.Parser.parse_args = original
    raise AssertionError("the micro-benchmark's main did not parse its arguments")


def parse_reports(args: list[str]) -> None:
    try:
        parsed = reports_main.build_parser().parse_args(args)
    except reports_main.UsageError as err:
        raise ValueError(str(err)) from None
    if parsed.command not in reports_main.COMMANDS:
        raise ValueError(f"missing command; valid: {', '.join(reports_main.COMMANDS)}")


def parse_nox(args: list[str]) -> None:
    import nox.registry

    sessions = nox.registry.get()
    if not args or args[0] not in sessions:
        raise ValueError(f"no nox session {args[:1]}; valid: {', '.join(sorted(sessions))}")
    name, rest = args[0], args[1:]
    if rest and rest[0] != "--":
        raise ValueError(f"nox -s {name}: {rest[0]!r} before '--'")
    posargs = rest[1:]
    if name in ("bench", "profile"):  # forwarded to the sweep as noxfile.bench_args does
        with tempfile.TemporaryDirectory() as runs:  # a runs folder with a run to resume
            (Path(runs) / "latest").mkdir()
            sweep_args, _, _ = noxfile.bench_args(posargs, "20240101-120000", runs_dir=runs)
        parse_benches(["run", *sweep_args])


PARSERS = {"benches": parse_benches, "reports": parse_reports, "nox": parse_nox}


def check(program: str, args: list[str]) -> None:
    # --help prints and exits 0 through argparse: valid, but not worth printing here
    if "--help" in args or "-h" in args:
        args = [a for a in args if a not in ("--help", "-h")]
        if program == "benches" and args[:1] in (["run"], ["case"]):
            return
    PARSERS[program](args)


COMMANDS = all_commands()


def test_the_docs_have_commands():
    assert len(COMMANDS) >= 40, COMMANDS


@pytest.mark.parametrize("where, program, args", COMMANDS, ids=[f"{w} {p}" for w, p, _ in COMMANDS])
def test_every_command_parses(where, program, args):
    try:
        check(program, args)
    except ValueError as err:
        pytest.fail(f"{where}: {program} {shlex.join(args)}: {err}")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found, inside = set(), False
    for text in path.read_text().splitlines():
        if FENCE.match(text):
            inside = not inside
        elif not inside and text.startswith("#"):
            found.add(slug(text.lstrip("#")))
    return found


def links() -> list[tuple[str, Path, str]]:
    found = []
    for path in DOCS:
        inside = False
        for number, text in enumerate(path.read_text().splitlines(), 1):
            if FENCE.match(text):
                inside = not inside
                continue
            if inside:
                continue
            for target in LINK.findall(text):
                if re.match(r"[a-z]+:", target):  # https:, mailto:
                    continue
                found.append((f"{path.relative_to(ROOT)}:{number}", path, target))
    return found


LINKS = links()


def test_the_docs_have_links():
    assert len(LINKS) >= 30, LINKS


@pytest.mark.parametrize("where, path, target", LINKS, ids=[f"{w} {t}" for w, _, t in LINKS])
def test_every_relative_link_resolves(where, path, target):
    file, _, anchor = target.partition("#")
    resolved = (path.parent / file).resolve() if file else path
    assert resolved.exists(), f"{where}: {target}: no {resolved}"
    if anchor and resolved.suffix == ".md":
        assert anchor in anchors(resolved), f"{where}: {target}: no heading #{anchor}"


def documented_options() -> set[str]:
    """The options named in the first column of docs/sweep.md's table under '## Options'."""
    text = (ROOT / "docs" / "sweep.md").read_text()
    section = text.split("\n## Options\n", 1)[1].split("\n## ", 1)[0]
    found = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            found.update(re.findall(r"`(--[a-z][a-z0-9-]*)", line.split("|")[1]))
    return found


def parser_options() -> set[str]:
    parser = sweep_options.build_parser()
    run = parser._subparsers._group_actions[0].choices["run"]
    return {
        option
        for action in run._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    }


def test_the_sweep_options_table_matches_the_parser():
    documented, real = documented_options(), parser_options()
    assert documented - real == set(), "docs/sweep.md names options the parser lacks"
    assert real - documented == set(), "options of python -m benches run missing in docs/sweep.md"
