"""Spanish renderings of what the sections write in English: the terminal / Markdown blocks of ``report --lang
es`` and the strings the HTML shows from the report's data (weight-format descriptions, basis lines, state
labels, the request's notes and the common warnings).

The sections build their blocks in English (``Unit.text``); ``translate_block`` turns one block into Spanish
after the fact, so every section -- a new one included -- renders in Spanish without knowing about languages:

* ``EXACT``: whole strings (titles, column headers, row labels, fixed lines and cells);
* ``PATTERNS``: templated lines (``re.fullmatch``; the replacement may call ``tr`` on a captured part);
  ``note: `` / ``warning: `` prefixes are translated and the rest is translated on its own;
* numbers in Spanish form (1.234,56) where they carry a unit (GiB, GB, tok/s, ms, %, W, tokens, ...), follow a
  ``$`` or fill a numeric table cell; ids and versions ("llama-3.1-8b", "Llama 3.1") are left alone.

A string with no entry stays English (free-form catalog notes, engine launch notes, sources): what is shown
is always the report's own text, never a guess.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from estimator.render.blocks import Block, Table

# --- weight formats ----------------------------------------------------------------------------------------
QUANTS_ES: dict[str, str] = {
    "F32": "float de 32 bits en todo",
    "F16": "float de 16 bits",
    "BF16": "bfloat16 (el dtype nativo del checkpoint de la mayoría de modelos)",
    "FP8": "capas lineales FP8 E4M3; embeddings, cabeza y normas en bf16 (vLLM / HF fp8)",
    "Q8_0": "ggml de 8 bits, bloques de 32 elementos (8,5 bits/peso)",
    "Q6_K": "k-quant ggml de 6 bits (6,5625 bits/peso)",
    "Q5_K_M": "k-quant de 5 bits; attn_v / ffn_down en q6_K en las capas use_more_bits",
    "Q5_K_S": "k-quant de 5 bits, sin promociones salvo la cabeza",
    "Q4_K_M": "k-quant de 4 bits; attn_v / ffn_down en q6_K en las capas use_more_bits",
    "Q4_K_S": "k-quant de 4 bits; primeras capas attn_v y ffn_down en q5_K",
    "Q4_0": "ggml clásico de 4 bits, bloques de 32 elementos (4,5 bits/peso)",
    "IQ4_XS": "i-quant de 4,25 bits; attn_v en q5_K (GQA >= 4), primer ffn_down en q5_K",
    "Q3_K_M": "k-quant de 3 bits; attn_v q5_K/q4_K, attn_output q4_K, ffn_down q4_K/q5_K",
    "Q2_K": "k-quant de 2 bits; attn_v q4_K/q3_K, attn_output y ffn_down q3_K",
    "MXFP4": "MXFP4_MOE de llama.cpp: expertos en MXFP4 (4,25 bits), el resto de matrices en q8_0",
    "AWQ-INT4": "AWQ de 4 bits, grupo 128, escalas fp16 + ceros de 4 bits; embeddings/cabeza fp16",
    "GPTQ-INT4": "GPTQ de 4 bits, grupo 128, escalas fp16 + ceros de 4 bits; embeddings/cabeza fp16",
    "NVFP4": "NVFP4 (ModelOpt): matrices FFN/expertos E2M1 + escala E4M3 cada 16 (4,5 bits); atención, "
    "embeddings, cabeza y router en bf16 (exclude_modules de los checkpoints NVFP4 de NVIDIA)",
    "FP8-BLOCK": "capas lineales FP8 E4M3, escala FP32 por bloque de 128x128 (checkpoints FP8 de "
    "DeepSeek/Qwen3/MiniMax); embeddings, cabeza y router en bf16",
    "W4A16-G128": "W4A16 de compressed-tensors: INT4 simétrico, escala bf16 cada 128 entradas (4,125 bits); "
    "embeddings, cabeza y router en bf16",
    "W4A16-G32": "W4A16 de compressed-tensors: INT4 simétrico, escala bf16 cada 32 entradas (4,5 bits); "
    "embeddings, cabeza y router en bf16",
}
_FILE_QUANT = re.compile(r"the file's own tensor types, exact bytes \((?P<f>.*)\)")


def translate_quant(name: str, description: str, lang: str) -> str:
    """A weight format's description in ``lang`` (English when there is no entry)."""
    if lang != "es":
        return description
    if name in QUANTS_ES:
        return QUANTS_ES[name]
    m = _FILE_QUANT.fullmatch(description)
    return f"los tipos de tensor del propio archivo, bytes exactos ({m['f']})" if m else description


