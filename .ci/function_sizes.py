"""Function sizes of the project's code outside tests, as formatted at 88 columns.

The repository is formatted at 120 columns (pyproject.toml); a size measured there flatters long
lines, so the sources are first formatted at 88 (ruff format, into a temporary copy). A function's
size is the lines of its body, docstring excluded; a nested function counts in its own right and
in its parent. Prints the median, the 90th percentile, the count and every function over the
limit (``--limit``, 40 by default), and exits 0: a report. With ``--max N`` it is a check, as
``make lint`` runs it: it lists the functions over N and exits 1 when there is one.

    .venv/bin/python .ci/function_sizes.py [--limit 40] [--columns 88]
    .venv/bin/python .ci/function_sizes.py --max 40
"""

from __future__ import annotations

import argparse
import ast
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ["ckptweb", "dashboards", "workers", "pipelines", "bench", "manage.py"]
SKIPPED_PARTS = {"migrations", "tests", "__pycache__"}


def body_lines(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the first statement after the docstring to the function's last line."""
    body = function.body
    if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return function.end_lineno - body[0].lineno + 1


def iter_sizes(root: Path):
    """Yield (path:line name, body lines) for every function under ``root``."""
    for path in sorted(root.rglob("*.py")):
        if SKIPPED_PARTS & set(path.relative_to(root).parts):
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                yield f"{path.relative_to(root)}:{node.lineno} {node.name}", body_lines(node)


def formatted_copy(columns: int, into: Path) -> Path:
    """Copy the sources into ``into`` and format them at ``columns``; return the copy's root."""
    for source in SOURCES:
        target = into / source
        if (ROOT / source).is_dir():
            shutil.copytree(ROOT / source, target, ignore=shutil.ignore_patterns(*SKIPPED_PARTS))
        else:
            shutil.copy(ROOT / source, target)
    ruff = Path(sys.executable).parent / "ruff"
    subprocess.run([str(ruff), "format", "--quiet", "--isolated", f"--line-length={columns}", str(into)], check=True)
    return into


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=40, help="list the functions over this many body lines")
    parser.add_argument(
        "--max", type=int, default=None, help="fail (exit 1) when a function has more body lines than this"
    )
    parser.add_argument("--columns", type=int, default=88, help="line length to format at before counting")
    args = parser.parse_args()
    limit = args.limit if args.max is None else args.max
    with tempfile.TemporaryDirectory() as scratch:
        sizes = dict(iter_sizes(formatted_copy(args.columns, Path(scratch))))
    values = sorted(sizes.values())
    p90 = statistics.quantiles(values, n=10)[-1]
    print(f"{len(values)} functions at {args.columns} columns: median {statistics.median(values):g}, p90 {p90:g}")
    over = sorted(((lines, name) for name, lines in sizes.items() if lines > limit), reverse=True)
    for lines, name in over:
        print(f"  {lines:3d} lines  {name}")
    print(f"{len(over)} over {limit} lines")
    if args.max is not None and over:
        print(f"function_sizes: {len(over)} function(s) over --max {args.max} lines; split them", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
