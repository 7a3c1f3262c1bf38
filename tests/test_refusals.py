"""The surfaces added since issue 38 guard their input as the old ones do (issue 52): a refused
command writes nothing, the samples script never deletes a document, every bad value is one
line with exit 2. Each test plants a refusal and compares what was there before and after."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benches.sweep import cli
from reports.__main__ import main as reports_main
from tests.conftest import ROOT
from tests.synthetic import make_row, standard_rows, write_run
from tests.test_guards import one_line, snapshot

sys.path.insert(0, str(ROOT / "scripts"))
import sample_docs
import samples


def tree(directory: Path) -> dict[str, bytes | None]:
    """Every file and folder under ``directory`` (its path relative to it) and a file's bytes: a
    refusal must leave it byte for byte, with no folder more."""
    return {
        str(p.relative_to(directory)): p.read_bytes() if p.is_file() else None
        for p in sorted(directory.rglob("*"))
    }


# -- --frameworks by --strategies' rules -----------------------------------------------------------
@pytest.mark.parametrize(
    "listed, named",
    [
        ("", "--frameworks '' is empty"),
        (",", "--frameworks ',' has an empty item"),
        ("accelerate,,fabric", "--frameworks 'accelerate,,fabric' has an empty item"),
        ("accelerate, ", "has an empty item; valid: PATH[,PATH...] from accelerate"),
        (
            "accelerate:sync_each_batch=true:sync_each_batch=false",
            "option 'sync_each_batch' is given twice",
        ),
        ("deepspeed:zero=7", "deepspeed:zero=7 is not one of 0, 1, 2"),
        ("nope", "unknown framework; valid: accelerate"),
    ],
)
def test_frameworks_are_parsed_as_strategies_are(listed, named, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["run", "--frameworks", listed, "--strategies", "native", "--out", str(out)]
    assert cli.main(argv) == 2
    line = one_line(capsys.readouterr().err)
    assert named in line, line
    assert not out.exists()


def test_a_repeated_strategy_option_is_refused_too(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["run", "--strategies", "native:set_to_none=true:set_to_none=false"]
    assert cli.main([*argv, "--out", str(out)]) == 2
    assert "option 'set_to_none' is given twice" in one_line(capsys.readouterr().err)
    assert not out.exists()


def test_a_frameworks_option_value_is_checked_before_its_import(monkeypatch, tmp_path, capsys):
    """The valid values do not depend on the package: an uninstalled framework's bad value
    names them, not "not installed"."""
    from benches.engine import frameworks

    monkeypatch.setattr(frameworks, "installed", lambda name: False)
    out = tmp_path / "out"
    argv = ["run", "--frameworks", "deepspeed:zero=7", "--strategies", "native"]
    assert cli.main([*argv, "--out", str(out)]) == 2
    line = one_line(capsys.readouterr().err)
    assert "is not one of 0, 1, 2" in line and "not installed" not in line, line


# -- files held to their version -------------------------------------------------------------------
@pytest.fixture(scope="module")
def judged(tmp_path_factory) -> Path:
    run = write_run(tmp_path_factory.mktemp("run") / "run", standard_rows(ks=(1,), ns=(0,)))
    assert reports_main(["build", str(run)]) == 0
    return run


@pytest.mark.parametrize("version", [99, "1", 0, None, 1.0])
def test_the_gate_refuses_a_verdicts_json_of_another_version(version, judged, tmp_path, capsys):
    data = json.loads((judged / "verdicts.json").read_text())
    data["schema_version"] = version
    path = tmp_path / "verdicts.json"
    path.write_text(json.dumps(data))
    assert reports_main(["gate", str(path)]) == 2
    line = one_line(capsys.readouterr().err)
    assert f"has schema_version {json.dumps(version)}; this version reads 1" in line, line


def test_a_row_whose_version_is_text_names_it_as_written(tmp_path, capsys):
    row = make_row("native")
    row["schema_version"] = "2"
    run = write_run(tmp_path / "run", [row])
    assert reports_main(["build", str(run)]) == 2
    line = one_line(capsys.readouterr().err)
    assert 'rows of schema_version "2" cannot be read (this version reads 2' in line, line


# -- the workload's check calls the whole protocol on one window -----------------------------------
BROKEN = {
    "zero": "return 0",
    "text": "return 'tokens'",
    "raises": "raise RuntimeError('no tokens here')",
}


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_a_workload_whose_normaliser_breaks_the_protocol_is_one_line(
    kind, tmp_path, capsys, monkeypatch
):
    module = f"broken_normaliser_{kind}"
    (tmp_path / f"{module}.py").write_text(
        "from benches.workloads import transformer\n\n"
        "class Broken:\n"
        "    def __init__(self, made):\n"
        "        self.made = made\n"
        "        self.model = made.model\n"
        "    def batches(self, window):\n"
        "        return self.made.batches(window)\n"
        "    def normaliser(self, batches):\n"
        f"        {BROKEN[kind]}\n"
        "    def loss(self, batch, tokens, module):\n"
        "        return self.made.loss(batch, tokens, module)\n\n"
        "def workload(settings):\n"
        "    return Broken(transformer.workload(settings))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "out"
    argv = ["run", "--workload", f"{module}:workload", "--preset", "tiny", "--out", str(out)]
    assert cli.main(argv) == 2
    line = one_line(capsys.readouterr().err)
    assert f"--workload '{module}:workload'" in line and "normaliser" in line, line
    assert not out.exists()


# -- a refused --base sweep writes nothing ---------------------------------------------------------
def test_a_refused_base_sweep_leaves_out_as_it_was(tmp_path, capsys):
    """No swept strategy at the base (a plugin's strategy the base lacks): refused, and neither
    a new --out nor an existing run resumed gets the base build's package."""
    out = tmp_path / "new"
    argv = ["run", "--plugin", "tests.aa_plugin", "--strategies", "native_twin", "--base"]
    assert cli.main([*argv, "HEAD", "--out", str(out)]) == 2
    assert "none of the sweep's strategies is at" in one_line(capsys.readouterr().err)
    assert not out.exists()
    existing = write_run(tmp_path / "old", [make_row("native")])
    before = tree(existing)
    argv += ["--budget", "0", "--accumulate", "1", "--live-tensors", "0"]
    assert cli.main([*argv, "HEAD", "--out", str(existing), "--resume"]) == 2
    one_line(capsys.readouterr().err)
    assert tree(existing) == before


def test_a_resume_refused_after_the_base_build_was_written_removes_it(tmp_path, capsys):
    """--resume with other settings than the run's: the check comes after --base wrote its
    build into --out, and the build goes again."""
    existing = write_run(tmp_path / "old", [make_row("native")])
    before = tree(existing)
    argv = ["run", "--strategies", "native", "--base", "HEAD", "--min-effect", "0.05"]
    argv += ["--resume", "--budget", "0", "--accumulate", "1", "--live-tensors", "0"]
    assert cli.main([*argv, "--out", str(existing)]) == 2
    assert "--resume: --min-effect 0.05 differs" in one_line(capsys.readouterr().err)
    assert tree(existing) == before


# -- scripts/samples.py as a tool ------------------------------------------------------------------
def samples_cli(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "samples.py"), *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
    )