# --- whole strings -----------------------------------------------------------------------------------------
EXACT: dict[str, str] = {
    # memory options of the summary (estimator.report.sections.summary.option_words)
    "flash attention off": "atención flash desactivada",
    "full-size sliding-window cache (--swa-full)": "caché de ventana deslizante completa (--swa-full)",
    "one KV stream per sequence (no --kv-unified)": "un flujo KV por secuencia (sin --kv-unified)",
    # section titles
    "Model": "Modelo",
    "Cost": "Costo",
    "Launch commands": "Comandos de lanzamiento",
    "Speed (estimated)": "Velocidad (estimada)",
    "Warnings and provenance": "Advertencias y procedencia",
    "Recommended hardware (catalog)": "Hardware recomendado (catálogo)",
    "Fine-tuning memory (estimated from formulas)": "Memoria para fine-tuning (estimada con fórmulas)",
    # column headers
    "GiB": "GiB",
    "GB": "GB",
    "KV GiB": "KV GiB",
    "KV dtype": "tipo KV",
    "aggregate tok/s (est.)": "tok/s agregados (est.)",
    "cheapest fit": "opción más barata",
    "coefficients": "coeficientes",
    "component": "componente",
    "configuration": "configuración",
    "context": "contexto",
    "decode tok/s (est.)": "decode tok/s (est.)",
    "device": "dispositivo",
    "devices": "dispositivos",
    "engines": "motores",
    "estimate (interval)": "estimación (intervalo)",
    "fact": "dato",
    "fits": "cabe",
    "headroom GiB": "margen GiB",
    "item": "concepto",
    "memory GiB": "memoria GiB",
    "metric": "métrica",
    "needs GiB": "necesita GiB",
    "overhead GiB": "sobrecarga GiB",
    "per device GiB": "por dispositivo GiB",
    "per device": "por dispositivo",
    "pick": "elección",
    "price": "precio",
    "quant": "cuantización",
    "runtime GiB": "motor GiB",
    "saves GiB": "ahorra GiB",
    "total GB": "total GB",
    "total GiB": "total GiB",
    "usable GiB": "utilizable GiB",
    "used": "usado",
    "value": "valor",
    "weights GiB": "pesos GiB",
    "activations GiB": "activaciones GiB",
    "adapters GiB": "adaptadores GiB",
    "gradients GiB": "gradientes GiB",
    "optimizer GiB": "optimizador GiB",
    "trainable params": "parámetros entrenables",
    "fits the selected devices": "cabe en los dispositivos elegidos",
    "cheapest catalog fit": "opción más barata del catálogo",
    # row labels
    "Weights": "Pesos",
    "KV cache and state": "Caché KV y estado",
    "Engine runtime / compute buffers": "Motor / buffers de cómputo",
    "Device context overhead": "Sobrecarga del contexto del dispositivo",
    "Total on device(s)": "Total en el/los dispositivo(s)",
    "Physical device memory": "Memoria física del dispositivo",
    "Usable device memory": "Memoria utilizable del dispositivo",
    "Headroom": "Margen",
    "Host RAM (offloaded weights, host buffers)": "RAM del host (pesos descargados, buffers del host)",
    "USD per 1M output tokens at the aggregate throughput": "USD por 1M de tokens de salida al rendimiento "
    "agregado",
    "USD per 1M output tokens, one stream": "USD por 1M de tokens de salida, un flujo",
    "purchase price": "precio de compra",
    "power (device TDP)": "potencia (TDP del dispositivo)",
    "active hours": "horas activas",
    "electricity": "electricidad",
    "renting the same hours": "alquilar las mismas horas",
    "buy-vs-rent break-even": "amortización comprar vs. alquilar",
    "decode, one stream, empty context (tg128)": "decode, un flujo, contexto vacío (tg128)",
    "prefill (pp512)": "prefill (pp512)",
    "per sequence at that concurrency": "por secuencia con esa concurrencia",
    "best single device": "mejor dispositivo individual",
    "best value": "mejor calidad-precio",
    "most memory per dollar": "más memoria por dólar",
    "multi-device": "multi-dispositivo",
    "cheapest cloud": "nube más barata",
    "parameters": "parámetros",
    "architecture": "arquitectura",
    "attention": "atención",
    "layers": "capas",
    "widths": "anchos",
    "feed-forward": "feed-forward",
    "max context": "contexto máximo",
    "native dtype": "dtype nativo",
    "GGUF file type": "tipo de archivo GGUF",
    "license": "licencia",
    "source": "fuente",
    "id": "id",
    # cells and fixed lines
    "yes": "sí",
    "no": "no",
    "offload": "offload",
    "dense": "denso",
    "unknown": "desconocido",
    "never": "nunca",
    "pooled prior (uncalibrated)": "prior agrupado (sin calibrar)",
    "estimated from calibrated coefficients.": "estimado con coeficientes calibrados.",
    "**UNCALIBRATED** — estimated from the pooled prior (UNCALIBRATED for this hardware family): wide "
    "interval.": (
        "**SIN CALIBRAR** — estimado con el prior agrupado (SIN CALIBRAR para esta familia de hardware): "
        "intervalo amplio."
    ),
    "No offload (use --offload-gib X or --n-cpu-moe N to size host-RAM offload).": (
        "Sin offload (use --offload-gib X o --n-cpu-moe N para dimensionar el offload a la RAM del host)."
    ),
    "No speed estimate for this device (missing bandwidth or TFLOPS).": (
        "Sin estimación de velocidad para este dispositivo (faltan ancho de banda o TFLOPS)."
    ),
    "Cost: no hourly rate for this device (--usd-per-hour sets one).": (
        "Costo: no hay tarifa por hora para este dispositivo (--usd-per-hour la fija)."
    ),
    "Speed: no estimate (the device lacks the bandwidth or TFLOPS figures the physics needs).": (
        "Velocidad: sin estimación (al dispositivo le faltan el ancho de banda o los TFLOPS que el "
        "modelo físico "
        "necesita)."
    ),
    "fits with offload": "cabe con offload",
    "does not fit": "no cabe",
    "speed from the pooled prior (uncalibrated): wide interval": "velocidad del prior agrupado (sin "
    "calibrar): "
    "intervalo amplio",
    "offloaded weights are read at host RAM bandwidth each step": "los pesos descargados se leen al ancho de "
    "banda de la RAM del host en cada paso",
    "break-even counts device purchase and device electricity only (no host, hosting or resale)": (
        "la amortización cuenta solo la compra y la electricidad del dispositivo (sin host, alojamiento "
        "ni reventa)"
    ),
    "runtime buffers and context overhead from the uncalibrated prior (estimator/physics/runtime.py)": (
        "buffers del motor y sobrecarga de contexto del prior sin calibrar (estimator/physics/runtime.py)"
    ),
    "estimated: architecture formulas (weights per tensor class, KV per layer kind, engine buffers)": (
        "estimado: fórmulas de la arquitectura (pesos por clase de tensor, KV por tipo de capa, buffers "
        "del motor)"
    ),
    "prior (uncalibrated)": "prior (sin calibrar)",
    "no 2-, 4- or 8-device rows (discrete GPUs / NPUs with an interconnect only)": (
        "sin filas de 2, 4 u 8 dispositivos (solo GPUs / NPUs discretas con interconexión)"
    ),
    "the multi-device pick uses other devices": "la opción multi-dispositivo usa otros dispositivos",
    "estimated from calibrated coefficients": "estimado con coeficientes calibrados",
    "estimated from the pooled prior (UNCALIBRATED for this hardware family): wide interval": (
        "estimado con el prior agrupado (SIN CALIBRAR para esta familia de hardware): intervalo amplio"
    ),
    "bf16 weights + bf16 grads + fp32 master, m, v = 16 bytes/param": (
        "pesos bf16 + gradientes bf16 + copia maestra, m y v en fp32 = 16 bytes/parámetro"
    ),
    "bf16 base, 2 bytes/param": "base bf16, 2 bytes/parámetro",
    "adapters fp32, 16 bytes/param": "adaptadores en fp32, 16 bytes/parámetro",
    "gradient checkpointing at every layer, flash attention, unchunked loss (upper bound)": (
        "gradient checkpointing en cada capa, flash attention, pérdida sin trocear (cota superior)"
    ),
    "estimated from formulas, no measured coefficients": "estimado con fórmulas, sin coeficientes medidos",
    "hardware_comparison: configurations that fit without offload; decode is single-stream, estimated": (
        "hardware_comparison: configuraciones que caben sin offload; el decode es de un flujo, estimado"
    ),
}

