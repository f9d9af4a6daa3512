"""Child entry point: measure one point in this process and write the Measurement as JSON.

    python -m runners measure --engine llama.cpp --spec SPEC.json --out OUT.json
    python -m runners check --engine vllm

``measure`` reads a PointSpec (JSON object of its fields), runs the engine's runner and writes the Measurement
atomically (temp file + rename).  Exit codes: 0 measured; 1 the engine failed while measuring (one line
``error: ...`` on stderr, the traceback before it for the log); 2 bad input (one line, no traceback);
3 engine not available here (one line with the install hint).
``check`` prints "<engine>: available" or "<engine>: not available: <hint>" and exits 0 / 1.
Runs without any fitbench package but ``runners`` (the vLLM venv puts the repo root on PYTHONPATH).
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback

from runners.base import REGISTRY, get_runner
from runners.jsonio import measurement_to_dict, pointspec_from_dict, write_json_atomic

EXIT_FAILED, EXIT_BAD_INPUT, EXIT_UNAVAILABLE = 1, 2, 3


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2 (argparse's default prints usage + message)
        print(f"error: {message}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m runners", description="Measure one point with one engine (child process).")
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure", help="measure one PointSpec and write the Measurement JSON")
    m.add_argument("--engine", required=True, choices=sorted(REGISTRY))
    m.add_argument("--spec", required=True, help="PointSpec JSON file")
    m.add_argument("--out", required=True, help="Measurement JSON file (written atomically)")
    c = sub.add_parser("check", help="is the engine importable here?")
    c.add_argument("--engine", required=True, choices=sorted(REGISTRY))
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    runner = get_runner(args.engine)
    if args.cmd == "check":
        if runner.available():
            print(f"{args.engine}: available")
            return 0
        print(f"{args.engine}: not available: {runner.install_hint()}")
        return 1
    try:
        with open(args.spec) as fh:
            spec = pointspec_from_dict(json.load(fh))
    except (OSError, ValueError, TypeError) as exc:
        print(f"error: bad spec {args.spec}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not runner.available():
        print(f"error: {args.engine} not available: {runner.install_hint()}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    try:
        measurement = runner.measure(spec)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as exc:  # the engine failed: keep the traceback for the log, then one summary line
        traceback.print_exc()
        print(f"error: {args.engine} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    write_json_atomic(measurement_to_dict(measurement), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
