"""``python -m calibration fit|check|report [--results DIR]``.

fit     refit from every record under DIR/runs and write DIR/coefficients.json (atomically)
check   the CI gate (calibration.check): held-out errors vs thresholds, stale coefficients -> exit 1
report  Markdown + PNG plots into DIR/calibration/ (calibration.report)
Bad input (missing folder, unknown quality flag, unreadable coefficients file): exit 2 with one line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path


def _write_json_atomic(path: Path, doc: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1, sort_keys=False)
            fh.write("\n")
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; the committed file must be readable like the records
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error message (no usage block) and exit status 2."""

    def error(self, message: str) -> None:
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(2)


def _parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="python -m calibration", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    for name, hlp in (("fit", "refit coefficients"), ("check", "CI gate"), ("report", "Markdown + plots")):
        p = sub.add_parser(name, help=hlp)
        p.add_argument("--results", default="results", help="results folder (holds runs/; default: results)")
        if name == "fit":
            p.add_argument(
                "--quality",
                action="append",
                default=None,
                help="quality flag to include (repeatable; default: ok only)",
            )
            p.add_argument("--out", default=None, help="output file (default: RESULTS/coefficients.json)")
        if name == "check":
            p.add_argument("--coefficients", default=None, help="default: RESULTS/coefficients.json")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _run(args)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _run(args) -> int:
    from rich.console import Console

    from calibration import check, pipeline
    from calibration.dataset import DEFAULT_QUALITIES, load_dataset

    console = Console() if sys.stdout.isatty() else Console(width=140)
    results = Path(args.results)
    if not results.is_dir():
        raise FileNotFoundError(f"results folder {results} does not exist")
    if not (results / "runs").is_dir():
        raise FileNotFoundError(f"{results} is not a results folder: it has no runs/ folder of records")
    if args.cmd == "check":
        res = check.run_check(results, args.coefficients)
        check.render(res, console)
        return 0 if res.ok else 1
    if args.cmd == "fit":
        qualities = tuple(args.quality) if args.quality else DEFAULT_QUALITIES
        ds = load_dataset(results, qualities)
        with console.status("fitting and cross-validating"):
            cal = pipeline.calibrate(ds)
        doc = pipeline.coefficients_document(cal)
        out = Path(args.out) if args.out else results / "coefficients.json"
        _write_json_atomic(out, doc)
        console.print(
            f"wrote {out}: {len(doc['groups'])} group(s), {len(doc['pooled'])} pooled set(s), "
            f"{len(doc['uncalibrated'])} uncalibrated, {len(ds.records)} records used, "
            f"{len(cal.rejected)} left out"
        )
        for why, n in sorted(ds.excluded_kind.items()):
            console.print(f"  left out {n} record(s): {why}", markup=False)
        for rej in cal.rejected[:20]:
            console.print(f"  left out: {rej}", markup=False)
        if len(cal.rejected) > 20:
            console.print(f"  ... and {len(cal.rejected) - 20} more (see the calibration report)")
        return 0
    from calibration import report

    ds = load_dataset(results)
    with console.status("fitting and cross-validating"):
        cal = pipeline.calibrate(ds)
    path = report.write_report(cal, results / "calibration")
    console.print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
