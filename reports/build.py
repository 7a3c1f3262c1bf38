"""``python -m reports build DIR``: DIR/index.html, one self-contained file."""

from __future__ import annotations

import json
from pathlib import Path

import jinja2

from reports import targets
from reports.rows import RESULTS, pooled, read
from reports.summary import case_rows

TEMPLATE = Path(__file__).with_name("templates") / "report.html.j2"


def _ms(seconds) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3f}"


def build(directory: str | Path) -> Path:
    directory = Path(directory)
    rows = read(directory)
    run_file = directory / "run.json"
    run = json.loads(run_file.read_text()) if run_file.exists() else {}
    first_ok = next((r for r in rows if r.get("status") == "ok"), rows[0] if rows else {})
    env = {**run.get("env", {}), **first_ok.get("env", {})}
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATE.parent),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    environment.filters["ms"] = _ms
    html = environment.get_template(TEMPLATE.name).render(
        title=f"zerograd sweep {run.get('run_id', directory.name)}",
        run=run,
        env=env,
        first=first_ok,
        cases=case_rows(directory),
        targets=targets.evaluate(pooled(rows)),
        failed=[r for r in rows if r.get("status") != "ok"],
        results=RESULTS,
        env_json=json.dumps(env, indent=1, default=str),
    )
    out = directory / "index.html"
    out.write_text(html, encoding="utf-8")
    return out
