"""The local page's query parameters: defaults, parsing and range checks (one-line ParamError for anything
malformed; numbers use the same ranges as the CLI and ``predict``, ``estimator.validate.BOUNDS``); ids (model,
hardware, quant, KV dtype) are checked by the estimator's request API, which names the nearest valid ids."""

from __future__ import annotations

from dataclasses import dataclass

from estimator.engines import ENGINES
from estimator.render import i18n
from estimator.specs import SpecError
from estimator.validate import parse_number

DEFAULTS: dict[str, str] = {
    "model": "llama-3.1-8b",
    "hardware": "rtx-4090",
    "quant": "",  # empty: the engine's default for the model (as `report` without --quant)
    "ctx": "",  # empty: 8192, or the model's maximum when smaller (as `report` without --ctx)
    "kv": "f16",
    "devices": "1",
    "concurrency": "1",
    "offload_gib": "0",
    "engine": "llama.cpp",
    "lang": "en",
    # custom hardware (hardware=custom), or overrides of a catalog device's figures; empty = not given
    "memory_gib": "",
    "bandwidth_gbs": "",
    "tflops": "",
    "family": "",
    "cpu_cores": "",
    "cpu_clock_ghz": "",
    "isl": "1024",
    "osl": "1024",
    "slo_ttft_ms": "2000",
    "slo_tpot_ms": "100",
}
# the optional parameters: an empty value means "not given"
OPTIONAL = ("quant", "ctx", "memory_gib", "bandwidth_gbs", "tflops", "family", "cpu_cores", "cpu_clock_ghz")


class ParamError(ValueError):
    """A query parameter that cannot be used; the message is one line meant for the person at the page."""


@dataclass(frozen=True)
class ReportParams:
    """Validated page / API parameters (the same options as ``python -m estimator report``)."""

    model: str
    hardware: str
    quant: str | None  # None: the engine's default for the model (EngineProfile.default_quant_for)
    ctx: int | None
    kv: str
    devices: int
    concurrency: int
    offload_gib: float
    engine: str
    lang: str
    memory_gib: float | None = None
    bandwidth_gbs: float | None = None
    tflops: float | None = None
    family: str | None = None
    cpu_cores: int | None = None
    cpu_clock_ghz: float | None = None
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
            memory_gib=self.memory_gib,
            bandwidth_gbs=self.bandwidth_gbs,
            tflops=self.tflops,
            family=self.family,
            cpu_cores=self.cpu_cores,
            cpu_clock_ghz=self.cpu_clock_ghz,
            isl=self.isl,
            osl=self.osl,
            slo_ttft_ms=self.slo_ttft_ms,
            slo_tpot_ms=self.slo_tpot_ms,
        )

    def query(self) -> dict[str, str]:
        return {
            "model": self.model,
            "hardware": self.hardware,
            "quant": self.quant or "",
            "ctx": "" if self.ctx is None else str(self.ctx),
            "kv": self.kv,
            "devices": str(self.devices),
            "concurrency": str(self.concurrency),
            "offload_gib": _num_text(self.offload_gib),
            "engine": self.engine,
            "lang": self.lang,
            "memory_gib": _opt_text(self.memory_gib),
            "bandwidth_gbs": _opt_text(self.bandwidth_gbs),
            "tflops": _opt_text(self.tflops),
            "family": self.family or "",
            "cpu_cores": _opt_text(self.cpu_cores),
            "cpu_clock_ghz": _opt_text(self.cpu_clock_ghz),
            "isl": str(self.isl),
            "osl": str(self.osl),
            "slo_ttft_ms": _num_text(self.slo_ttft_ms),
            "slo_tpot_ms": _num_text(self.slo_tpot_ms),
        }


def _num_text(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _opt_text(x: float | None) -> str:
    return "" if x is None else _num_text(x)


def _number(name: str, raw: str, rule: str) -> int | float:
    """A number inside ``estimator.validate.BOUNDS[rule]`` (the CLI's and predict's range for the same
    quantity), or ParamError naming the parameter and the range."""
    try:
        return parse_number(raw, rule, f"parameter {name!r}")
    except SpecError as exc:
        raise ParamError(str(exc)) from None


def _opt_float(name: str, raw: str) -> float | None:
    """A hardware figure inside its ``estimator.validate.BOUNDS`` range, or None when the field is empty."""
    return float(_number(name, raw, name)) if raw else None


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
    given = {k: raw[k].strip() for k in OPTIONAL}
    return ReportParams(
        model=_text("model", raw["model"]),
        hardware=_text("hardware", raw["hardware"]),
        quant=_text("quant", given["quant"]) if given["quant"] else None,
        ctx=int(_number("ctx", given["ctx"], "ctx")) if given["ctx"] else None,
        kv=_text("kv", raw["kv"]),
        devices=int(_number("devices", raw["devices"], "devices")),
        concurrency=int(_number("concurrency", raw["concurrency"], "concurrency")),
        offload_gib=float(_number("offload_gib", raw["offload_gib"], "offload_gib")),
        engine=engine,
        lang=lang,
        memory_gib=_opt_float("memory_gib", given["memory_gib"]),
        bandwidth_gbs=_opt_float("bandwidth_gbs", given["bandwidth_gbs"]),
        tflops=_opt_float("tflops", given["tflops"]),
        family=_text("family", given["family"]) if given["family"] else None,
        cpu_cores=int(_number("cpu_cores", given["cpu_cores"], "cpu_cores")) if given["cpu_cores"] else None,
        cpu_clock_ghz=_opt_float("cpu_clock_ghz", given["cpu_clock_ghz"]),
        isl=int(_number("isl", raw["isl"], "isl")),
        osl=int(_number("osl", raw["osl"], "osl")),
        slo_ttft_ms=float(_number("slo_ttft_ms", raw["slo_ttft_ms"], "slo_ttft_ms")),
        slo_tpot_ms=float(_number("slo_tpot_ms", raw["slo_tpot_ms"], "slo_tpot_ms")),
    )
