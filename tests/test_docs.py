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
        sweep_args, _ = noxfile.smoke_split(sweep_args)  # nox's own flag, not the sweep's
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


# -- every README command runs in CI (docs/development.md's table, .ci/run) ----------------------
# what a user types: a fenced line starting otherwise is data (the JSON excerpt), not a command
PROGRAMS = ("python", "python3", "nox", "pip", "asv", "torchrun", "ray", "sbatch", "git", "bash")
CODE = re.compile(r"`([^`\n]+)`")


def readme_commands() -> set[tuple[str, ...]]:
    """Every command the README shows: each one in a fenced block, and each inline code span
    that starts with a program a user types (`nox -l`, `python -c ...`)."""
    readme = ROOT / "README.md"
    found = {
        tuple(tokens)
        for _, text in fenced_lines(readme)
        for tokens in commands(text)
        if tokens[0] in PROGRAMS
    }
    for span in CODE.findall(re.sub(r"^```.*?^```", "", readme.read_text(), flags=re.S | re.M)):
        if len(span.split()) > 1 and span.split()[0] in PROGRAMS:
            found.add(tuple(shlex.split(span)))
    return found


def ci_table() -> dict[tuple[str, ...], tuple[str, ...]]:
    """docs/development.md's table: README command -> the command `.ci/run` runs for it."""
    text = (ROOT / "docs" / "development.md").read_text()
    section = text.split("## Every README command runs in CI", 1)[1].split("\n## ", 1)[0]
    table = {}
    for line in section.splitlines():
        cells = line.split(" | ")
        if not line.startswith("| `") or len(cells) != 2:
            continue
        readme, ci = (CODE.search(cell).group(1) for cell in cells)
        table[tuple(shlex.split(readme))] = tuple(shlex.split(ci))
    return table


def ci_run_commands() -> list[tuple[str, ...]]:
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    return [tuple(cmd[0]) for line in lines if (cmd := commands(line))]


def shortens(readme: tuple[str, ...], ci: tuple[str, ...]) -> bool:
    """`ci` is `readme` with arguments added at its end: the same program (any path to it, such
    as nox's venv's python), then readme's arguments, then more."""
    n = len(readme)
    return len(ci) >= n and Path(ci[0]).name == readme[0] and ci[1:n] == readme[1:]


def test_every_readme_command_has_a_ci_row():
    table, shown = ci_table(), readme_commands()
    assert len(shown) >= 10, shown
    missing = [" ".join(c) for c in sorted(shown - set(table))]
    assert not missing, f"README commands CI does not run (docs/development.md's table): {missing}"
    stale = [" ".join(c) for c in sorted(set(table) - shown)]
    assert not stale, f"rows for commands the README no longer shows: {stale}"


def test_every_ci_row_is_the_readme_command_shortened_and_a_line_of_ci_run():
    ran = ci_run_commands()
    for readme, ci in ci_table().items():
        assert shortens(readme, ci), f"{' '.join(ci)!r} is not {' '.join(readme)!r} shortened"
        assert ci in ran, f"{' '.join(ci)!r} is not a command of .ci/run"


def test_a_command_with_its_arguments_dropped_is_not_a_shortening():
    assert shortens(("python", "-m", "benches", "run"), (".nox/b/bin/python", "-m", "benches",
                    "run", "--budget", "0"))  # fmt: skip
    assert not shortens(("nox", "-s", "bench", "--", "--quick"), ("nox", "-s", "bench"))
    assert not shortens(("nox", "-s", "asv"), ("nox", "-s", "bench", "asv"))
    assert not shortens(("python", "-m", "x"), ("python3", "-m", "x"))


def readme_strategies(text: str) -> list[str]:
    """The strategies the README's table names, in its order (the first cell of each row)."""
    section = text.split("## The strategies", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([^`]+)` \|", section, re.M)


def test_the_readme_strategies_table_names_every_built_in_strategy_in_order():
    import strategies

    names = readme_strategies((ROOT / "README.md").read_text())
    assert names == list(strategies.BUILTIN)
    assert sorted(names) == strategies.available()


def test_a_strategy_missing_from_the_readme_table_is_found():
    text = (ROOT / "README.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `lazy` |"))
    assert "lazy" not in readme_strategies(text.replace(row + "\n", ""))