_VERDICTS = {"fits": "cabe", "fits with offload": "cabe con offload", "does not fit": "no cabe"}


def _v(x: str) -> str:
    return _VERDICTS.get(x, x)


# --- templated strings -------------------------------------------------------------------------------------
# (pattern, replacement): the replacement is a format string over the named groups, or a function of the match
# (it may call ``tr`` on a part that is itself translatable).
Replacement = str | Callable[[re.Match], str]
PATTERNS: list[tuple[re.Pattern, Replacement]] = [
    (re.compile(r"Memory \((?P<n>\d+) x (?P<hw>.+)\)"), "Memoria ({n} x {hw})"),
    (
        re.compile(r"KV cache at (?P<ctx>[\d,]+) tokens x (?P<n>\d+) sequence\(s\), (?P<dt>\S+)"),
        "Caché KV a {ctx} tokens x {n} secuencia(s), {dt}",
    ),
    (
        re.compile(r"Context scaling \((?P<q>.+), weights constant\)"),
        "Escalado con el contexto ({q}, pesos constantes)",
    ),
    (
        re.compile(r"Quantization matrix at (?P<ctx>[\d,]+) tokens on (?P<n>\d+) x (?P<hw>.+)"),
        "Matriz de cuantización a {ctx} tokens en {n} x {hw}",
    ),
    (
        re.compile(r"Multi-device \((?P<s>\w+) split\) and offload"),
        "Multi-dispositivo (división {s}) y offload",
    ),
    (
        re.compile(
            r"(?P<q>.+) weights, (?P<ctx>[\d,]+) tokens of context, KV (?P<kv>\S+), engine (?P<e>\S+), split "
            r"(?P<s>\w+), concurrency (?P<c>\d+)\."
        ),
        "Pesos {q}, {ctx} tokens de contexto, KV {kv}, motor {e}, división {s}, concurrencia {c}.",
    ),
    (
        re.compile(r"Options: (?P<o>.+)\."),
        lambda m: f"Opciones: {', '.join(tr(x) for x in m['o'].split(', '))}.",
    ),
    (re.compile(r"micro-batch (?P<n>[\d,]+) tokens"), "micro-lote de {n} tokens"),
    (re.compile(r"KV cells padded to (?P<n>\d+)"), "celdas KV rellenadas a múltiplos de {n}"),
    (
        re.compile(
            r"Verdict: \*\*(?P<v>[^*]+)\*\* — needs (?P<need>.+) of (?P<use>.+) usable \((?P<pct>[\d.,]+%) "
            r"utilisation, headroom (?P<head>.+) GiB\)\."
        ),
        lambda m: (
            f"Veredicto: **{_v(m['v'])}** — necesita {m['need']} de {m['use']} utilizables "
            f"({m['pct']} de utilización, margen {m['head']} GiB)."
        ),
    ),
    (
        re.compile(
            r"Memory: weights (?P<w>\S+) GiB, KV cache (?P<kv>\S+) GiB, runtime (?P<r>\S+) GiB, overhead "
            r"(?P<o>\S+) GiB(?:, host RAM (?P<h>\S+) GiB)?\."
        ),
        lambda m: (
            f"Memoria: pesos {m['w']} GiB, caché KV {m['kv']} GiB, motor {m['r']} GiB, sobrecarga "
            f"{m['o']} GiB" + (f", RAM del host {m['h']} GiB." if m["h"] else ".")
        ),
    ),
    (
        re.compile(
            r"Decode: (?P<a>.+) one stream, empty context; (?P<b>.+) tok/s in total at concurrency "
            r"(?P<c>\d+) "
            r"with the KV cache half full \((?P<t>[\d,]+) tokens each\), (?P<p>\S+) per sequence\."
        ),
        "Decode: {a} un flujo, contexto vacío; {b} tok/s en total con concurrencia {c} y la caché KV a "
        "medias "
        "({t} tokens cada una), {p} por secuencia.",
    ),
    (
        re.compile(
            r"Decode: (?P<a>.+) one stream, empty context; (?P<b>.+) tok/s with the KV cache half full "
            r"\((?P<t>[\d,]+) tokens\)\."
        ),
        "Decode: {a} un flujo, contexto vacío; {b} tok/s con la caché KV a medias ({t} tokens).",
    ),
    (
        re.compile(
            r"Prefill: (?P<a>.+) tok/s \(pp(?P<n>\d+)\); time to first token (?P<t>.+) for a "
            r"(?P<p>[\d,]+)-token prompt\."
        ),
        "Prefill: {a} tok/s (pp{n}); tiempo hasta el primer token {t} para un prompt de {p} tokens.",
    ),
    (re.compile(r"Speeds are estimates \((?P<c>.+)\)\."), lambda m: f"Velocidades estimadas ({tr(m['c'])})."),
    (
        re.compile(r"Cost: (?P<r>\S+)/h \((?P<s>.+)\) -> (?P<u>\S+) per 1M output tokens\."),
        lambda m: f"Costo: {m['r']}/h ({tr(m['s'])}) -> {m['u']} por 1M de tokens de salida.",
    ),
    (re.compile(r"Cost: (?P<r>\S+)/h \((?P<s>.+)\)\."), lambda m: f"Costo: {m['r']}/h ({tr(m['s'])})."),
    (
        re.compile(r"Hourly rate (?P<r>\S+)/h \((?P<s>.+)\)\."),
        lambda m: f"Tarifa por hora {m['r']}/h ({tr(m['s'])}).",
    ),
    (re.compile(r"set with --usd-per-hour (?P<v>\S+)"), "fijada con --usd-per-hour {v}"),
    (
        re.compile(r"(?P<p>.+?) (?P<i>.+), cloud rate(?P<sc>, scaled per device)?, verified (?P<d>[\d-]+)"),
        lambda m: (
            f"{m['p']} {m['i']}, tarifa en la nube"
            + (", escalada por dispositivo" if m["sc"] else "")
            + f", verificada el {m['d']}"
        ),
    ),
    (
        re.compile(
            r"cloud rate(?P<sc>, scaled per device)?: (?P<rest>.+), verified (?P<d>[\d-]+), (?P<u>.+)"
        ),
        lambda m: (
            "tarifa en la nube"
            + (", escalada por dispositivo" if m["sc"] else "")
            + f": {m['rest']}, verificada el {m['d']}, {m['u']}"
        ),
    ),
    (
        re.compile(r"calibrated: (?P<f>[^ ]+) \((?P<n>\d+) runs(?P<cv>, CV median [\d.]+%)?\)"),
        lambda m: (
            f"calibrado: {m['f']} ({m['n']} ejecuciones"
            + (m["cv"].replace("CV median", "mediana CV") if m["cv"] else "")
            + ")"
        ),
    ),
    (
        re.compile(r"pooled (?P<g>\S+) \((?P<n>\d+) runs; uncalibrated for (?P<f>\S+)\)"),
        "prior agrupado {g} ({n} ejecuciones; sin calibrar para {f})",
    ),
    (re.compile(r"Basis: (?P<b>.+)\."), lambda m: f"Base: {tr(m['b'])}."),
    (
        re.compile(
            r"(?P<base>estimated: architecture formulas .+ engine buffers\)); runtime coefficients: (?P<r>.+)"
        ),
        lambda m: f"{tr(m['base'])}; coeficientes del motor: {tr(m['r'])}",
    ),
    (re.compile(r"calibrated \((?P<p>.+)\)"), "calibrado ({p})"),
    (
        re.compile(r"Utilisation (?P<p>\S+); verdict: \*\*(?P<v>[^*]+)\*\*\."),
        lambda m: f"Utilización {m['p']}; veredicto: **{_v(m['v'])}**.",
    ),
    (
        re.compile(r"Least host offload that would make it fit: (?P<b>.+)\."),
        "Offload mínimo al host con el que cabría: {b}.",
    ),
    (
        re.compile(
            r"KV capacity (?P<k>[\d,]+) tokens; max concurrency at (?P<c>[\d,]+) tokens: (?P<m>\S+)\."
        ),
        "Capacidad KV {k} tokens; concurrencia máxima a {c} tokens: {m}.",
    ),
    (
        re.compile(
            r"KV cache (?P<kv>.+) in every row; \* = selected\.  Decode speeds are estimated from the same "
            r"coefficient set as the speed section\.  Cheapest fit: .+"
        ),
        "Caché KV {kv} en todas las filas; * = elegida.  Las velocidades decode se estiman con el mismo "
        "conjunto "
        "de coeficientes que la sección de velocidad.  Opción más barata: el menor precio de compra de "
        "1, 2, 4 u 8 "
        "dispositivos del catálogo (varios solo de GPUs / NPUs con interconexión); las salvedades de cada "
        "dispositivo están en Hardware recomendado.",
    ),
    (
        re.compile(
            r"(?P<kv>.+) \(full (?P<rest>.+)\); (?P<b>[\d,]+) bytes per token of context \(full-attention "
            r"layers\); fixed state (?P<s>.+)\."
        ),
        "{kv} (completa {rest}); {b} bytes por token de contexto (capas de atención completa); estado "
        "fijo {s}.",
    ),
    (
        re.compile(r"aggregate at concurrency (?P<c>\d+), KV half full \((?P<t>[\d,]+) tokens each\)"),
        "agregado con concurrencia {c}, caché KV a medias ({t} tokens cada una)",
    ),
    (re.compile(r"TTFT, (?P<t>[\d,]+)-token prompt"), "TTFT, prompt de {t} tokens"),
    (
        re.compile(
            r"Offload: (?P<what>.+) in host RAM \((?P<b>.+), read at (?P<bw>.+)\): decode (?P<d>.+) vs "
            r"(?P<a>.+) all on device \((?P<x>.+) slower, estimated\)\."
        ),
        lambda m: (
            f"Offload: {tr(m['what'])} en la RAM del host ({m['b']}, leídos a {m['bw']}): decode {m['d']} "
            f"frente a {m['a']} todo en el dispositivo ({m['x']} más lento, estimado)."
        ),
    ),
    (re.compile(r"(?P<g>[\d.,]+ GiB) of weights"), "{g} de pesos"),
    (re.compile(r"routed experts of (?P<n>\d+) layers"), "expertos enrutados de {n} capas"),
    (re.compile(r"(?P<n>[\d.,]+) h/day = (?P<m>[\d.,]+) h/month"), "{n} h/día = {m} h/mes"),
    (re.compile(r"(?P<u>\S+)/month at (?P<k>\S+)/kWh"), "{u}/mes a {k}/kWh"),
    (re.compile(r"(?P<u>\S+)/month"), "{u}/mes"),
    (re.compile(r"(?P<n>[\d.,]+) months"), "{n} meses"),
    (re.compile(r"(?P<p>.+) \(catalog price x N\)"), "{p} (precio de catálogo x N)"),
    (
        re.compile(
            r"(?P<a>\S+ [MB]) total, (?P<b>\S+ [MB]) active per token \(counted from the "
            r"(?P<src>architecture|file's tensors)\)(?P<pub>.*)"
        ),
        lambda m: (
            f"{m['a']} totales, {m['b']} activos por token (contados "
            + ("de la arquitectura" if m["src"] == "architecture" else "de los tensores del archivo")
            + ")"
            + m["pub"]
            .replace("published:", "publicados:")
            .replace(" total", " totales")
            .replace(" active", " activos")
        ),
    ),
    (re.compile(r"(?P<n>[\d,]+) tokens"), "{n} tokens"),
    # notes and warnings
    (
        re.compile(r"speed figures come from the pooled prior: no calibrated coefficients for (?P<f>\S+)"),
        "las velocidades vienen del prior agrupado: no hay coeficientes calibrados para {f}",
    ),
    (
        re.compile(
            r"does not fit: (?P<m>\S+) at (?P<q>.+) needs more than the usable memory of (?P<n>\d+) x "
            r"(?P<h>\S+)"
        ),
        "no cabe: {m} en {q} necesita más que la memoria utilizable de {n} x {h}",
    ),
    (re.compile(r"fits only with (?P<g>.+) in host RAM"), "cabe solo con {g} en la RAM del host"),
    (
        re.compile(
            r"(?P<h>\S+) has no TFLOPS figure: prefill and time to first token assume the coefficient set's "
            r"typical (?P<t>\S+) TFLOPS, not this device's \(--tflops gives it\)"
        ),
        "{h} no tiene cifra de TFLOPS: prefill y tiempo hasta el primer token suponen los {t} TFLOPS "
        "típicos del "
        "conjunto de coeficientes, no los de este dispositivo (--tflops los da)",
    ),
    (
        re.compile(
            r"context: the default (?P<d>[\d,]+) tokens is above (?P<m>.+)'s maximum, so it is sized at its "
            r"maximum of (?P<x>[\d,]+) tokens \(--ctx chooses another\)"
        ),
        "contexto: los {d} tokens por defecto superan el máximo de {m}, así que se dimensiona a su "
        "máximo de {x} "
        "tokens (--ctx elige otro)",
    ),
    (
        re.compile(r"hardware '(?P<t>.+)' is catalog device (?P<id>\S+) \((?P<n>.+)\)"),
        "hardware '{t}' es el dispositivo {id} del catálogo ({n})",
    ),
    (
        re.compile(
            r"model '(?P<t>.+)' is not a catalog id: sized as (?P<e>.+?), the base architecture its name "
            r"points to .+"
        ),
        "modelo '{t}': no es un id del catálogo; se dimensiona como {e}, la arquitectura base que indica "
        "su nombre "
        "(las versiones Instruct / chat / con fecha la comparten; el contexto máximo es el de la entrada del "
        "catálogo y una versión puede admitir más: use su config.json para dimensionarla)",
    ),
    (
        re.compile(r"model '(?P<t>.+)' is sized as catalog entry (?P<e>.+)"),
        "modelo '{t}': se dimensiona como la entrada del catálogo {e}",
    ),
    (
        re.compile(
            r"weights: the GGUF file's own tensors \((?P<t>\S+), exact bytes\); --quant NAME re-sizes its "
            r"architecture in another format"
        ),
        "pesos: los tensores del propio archivo GGUF ({t}, bytes exactos); --quant NOMBRE redimensiona su "
        "arquitectura en otro formato",
    ),
    (
        re.compile(
            r"weights: re-sized as (?P<q>\S+) from the file's architecture \(the file itself is (?P<t>\S+); "
            r"--quant gguf sizes its own tensors\)"
        ),
        "pesos: redimensionados como {q} a partir de la arquitectura del archivo (el archivo es {t}; "
        "--quant gguf "
        "dimensiona sus propios tensores)",
    ),
    (
        re.compile(
            r"memory (?P<m>\S+) GiB \(--memory-gib\) instead of the catalog's (?P<c>\S+) GiB; the purchase "
            r"price is the catalogued part's"
        ),
        "memoria {m} GiB (--memory-gib) en lugar de los {c} GiB del catálogo; el precio de compra es el "
        "de la pieza "
        "del catálogo",
    ),
    (
        re.compile(r"GPU working set (?P<g>\S+) GiB \(macOS's default for its memory\)"),
        "conjunto de trabajo de la GPU {g} GiB (el valor por defecto de macOS para su memoria)",
    ),
    (
        re.compile(r"GPU working set (?P<g>\S+) GiB \(iogpu\.wired_limit_mb = (?P<w>\d+)\)"),
        "conjunto de trabajo de la GPU {g} GiB (iogpu.wired_limit_mb = {w})",
    ),
    (re.compile(r"detected (?P<rest>.+)"), lambda m: f"detectado: {m['rest']}"),
    (
        re.compile(r"no cloud rate for (?P<h>\S+) in the rate table; pass --usd-per-hour for a cost"),
        "no hay tarifa en la nube para {h} en la tabla; pase --usd-per-hour para obtener un costo",
    ),
    (
        re.compile(r"rate scaled linearly from (?P<n>\d+)x offer '(?P<o>.+)' to (?P<d>\d+) devices"),
        "tarifa escalada linealmente desde la oferta de {n}x '{o}' a {d} dispositivos",
    ),
]

