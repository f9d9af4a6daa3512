"""The local page's query parameters: defaults, parsing and range checks (one-line ParamError for anything
malformed); ids (model, hardware, quant, KV dtype) are checked by the estimator's request API, which names the
nearest valid ids."""

from __future__ import annotations

from dataclasses import dataclass

from estimator.engines import ENGINES
from estimator.render import i18n

DEFAULTS: dict[str, str] = {
    "model": "llama-3.1-8b",
    "hardware": "rtx-4090",
    "quant": "Q4_K_M",
    "ctx": "8192",
    "kv": "f16",
    "devices": "1",
    "concurrency": "1",
    "offload_gib": "0",
    "engine": "llama.cpp",
    "lang": "en",
    "isl": "1024",
    "osl": "1024",
    "slo_ttft_ms": "2000",
    "slo_tpot_ms": "100",
}


class ParamError(ValueError):
    """A query parameter that cannot be used; the message is one line meant for the person at the page."""


@dataclass(frozen=True)
class ReportParams:
    """Validated page / API parameters (the same options as ``python -m estimator report``)."""

    model: str
    hardware: str
    quant: str
    ctx: int
    kv: str
    devices: int
    concurrency: int
    offload_gib: float
    engine: str
    lang: str
    isl: int = 1024
    osl: int = 1024
    slo_ttft_ms: float = 2000.0
    slo_tpot_ms: float = 100.0

    def request(self):
        """The ``ReportRequest`` of these parameters (what ``python -m estimator report`` builds from the same
        options)."""
        from estimator.report.request import ReportRequest

        return ReportRequest(
            model=self.model,
            hardware=self.hardware,
            quant=self.quant,
            engine=self.engine,
            kv_dtype=self.kv,
            ctx=self.ctx,
            devices=self.devices,
            concurrency=self.concurrency,
            offload_gib=self.offload_gib,
            isl=self.isl,
            osl=self.osl,
            slo_ttft_ms=self.slo_ttft_ms,
            slo_tpot_ms=self.slo_tpot_ms,
        )

    def query(self) -> dict[str, str]:
        return {
            "model": self.model,
            "hardware": self.hardware,
            "quant": self.quant,
            "ctx": str(self.ctx),
            "kv": self.kv,
            "devices": str(self.devices),
            "concurrency": str(self.concurrency),
            "offload_gib": _num_text(self.offload_gib),
            "engine": self.engine,
            "lang": self.lang,
            "isl": str(self.isl),
            "osl": str(self.osl),
            "slo_ttft_ms": _num_text(self.slo_ttft_ms),
            "slo_tpot_ms": _num_text(self.slo_tpot_ms),
        }


def _num_text(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _int(name: str, raw: str, lo: int, hi: int) -> int:
    try:
        value = int(raw.strip().replace("_", ""))
    except ValueError:
        raise ParamError(f"parameter {name!r} must be an integer, got {raw!r}") from None
    if not lo <= value <= hi:
        raise ParamError(f"parameter {name!r} must be between {lo} and {hi}, got {value}")
    return value


def _float(name: str, raw: str, lo: float, hi: float) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        raise ParamError(f"parameter {name!r} must be a number, got {raw!r}") from None
    if not (lo <= value <= hi):  # also rejects nan
        raise ParamError(f"parameter {name!r} must be between {lo:g} and {hi:g}, got {raw!r}")
    return value


def _text(name: str, raw: str) -> str:
    value = raw.strip()
    if not value:
        raise ParamError(f"parameter {name!r} must not be empty")
    if len(value) > 300 or any(ord(c) < 32 for c in value):
        raise ParamError(f"parameter {name!r} is not a valid id")
    return value


def parse_params(query: dict[str, list[str]]) -> ReportParams:
    """Validate a parsed query string; missing parameters take DEFAULTS; unknown or repeated ones are errors.

    Only syntax and ranges are checked here: ids (model, hardware, quant, KV dtype) are checked by the
    estimator, which names the nearest valid ids.
    """
    unknown = sorted(set(query) - set(DEFAULTS))
    if unknown:
        raise ParamError(f"unknown parameter {unknown[0]!r}; known parameters: {', '.join(DEFAULTS)}")
    repeated = sorted(k for k, v in query.items() if len(v) > 1)
    if repeated:
        raise ParamError(f"parameter {repeated[0]!r} is given more than once")
    raw = {k: (query[k][0] if k in query else v) for k, v in DEFAULTS.items()}
    engine = raw["engine"].strip()
    if engine not in ENGINES:
        raise ParamError(f"parameter 'engine' must be one of {', '.join(ENGINES)}, got {engine!r}")
    lang = raw["lang"].strip()
    if lang not in i18n.LANGS:
        raise ParamError(f"parameter 'lang' must be one of {', '.join(i18n.LANGS)}, got {lang!r}")
    return ReportParams(
        model=_text("model", raw["model"]),
        hardware=_text("hardware", raw["hardware"]),
        quant=_text("quant", raw["quant"]),
        ctx=_int("ctx", raw["ctx"], 1, 16 * 1024 * 1024),
        kv=_text("kv", raw["kv"]),
        devices=_int("devices", raw["devices"], 1, 1024),
        concurrency=_int("concurrency", raw["concurrency"], 1, 65536),
        offload_gib=_float("offload_gib", raw["offload_gib"], 0.0, 1e6),
        engine=engine,
        lang=lang,
        isl=_int("isl", raw["isl"], 1, 16 * 1024 * 1024),
        osl=_int("osl", raw["osl"], 1, 16 * 1024 * 1024),
        slo_ttft_ms=_float("slo_ttft_ms", raw["slo_ttft_ms"], 1e-3, 1e9),
        slo_tpot_ms=_float("slo_tpot_ms", raw["slo_tpot_ms"], 1e-3, 1e9),
    )
