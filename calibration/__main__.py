"""``python -m calibration fit|check|report [--results DIR]``.

fit     refit from every record under DIR/runs and write DIR/coefficients.json (atomically); with --report
        also the calibration report of the same fit (one cross-validation instead of two).  Prints how many
        records were left out with their causes grouped (calibration.leftout; --verbose: every one) and
        ends with the gate table of ``check`` from the same cross-validation (the exit status stays 0: the
        gate's verdict is ``check``'s)
check   the CI gate (calibration.check): held-out errors vs thresholds, stale coefficients -> exit 1
report  Markdown + PNG plots into DIR/calibration/ (calibration.report)
Bad input (missing folder, unknown quality flag, unreadable coefficients file, no usable record for fit or
check, an output that is a device / FIFO / folder, a full disk): exit 2 with one line; nothing is replaced.
Ctrl-C or SIGTERM: exit 130.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness.safe_files import atomic_write_text, write_target


def _write_json_atomic(path: Path, doc: dict) -> Path:
    """coefficients.json through harness.safe_files.atomic_write (temp + fsync + rename; a symlink is written
    through; a device, FIFO or folder at ``path`` is refused: FileRefused, a ValueError)."""
    return atomic_write_text(path, json.dumps(doc, indent=1, sort_keys=False) + "\n")


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
            p.add_argument(
                "--report", action="store_true", help="also write RESULTS/calibration/ (Markdown + plots)"
            )
            p.add_argument(
                "--verbose", action="store_true", help="every record left out (default: grouped by cause)"
            )
        if name == "check":
            p.add_argument("--coefficients", default=None, help="default: RESULTS/coefficients.json")
    return ap


def main(argv: list[str] | None = None) -> int:
    from estimator.app.interrupt import EXIT_INTERRUPTED, interrupts_unwind  # Ctrl-C, SIGTERM: exit 130

    args = _parser().parse_args(argv)
    try:
        with interrupts_unwind():
            return _run(args)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}", file=sys.stderr)
        return 2
    except OSError as exc:  # a full disk, a read-only folder: nothing was replaced
        where = f" {exc.filename}" if exc.filename else ""
        print(f"error: cannot write{where}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _no_records(results: Path, n_left_out: int, what: str) -> ValueError:
    return ValueError(
        f"no usable records under {results / 'runs'} ({n_left_out} left out): {what} "
        "(measure or import records first; `python -m calibration report` lists what was left out)"
    )


def _run(args) -> int:
    from rich.console import Console

    from calibration import check, leftout, pipeline
    from calibration.dataset import DEFAULT_QUALITIES, load_dataset

    console = Console() if sys.stdout.isatty() else Console(width=140)
    results = Path(args.results)
    if not results.is_dir():
        raise FileNotFoundError(f"results folder {results} does not exist")
    if not (results / "runs").is_dir():
        raise FileNotFoundError(f"{results} is not a results folder: it has no runs/ folder of records")
    if args.cmd == "check":
        res = check.run_check(results, args.coefficients)
        if res.n_records == 0:
            raise _no_records(results, res.n_rejected, "nothing to check")
        check.render(res, console)
        return 0 if res.ok else 1
    if args.cmd == "fit":
        qualities = tuple(args.quality) if args.quality else DEFAULT_QUALITIES
        out = Path(args.out) if args.out else results / "coefficients.json"
        write_target(out)  # a device / FIFO / folder there is refused before minutes of fitting
        ds = load_dataset(results, qualities)
        if not ds.records:
            raise _no_records(results, len(ds.rejected), f"nothing to fit, {out} left as it was")
        with console.status("fitting and cross-validating"):
            cal = pipeline.calibrate(ds)
        doc = pipeline.coefficients_document(cal)
        _write_json_atomic(out, doc)
        model = doc["model"]
        console.print(
            f"wrote {out}: {len(model['params'])} parameter(s) over {len(model.get('families', {}))} "
            f"famil(ies) and {len(model.get('devices', {}))} device(s), {len(doc['uncalibrated'])} "
            f"uncalibrated, {len(ds.records)} records used, {len(cal.rejected)} left out"
        )
        srv = doc["serving"]
        if srv["n_points"]:
            gate = srv["cv"].get("gate", {})
            meds = [(m.upper(), gate.get(f"all/{m}", {}).get("median_ape")) for m in ("tpot", "ttft")]
            med = ", ".join(f"{m} {v:.1%}" for m, v in meds if v is not None)
            console.print(
                f"  serving: {sum(srv['n_points'].values())} TTFT / TPOT points"
                + (f", held-out median (gate) {med}" if med else "")
                + f"; {srv['n_left_out']} serving record(s) left out (see the calibration report)",
                markup=False,
            )
        for m, e in (model.get("maturity") or {}).items():
            how = "the shipped default: too few backends"
            if e["source"] == "lobo":
                how = f"{len(e['backends'])} backends held out, {e['n_residuals']} points"
            line = f"  interval widening of a new {m} backend: {e['log_lo']:+.3f} ln ({how})"
            console.print(line, markup=False)
        for why, n in sorted(ds.excluded_kind.items()):
            console.print(f"  not in the speed fit: {n} record(s), {why}", markup=False)
        listed = "`python -m calibration report` lists each with its file:line"
        if args.report:
            from calibration import report

            path = report.write_report(cal, results / "calibration", doc)
            console.print(f"wrote {path}")
            listed = f"each with its file:line in {path}"
        leftout.render(cal.rejected, console, listed, args.verbose)
        with console.status("the gate: held-out errors of this fit"):
            gate = check.run_check(results, out, cal=cal)  # the fit's own cross-validation, not a second one
        check.render(gate, console)
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