_PREFIXES = {"note: ": "nota: ", "warning: ": "advertencia: "}

# Serving at concurrency (estimator/report/sections/serving.py) and the cost it prices
EXACT.update(
    {
        "Serving at concurrency (estimated)": "Servicio con usuarios concurrentes (estimado)",
        "No serving estimate for this device (missing bandwidth or TFLOPS).": (
            "Sin estimación de servicio para este dispositivo (faltan el ancho de banda o los TFLOPS)."
        ),
        "clients": "clientes",
        "output tok/s": "tok/s de salida",
        "tok/s per client": "tok/s por cliente",
        "running": "en curso",
        "meets SLO": "cumple SLO",
        "no concurrency meets the latency objective, not even one client": (
            "ninguna concurrencia cumple el objetivo de latencia, ni siquiera un cliente"
        ),
        "the configuration does not fit in memory: these figures assume it would": (
            "la configuración no cabe en memoria: estas cifras suponen que cabría"
        ),
        "serving figures from uncalibrated coefficients for this engine and family: wide interval": (
            "cifras de servicio con coeficientes sin calibrar para este motor y familia: intervalo amplio"
        ),
        "aggregate throughput priced": "rendimiento agregado al que se calcula el precio",
        "serving model at one client (no concurrency meets the SLO)": (
            "modelo de servicio con un cliente (ninguna concurrencia cumple el SLO)"
        ),
    }
)