@pytest.mark.parametrize(
    "argv, named",
    [
        (["measure", "--flags", "--preset 'tiny"], '--flags "--preset \'tiny" cannot be split'),
        (["measure", "nope"], "unknown sample 'nope'"),
        (["docs", "--chek"], "unrecognized arguments: --chek"),
        ([], "the following arguments are required: command"),
        (["measure", "--flags", "--preset tiny", "a", "b"], "name one sample, not 2"),
    ],
)
def test_samples_usage_errors_are_one_line_and_exit_2(argv, named):
    done = samples_cli(*argv)
    assert done.returncode == 2, done
    assert named in one_line(done.stderr), done.stderr


@pytest.fixture
def documents(tmp_path, monkeypatch) -> Path:
    """The documents and the samples in a folder of their own, read by the script instead."""
    for document in sample_docs.DOCUMENTS:
        (tmp_path / document).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / document, tmp_path / document)
    shutil.copytree(samples.SAMPLES, tmp_path / "samples", ignore=shutil.ignore_patterns("*.html"))
    monkeypatch.setattr(sample_docs, "ROOT", tmp_path)
    monkeypatch.setattr(sample_docs, "SAMPLES", tmp_path / "samples")
    return tmp_path


@pytest.mark.parametrize(
    "cut, named",
    [
        ("end", "README.md: block 'quick-sentence' has no end marker '<!-- /samples -->'"),
        ("start", "README.md:{line}: an end marker '<!-- /samples -->' with no block started"),
    ],
)
def test_a_document_whose_markers_do_not_pair_is_refused_and_never_rewritten(cut, named, documents):
    readme = documents / "README.md"
    text = readme.read_text()
    marker = "<!-- samples: quick-sentence -->\n"
    start = text.index(marker)
    end = text.index("<!-- /samples -->", start)
    if cut == "end":
        text = text[:end] + text[end + len("<!-- /samples -->") :]
    else:
        text = text[:start] + text[start + len(marker) :]
        named = named.format(line=text.count("\n", 0, text.index("<!-- /samples -->", start)) + 1)
    readme.write_text(text)
    before = {d: (documents / d).read_bytes() for d in sample_docs.DOCUMENTS}
    for write in (True, False):
        with pytest.raises(sample_docs.UsageError, match="nothing was rewritten") as refused:
            sample_docs.stale_blocks(write=write)
        assert named in str(refused.value), str(refused.value)
    assert {d: (documents / d).read_bytes() for d in sample_docs.DOCUMENTS} == before


@pytest.mark.parametrize(
    "name, content, named",
    [
        ("verdicts.json", '{"comparisons": [', "quick-cpu/verdicts.json: not JSON"),
        ("run.json", "{corrupt", "quick-cpu/run.json: not JSON"),
        ("sample.json", None, "quick-cpu/sample.json: No such file"),
    ],
)
def test_a_sample_that_cannot_be_read_is_named_by_its_path(name, content, named, documents):
    path = documents / "samples" / "quick-cpu" / name
    if content is None:
        path.unlink()
    else:
        path.write_text(content)
    before = {d: (documents / d).read_bytes() for d in sample_docs.DOCUMENTS}
    with pytest.raises(sample_docs.UsageError, match="cannot read") as refused:
        sample_docs.readable(lambda: sample_docs.stale_blocks(write=True))
    assert named in str(refused.value), str(refused.value)
    assert {d: (documents / d).read_bytes() for d in sample_docs.DOCUMENTS} == before


def test_a_sweep_the_sweep_refuses_passes_its_own_line_through(tmp_path):
    """A sample measured with a flag the sweep refuses: the sweep's line, then one line of the
    script's, its exit code (2), no traceback, the committed samples unchanged."""
    before = snapshot(samples.SAMPLES)
    done = samples_cli("measure", "quick-cpu", "--flags", "--preset nope", "--into", str(tmp_path))
    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert "unknown preset 'nope'" in lines[0] and "its sweep exited 2" in lines[-1], lines
    assert snapshot(samples.SAMPLES) == before
    assert not any(tmp_path.iterdir())
