"""Cloud rates: ``estimator/data/cloud_rates.csv``, one dated row per public offer with its source.

Read with the stdlib ``csv`` module (no pandas on the report path); a bad row is a SpecError naming file and
line.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from estimator.specs import SpecError

RATES_PATH = Path(__file__).resolve().parent.parent / "data" / "cloud_rates.csv"


_RATE_COLUMNS = (
    "provider",
    "instance",
    "hardware_id",
    "n_devices",
    "usd_per_hour",
    "billing",
    "verified_date",
    "source_url",
    "source_note",
)


@dataclass(frozen=True)
class CloudRate:
    """One public cloud offer: ``n_devices`` x ``hardware_id`` for ``usd_per_hour`` (whole instance)."""

    provider: str
    instance: str
    hardware_id: str
    n_devices: int
    usd_per_hour: float
    billing: str
    verified_date: str
    source_url: str
    source_note: str = ""

    @property
    def usd_per_device_hour(self) -> float:
        return self.usd_per_hour / self.n_devices


def load_cloud_rates(path: str | Path | None = None) -> tuple[CloudRate, ...]:
    """Read the dated cloud-rate table; SpecError naming file and line on a bad row."""
    p = Path(path) if path is not None else RATES_PATH
    rates: list[CloudRate] = []
    with p.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in _RATE_COLUMNS if c not in (reader.fieldnames or ())]
        if missing:
            raise SpecError(f"{p}: missing column(s) {', '.join(missing)}")
        for lineno, row in enumerate(reader, start=2):
            try:
                n = int(row["n_devices"])
                usd = float(row["usd_per_hour"])
            except (TypeError, ValueError) as exc:
                raise SpecError(f"{p}:{lineno}: bad n_devices/usd_per_hour ({exc})") from None
            if n < 1 or usd <= 0 or not row["source_url"] or not row["verified_date"]:
                raise SpecError(
                    f"{p}:{lineno}: rate needs n_devices >= 1, usd_per_hour > 0, a source and a date"
                )
            rates.append(
                CloudRate(
                    row["provider"],
                    row["instance"],
                    row["hardware_id"],
                    n,
                    usd,
                    row["billing"],
                    row["verified_date"],
                    row["source_url"],
                    row.get("source_note") or "",
                )
            )
    return tuple(rates)