def _slo(text: str) -> str:
    """'TTFT <= 2,000 ms and TPOT <= 100 ms' in Spanish."""
    return text.replace(" ms and TPOT", " ms y TPOT")


def _clients(n: str) -> str:
    return f"{n} cliente" if n == "1" else f"{n} clientes"


PATTERNS += [
    (
        re.compile(
            r"Largest concurrency meeting (?P<slo>.+): (?P<c>[\d,]+) clients?, (?P<t>\S+) output tok/s in "
            r"all \((?P<u>\S+) tok/s per client\), TTFT (?P<a>\S+) ms, TPOT (?P<b>\S+) ms\."
        ),
        lambda m: (
            f"Mayor concurrencia que cumple {_slo(m['slo'])}: {_clients(m['c'])}, {m['t']} tok/s de salida "
            f"en total ({m['u']} tok/s por cliente), TTFT {m['a']} ms, TPOT {m['b']} ms."
        ),
    ),
    (
        re.compile(r"No concurrency meets (?P<slo>.+)\."),
        lambda m: f"Ninguna concurrencia cumple {_slo(m['slo'])}.",
    ),
    (re.compile(r"Coefficients: (?P<c>.+)\."), lambda m: f"Coeficientes: {tr(m['c'])}."),
    (
        re.compile(r"serving terms: (?P<s>.+); step: (?P<t>.+)"),
        lambda m: f"términos de servicio: {tr(m['s'])}; paso: {tr(m['t'])}",
    ),
    (
        re.compile(r"decode (?P<d>.+), prefill (?P<p>.+)"),
        lambda m: f"decode {tr(m['d'])}, prefill {tr(m['p'])}",
    ),
    (
        re.compile(
            r"requests of (?P<i>[\d,]+) prompt \+ (?P<o>[\d,]+) output tokens; clients send the next "
            r"request when answered \(vllm bench serve --max-concurrency C\); TTFT includes queueing behind "
            r"other requests"
        ),
        lambda m: (
            f"peticiones de {m['i']} tokens de prompt + {_swap(m['o'])} de salida; cada cliente envía la "
            "siguiente al recibir la respuesta (vllm bench serve --max-concurrency C); el TTFT incluye la "
            "espera detrás de otras peticiones"
        ),
    ),
    (re.compile(r"scheduler: (?P<s>.+)"), "planificador: {s}"),
    (
        re.compile(r"request lengths capped to the (?P<n>[\d,]+)-token context"),
        "longitudes de petición limitadas al contexto de {n} tokens",
    ),
    (
        re.compile(
            r"the KV pool holds (?P<k>[\d,]+) tokens: about (?P<r>[\d,]+) requests run at once, the others "
            r"wait for a slot"
        ),
        "la reserva KV admite {k} tokens: unas {r} peticiones a la vez; las demás esperan un hueco",
    ),
    (
        re.compile(
            r"(?P<t>[\d,]+) tok/s: serving model at (?P<c>[\d,]+) clients?, the most within (?P<slo>.+) "
            r"\((?P<i>[\d,]+) \+ (?P<o>[\d,]+)-token requests\)"
        ),
        lambda m: (
            f"{m['t']} tok/s: modelo de servicio con {_clients(m['c'])}, el máximo dentro de "
            f"{_slo(m['slo'])} "
            f"(peticiones de {_swap(m['i'])} + {m['o']} tokens)"
        ),
    ),
    (
        re.compile(r"(?P<t>[\d,]+) tok/s: (?P<rest>serving model at one client .+)"),
        lambda m: f"{m['t']} tok/s: {tr(m['rest'])}",
    ),
    (
        re.compile(r"(?P<t>[\d,]+) tok/s: decode of (?P<n>\d+) sequences \(no serving estimate\)"),
        "{t} tok/s: decode de {n} secuencias (sin estimación de servicio)",
    ),
]

# Recommendations, provenance and launch lines (block notes and prose)
PATTERNS += [
    (
        re.compile(r"fastest predicted decode of the (?P<n>\d+) highest-bandwidth single devices that fit"),
        "el decode previsto más rápido de los {n} dispositivos individuales de mayor ancho de banda que "
        "caben",
    ),
    (
        re.compile(r"lowest purchase price that fits \((?P<p>.+)\)"),
        "el menor precio de compra que cabe ({p})",
    ),
    (re.compile(r"(?P<g>\S+) GiB per (?P<u>\S+) USD"), "{g} GiB por cada {u} USD"),
    (
        re.compile(r"fewest (?P<h>\S+) devices \(n >= 2\) that fit"),
        "el menor número de {h} (n >= 2) que cabe",
    ),
    (
        re.compile(r"cheapest multi-device configuration that fits"),
        "la configuración multi-dispositivo más barata que cabe",
    ),
    (
        re.compile(r"cheapest cloud offer that fits \((?P<p>.+), verified (?P<d>[\d-]+)\)"),
        "la oferta en la nube más barata que cabe ({p}, verificada el {d})",
    ),
    (
        re.compile(
            r"(?P<k>best single device|best value|most memory per dollar|multi-device|cheapest cloud): "
            r"(?P<c>.+) — (?P<r>.+)"
        ),
        lambda m: f"{tr(m['k'])}: {m['c']} — {tr(m['r'])}",
    ),
    # launch notes
    (
        re.compile(r"(?P<f>\S+) stands for your GGUF of (?P<m>\S+) at (?P<q>.+)"),
        "{f} representa su GGUF de {m} en {q}",
    ),
    (
        re.compile(r"(?P<e>vLLM|SGLang)'s GGUF loader is experimental and does not cover every architecture"),
        "el cargador GGUF de {e} es experimental y no cubre todas las arquitecturas",
    ),
    (
        re.compile(r"SGLang serves (?P<q>.+) only through its experimental GGUF loader"),
        "SGLang sirve {q} solo con su cargador GGUF experimental",
    ),
    (
        re.compile(
            r"(?P<e>vLLM|SGLang) has no per-layer MoE-expert offload \(llama\.cpp --n-cpu-moe\); use "
            r"--cpu-offload-gb"
        ),
        "{e} no tiene offload de expertos MoE por capa (--n-cpu-moe de llama.cpp); use --cpu-offload-gb",
    ),
    (
        re.compile(r"--quantization fp8 quantizes the bf16 checkpoint to FP8 at load time"),
        "--quantization fp8 cuantiza el checkpoint bf16 a FP8 al cargarlo",
    ),
    (
        re.compile(r"-ngl keeps whole layers on the device; the offloaded layers run on the CPU"),
        "-ngl mantiene capas enteras en el dispositivo; las capas descargadas se ejecutan en la CPU",
    ),
    (
        re.compile(r"llama\.cpp has no fp8 KV cache; q8_0 is the nearest 8-bit type"),
        "llama.cpp no tiene caché KV fp8; q8_0 es el tipo de 8 bits más cercano",
    ),
    (re.compile(r"(?P<e>llama\.cpp|vllm|sglang): (?P<n>.+)"), lambda m: f"{m['e']}: {tr(m['n'])}"),
    # fine-tuning assumptions (joined with "; ", translated part by part)
    (
        re.compile(r"rank (?P<r>\d+), targets (?P<t>\S+) \(routed experts not targeted\)"),
        "rango {r}, objetivos {t} (sin los expertos enrutados)",
    ),
    (
        re.compile(r"sequence length (?P<s>\d+) tokens, micro-batch (?P<b>\d+)"),
        "longitud de secuencia {s} tokens, micro-lote {b}",
    ),
    (
        re.compile(r"NF4 base at (?P<b>\S+) bits/param, embeddings/head bf16"),
        "base NF4 a {b} bits/parámetro, embeddings/cabeza en bf16",
    ),
    (
        re.compile(r"(?P<k>qlora|lora|full) \((?P<n>[^)]+\)?)\): (?P<rest>.+)"),
        lambda m: f"{m['k']} ({m['n']}): {tr(m['rest'])}",
    ),
    (re.compile(r"coefficients: (?P<p>.+), created (?P<t>\S+)"), "coeficientes: {p}, creados el {t}"),
    (re.compile(r"coefficients: (?P<p>.+)"), "coeficientes: {p}"),
    (
        re.compile(
            r"fitbench (?P<v>\S+), report schema (?P<s>\S+), generated (?P<t>\S+)\.  GiB = 2\^30 bytes, GB = "
            r"10\^9 bytes\."
        ),
        "fitbench {v}, esquema del informe {s}, generado el {t}.  GiB = 2^30 bytes, GB = 10^9 bytes.",
    ),
    (
        re.compile(r"(?P<e>\S+) \(not an exact match; see notes\)"),
        "{e} (no es un equivalente exacto; vea las notas)",
    ),
    (
        re.compile(r"none \(more than 8 of any catalog device\)"),
        "ninguna (más de 8 de cualquier dispositivo)",
    ),
    (
        re.compile(
            r"(?P<h>\S+) \((?P<k>\w+)\) cannot be combined for tensor / pipeline parallelism: (?P<r>.+)"
        ),
        lambda m: (
            f"{m['h']} ({m['k']}) no se puede combinar en paralelismo tensorial / de pipeline: " + tr(m["r"])
        ),
    ),
    (
        re.compile(r"no TDP for (?P<h>\S+) in the catalog; electricity is not counted"),
        "sin TDP para {h} en el catálogo; no se cuenta la electricidad",
    ),
    (
        re.compile(r"no purchase price for (?P<h>\S+) in the catalog; pass --purchase-usd for break-even"),
        "sin precio de compra para {h} en el catálogo; pase --purchase-usd para la amortización",
    ),
]


def tr(text: str, lang: str = "es") -> str:
    """``text`` in ``lang`` (module doc); English text without an entry comes back unchanged."""
    if lang != "es" or not text:
        return text
    if text in EXACT:
        return EXACT[text]
    for en, es in _PREFIXES.items():
        if text.startswith(en):
            return es + tr(text[len(en) :])
    for pattern, repl in PATTERNS:
        m = pattern.fullmatch(text)
        if m:
            return (
                repl(m) if callable(repl) else repl.format(**{k: v or "" for k, v in m.groupdict().items()})
            )
    if "; " in text:  # a list of clauses: each on its own
        parts = text.split("; ")
        done = [tr(p, lang) for p in parts]
        if done != parts:
            return "; ".join(done)
    return text


# --- numbers -----------------------------------------------------------------------------------------------
_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.\d+|\d+"
_UNIT = (
    r"(?=\s?(?:GiB|GB/s|GB|tok/s|TFLOPS|ms\b|s\b|%|W\b|tokens|bytes|h\b|/h|/kWh|meses|months|M\b|B\b|x\b))"
)
_NUMBERS = re.compile(
    rf"(?<=\$)(?:{_NUM})"  # money
    rf"|(?<![\w.,-])(?<![\w.,]-)(?:{_NUM}){_UNIT}"  # a number with its unit
    rf"|(?<=\s-)(?:{_NUM}){_UNIT}"  # a negative one (headroom -2.50 GiB)
    rf"|(?<=\()(?:{_NUM})(?=–)|(?<=–)(?:{_NUM})(?=\))"  # an interval "(a–b)"
    rf"|(?<![\w.,-])(?:{_NUM})(?= \((?:{_NUM})–)"  # the estimate before its interval
)
_CELL = re.compile(rf"[-+~]?\$?(?:{_NUM})(?: \((?:{_NUM})–(?:{_NUM})\))?(?:%| tok/s| W| ms| s)?")
_ANY = re.compile(_NUM)


def _swap(num: str) -> str:
    return num.replace(",", "\0").replace(".", ",").replace("\0", ".")


def es_numbers(text: str, cell: bool = False) -> str:
    """English-formatted numbers of ``text`` in Spanish form, each once: those with a unit, after ``$``, in an
    interval "(a–b)", or every number when the whole table ``cell`` is numeric."""
    if cell and _CELL.fullmatch(text):
        return _ANY.sub(lambda m: _swap(m.group(0)), text)
    return _NUMBERS.sub(lambda m: _swap(m.group(0)), text)


def translate_block(block: Block, lang: str) -> Block:
    """A copy of ``block`` in ``lang`` (``block`` itself for English)."""
    if lang != "es":
        return block

    def line(text: str, cell: bool = False) -> str:
        return es_numbers(tr(text), cell)

    tables = [
        Table(
            [line(h) for h in t.headers],
            [[line(c, cell=True) for c in row] for row in t.rows],
            line(t.caption),
        )
        for t in block.tables
    ]
    return Block(
        block.key,
        line(block.title),
        [line(x) for x in block.lines],
        tables,
        [(line(label), text) for label, text in block.code],
        [line(x) for x in block.notes],
    )


_SKIP = ("svg", "pre", "code", "script", "style")
_TAG = re.compile(r"(<[^>]+>)")
_NAME = re.compile(r"</?\s*([a-zA-Z0-9]+)")


def translate_html(fragment: str, lang: str) -> str:
    """``fragment`` with the text it shows in ``lang``: every text node outside numbers (``data-fmt`` spans,
    which ``Ctx.num`` already formats), SVG charts (formatted per language when drawn), code and commands goes
    through ``tr`` and ``es_numbers``; tags and attributes are kept as they are."""
    if lang != "es":
        return fragment
    from html import escape, unescape

    out: list[str] = []
    skip: list[str] = []
    for part in _TAG.split(fragment):
        if not part:
            continue
        if part.startswith("<"):
            m = _NAME.match(part)
            name = m.group(1).lower() if m else ""
            closing = part.startswith("</")
            if skip:
                if closing and name == skip[-1]:
                    skip.pop()
                elif not closing and name == skip[-1] and not part.endswith("/>"):
                    skip.append(name)
            elif not closing and not part.endswith("/>") and (name in _SKIP or "data-fmt=" in part):
                skip.append(name)
            out.append(part)
            continue
        if skip or not part.strip():
            out.append(part)
            continue
        lead = part[: len(part) - len(part.lstrip())]
        trail = part[len(part.rstrip()) :]
        core = unescape(part.strip())
        out.append(lead + escape(es_numbers(tr(core)), quote=False) + trail)
    return "".join(out)
