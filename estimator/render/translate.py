"""Spanish renderings of what the sections write in English: the terminal / Markdown blocks of ``report --lang
es``, the strings the HTML shows from the report's data (weight-format descriptions, engine support verdicts,
coefficient and basis labels, model facts, state labels, launch and scheduler notes, the request's notes and
the warnings) and the warnings ``report`` writes to stderr.

The sections build their blocks in English (``Unit.text``); ``translate_block`` turns one block into Spanish
after the fact, so every section -- a new one included -- renders in Spanish without knowing about languages:

* ``EXACT``: whole strings (titles, column headers, row labels, fixed lines and cells);
* ``PATTERNS``: templated lines (``re.fullmatch``, first match wins; the replacement may call ``tr`` on a
  captured part; a group named ``q`` is a weight format's name); ``note: `` / ``warning: `` prefixes are
  translated and the rest is translated on its own; a sentence ending in "." is tried without it, and a
  "; "-separated list clause by clause;
* numbers in Spanish form (1.234,56) where they carry a unit (GiB, GB, tok/s, ms, %, W, tokens, USD, ...),
  follow a ``$`` or fill a numeric table cell; ids and versions ("llama-3.1-8b", "Llama 3.1") are left alone
  (a pattern whose number has no unit after it converts it itself, ``_swap``).

``translate_html`` does the same for the text nodes of the HTML fragment (SVG labels through ``tr`` only:
charts format their numbers per language when drawn).

The catalog's free-form text stays as written: model and hardware notes, sources, and the notes of the
support table's cited facts (estimator/data/support.csv) are quoted in their source's words, with their
URL; a string with no entry stays English: what is shown is always the report's own text, never a guess
(tests/test_lang_es.py fails on English words outside that quoted text).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from estimator.render.blocks import Block, Table

REPLAYED_ES = "buffers de cómputo reproducidos: el grafo del propio motor por su asignador"

# --- weight formats ----------------------------------------------------------------------------------------
# Keyed by the English description itself (estimator.physics.quant.QUANTS, the engines' checkpoint formats): a
# description whose English changes no longer matches its old Spanish, and tests/test_lang_es.py fails until
# the Spanish follows it.
QUANTS_ES: dict[str, str] = {
    "32-bit float everywhere": "float de 32 bits en todo",
    "16-bit float": "float de 16 bits",
    "bfloat16 (native checkpoint dtype of most models)": (
        "bfloat16 (el dtype nativo del checkpoint de la mayoría de modelos)"
    ),
    "FP8 E4M3 linear layers; embeddings, head, norms in bf16 (vLLM / HF fp8)": (
        "capas lineales FP8 E4M3; embeddings, cabeza y normas en bf16 (vLLM / HF fp8)"
    ),
    "ggml 8-bit, 32-element blocks (8.5 bits/weight)": (
        "ggml de 8 bits, bloques de 32 elementos (8,5 bits/peso)"
    ),
    "Q6_K with output head and token embedding in q8_0 (--output-tensor-type / --token-embedding-type)": (
        "Q6_K con la cabeza de salida y el embedding de tokens en q8_0 (--output-tensor-type / "
        "--token-embedding-type)"
    ),
    "ggml 6-bit k-quant (6.5625 bits/weight)": "k-quant ggml de 6 bits (6,5625 bits/peso)",
    "Q5_K_M with output head and token embedding in q8_0": (
        "Q5_K_M con la cabeza de salida y el embedding de tokens en q8_0"
    ),
    "5-bit k-quant; attn_v / ffn_down q6_K on use_more_bits layers": (
        "k-quant de 5 bits; attn_v / ffn_down en q6_K en las capas use_more_bits"
    ),
    "5-bit k-quant, no promotions except the head": "k-quant de 5 bits, sin promociones salvo la cabeza",
    "ggml legacy 5-bit with offset, 32-element blocks (6 bits/weight)": (
        "ggml clásico de 5 bits con desplazamiento, bloques de 32 elementos (6 bits/peso)"
    ),
    "ggml legacy 5-bit, 32-element blocks (5.5 bits/weight)": (
        "ggml clásico de 5 bits, bloques de 32 elementos (5,5 bits/peso)"
    ),
    "Q4_K_M with output head and token embedding in q8_0": (
        "Q4_K_M con la cabeza de salida y el embedding de tokens en q8_0"
    ),
    "4-bit k-quant; attn_v / ffn_down q6_K on use_more_bits layers": (
        "k-quant de 4 bits; attn_v / ffn_down en q6_K en las capas use_more_bits"
    ),
    "4-bit k-quant; first attn_v and ffn_down layers q5_K": (
        "k-quant de 4 bits; primeras capas attn_v y ffn_down en q5_K"
    ),
    "ggml legacy 4-bit with offset, 32-element blocks (5 bits/weight)": (
        "ggml clásico de 4 bits con desplazamiento, bloques de 32 elementos (5 bits/peso)"
    ),
    "ggml legacy 4-bit, 32-element blocks (4.5 bits/weight)": (
        "ggml clásico de 4 bits, bloques de 32 elementos (4,5 bits/peso)"
    ),
    "4.5-bit non-linear i-quant, 32-element blocks (imatrix); attn_v q5_K (GQA >= 4)": (
        "i-quant no lineal de 4,5 bits, bloques de 32 elementos (imatrix); attn_v en q5_K (GQA >= 4)"
    ),
    "4.25-bit i-quant (imatrix, as published files); attn_v q5_K (GQA >= 4)": (
        "i-quant de 4,25 bits (imatrix, como los archivos publicados); attn_v en q5_K (GQA >= 4)"
    ),
    "Q3_K_L with output head and token embedding in q8_0": (
        "Q3_K_L con la cabeza de salida y el embedding de tokens en q8_0"
    ),
    "3-bit k-quant; attn_v, attn_output and ffn_down q5_K": (
        "k-quant de 3 bits; attn_v, attn_output y ffn_down en q5_K"
    ),
    "3-bit k-quant; attn_v q5_K/q4_K, attn_output q4_K, ffn_down q4_K/q5_K": (
        "k-quant de 3 bits; attn_v q5_K/q4_K, attn_output q4_K, ffn_down q4_K/q5_K"
    ),
    "3.4-bit i-quant; attn_v / attn_output q4_K, first n/8 ffn_down q4_K": (
        "i-quant de 3,4 bits; attn_v / attn_output en q4_K, el primer n/8 de ffn_down en q4_K"
    ),
    "3-bit k-quant, no promotions except the head": "k-quant de 3 bits, sin promociones salvo la cabeza",
    "3.44-bit i-quant; attn_v q4_K (GQA >= 4)": "i-quant de 3,44 bits; attn_v en q4_K (GQA >= 4)",
    "3.3-bit i-quant mix: iq3_s with attn_q / attn_k and middle ffn_gate / ffn_up iq3_xxs": (
        "mezcla i-quant de 3,3 bits: iq3_s con attn_q / attn_k y los ffn_gate / ffn_up centrales en iq3_xxs"
    ),
    "3.06-bit i-quant (needs an imatrix); attn_q / attn_k iq2_s, attn_output iq3_s": (
        "i-quant de 3,06 bits (requiere una imatrix); attn_q / attn_k en iq2_s, attn_output en iq3_s"
    ),
    "Q2_K with output head and token embedding in q8_0": (
        "Q2_K con la cabeza de salida y el embedding de tokens en q8_0"
    ),
    "2-bit k-quant; attn_v q4_K/q3_K, attn_output and ffn_down q3_K": (
        "k-quant de 2 bits; attn_v q4_K/q3_K, attn_output y ffn_down q3_K"
    ),
    "2-bit k-quant (needs an imatrix); attn_v q4_K (GQA >= 4), first n/8 ffn_down q4_K": (
        "k-quant de 2 bits (requiere una imatrix); attn_v en q4_K (GQA >= 4), el primer n/8 de ffn_down en "
        "q4_K"
    ),
    "2.7-bit i-quant (needs an imatrix); iq2_s with attn_v / first ffn_down iq3_s": (
        "i-quant de 2,7 bits (requiere una imatrix); iq2_s con attn_v / el primer ffn_down en iq3_s"
    ),
    "2.5-bit i-quant (needs an imatrix); iq2_xs with attn_v / first ffn_down iq3_s": (
        "i-quant de 2,5 bits (requiere una imatrix); iq2_xs con attn_v / el primer ffn_down en iq3_s"
    ),
    "2.31-bit i-quant (needs an imatrix); attn_v / first ffn_down q2_K": (
        "i-quant de 2,31 bits (requiere una imatrix); attn_v / el primer ffn_down en q2_K"
    ),
    "2.06-bit i-quant (needs an imatrix); attn_v / first ffn_down q2_K": (
        "i-quant de 2,06 bits (requiere una imatrix); attn_v / el primer ffn_down en q2_K"
    ),
    "ternary 2.06-bit (TriLM / BitNet-style models only)": (
        "ternario de 2,06 bits (solo modelos tipo TriLM / BitNet)"
    ),
    "1.75-bit i-quant (needs an imatrix); attn_output iq2_xxs, attn_v / first ffn_down q2_K": (
        "i-quant de 1,75 bits (requiere una imatrix); attn_output en iq2_xxs, attn_v / el primer ffn_down "
        "en q2_K"
    ),
    "ternary 1.69-bit (TriLM / BitNet-style models only)": (
        "ternario de 1,69 bits (solo modelos tipo TriLM / BitNet)"
    ),
    "1.56-bit i-quant (needs an imatrix); attn_output iq2_xxs, attn_v / first ffn_down q2_K": (
        "i-quant de 1,56 bits (requiere una imatrix); attn_output en iq2_xxs, attn_v / el primer ffn_down "
        "en q2_K"
    ),
    "llama.cpp MXFP4_MOE: experts MXFP4 (4.25 bits), other matrices q8_0": (
        "MXFP4_MOE de llama.cpp: expertos en MXFP4 (4,25 bits), el resto de matrices en q8_0"
    ),
    "MXFP4 checkpoint (gpt-oss): routed experts MXFP4 (4.25 bits), everything else bf16": (
        "checkpoint MXFP4 (gpt-oss): expertos enrutados en MXFP4 (4,25 bits), todo lo demás en bf16"
    ),
    "AWQ 4-bit, group 128, fp16 scales + 4-bit zeros; embeddings/head fp16": (
        "AWQ de 4 bits, grupo 128, escalas fp16 + ceros de 4 bits; embeddings/cabeza fp16"
    ),
    "GPTQ 4-bit, group 128, fp16 scales + 4-bit zeros; embeddings/head fp16": (
        "GPTQ de 4 bits, grupo 128, escalas fp16 + ceros de 4 bits; embeddings/cabeza fp16"
    ),
    "NVFP4 (ModelOpt): FFN/expert matrices E2M1 + E4M3 scale per 16 (4.5 bits); attention, embeddings, head, "
    "router bf16 (NVIDIA NVFP4 checkpoints' exclude_modules)": (
        "NVFP4 (ModelOpt): matrices FFN/expertos E2M1 + escala E4M3 cada 16 (4,5 bits); atención, "
        "embeddings, "
        "cabeza y router en bf16 (exclude_modules de los checkpoints NVFP4 de NVIDIA)"
    ),
    "FP8 E4M3 linear layers, FP32 scale per 128x128 block (DeepSeek/Qwen3/MiniMax FP8 checkpoints); "
    "embeddings, head, router bf16": (
        "capas lineales FP8 E4M3, escala FP32 por bloque de 128x128 (checkpoints FP8 de "
        "DeepSeek/Qwen3/MiniMax); "
        "embeddings, cabeza y router en bf16"
    ),
    "compressed-tensors W4A16: symmetric INT4, bf16 scale per 128 inputs (4.125 bits); embeddings, head, "
    "router bf16": (
        "W4A16 de compressed-tensors: INT4 simétrico, escala bf16 cada 128 entradas (4,125 bits); "
        "embeddings, "
        "cabeza y router en bf16"
    ),
    "compressed-tensors W4A16: symmetric INT4, bf16 scale per 32 inputs (4.5 bits); embeddings, head, "
    "router bf16": (
        "W4A16 de compressed-tensors: INT4 simétrico, escala bf16 cada 32 entradas (4,5 bits); embeddings, "
        "cabeza y router en bf16"
    ),
}
_FILE_QUANT = re.compile(r"the file's own tensor types, exact bytes \((?P<f>.*)\)")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3})")  # the thousands comma of an English number ("2,880")


def translate_quant(description: str, lang: str) -> str:
    """A weight format's description in ``lang`` (English when there is no entry)."""
    if lang != "es":
        return description
    if description in QUANTS_ES:
        return QUANTS_ES[description]
    m = _FILE_QUANT.fullmatch(description)
    return f"los tipos de tensor del propio archivo, bytes exactos ({m['f']})" if m else description


# --- whole strings -----------------------------------------------------------------------------------------
EXACT: dict[str, str] = {
    "its CPU backend": "su backend de CPU",  # EngineProfile.exact_buffers_scope (llama.cpp)
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
    "runs on the selected device": "se ejecuta en el dispositivo elegido",
    "not listed": "sin datos",
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
        "gradient checkpointing en cada capa, atención flash, pérdida sin trocear (cota superior)"
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
# what an uncalibrated speed comes from (estimator.report.sections.provenance._pool)
_POOLS = {
    "pooled prior": "del prior agrupado",
    "serving fit's pool": "del ajuste de servicio agrupado",
    "covariates of devices like it": "de las covariables de dispositivos parecidos",
}
_POOL_NAMES = "|".join(re.escape(k) for k in _POOLS)

PATTERNS: list[tuple[re.Pattern, Replacement]] = [
    (
        re.compile(r"NOT MODELLED for these weights \(see the notes\); (?P<rest>.+)"),
        lambda m: f"NO MODELADO para estos pesos (vea las notas); {tr(m['rest'])}",
    ),
    (
        re.compile(
            r"prefill of quantized weights on (?P<fam>\S+): llama\.cpp's quantized GEMMs issue mma\.sync, "
            r"not the wgmma that Hopper's datasheet rate needs; the prefill model has no term for that rate "
            r"yet: not calibrated, wide interval"
        ),
        "prefill de pesos cuantizados en {fam}: las GEMM cuantizadas de llama.cpp emiten mma.sync, no el "
        "wgmma que necesita la cifra de la hoja de datos de Hopper; el modelo de prefill aún no tiene un "
        "término para esa tasa: sin calibrar, intervalo amplio",
    ),
    (re.compile(r"Memory \((?P<n>\d+) x (?P<hw>.+)\)"), "Memoria ({n} x {hw})"),
    (
        re.compile(
            r"(?P<e>\S+) keeps the recurrent state in a pool of its own: at most (?P<n>[\d,]+) running "
            r"requests; the KV capacity above is what that pool leaves\."
        ),
        "{e} guarda el estado recurrente en un pool propio: como mucho {n} peticiones en curso; la capacidad "
        "KV de arriba es lo que ese pool deja.",
    ),
    (
        re.compile(
            r"(?P<e>\S+) admits at most (?P<n>[\d,]+) sequences of (?P<c>[\d,]+) tokens here: the recurrent "
            r"state takes (?P<how>whole attention blocks and a padded state page per request|a state pool of "
            r"its own)"
        ),
        lambda m: (
            f"{m['e']} admite como mucho {m['n']} secuencias de {m['c']} tokens aquí: el estado recurrente "
            + (
                "ocupa bloques de atención enteros y una página de estado rellenada por petición"
                if m["how"].startswith("whole")
                else "tiene un pool propio"
            )
        ),
    ),
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
        lambda m: (
            f"Decode: {m['a']} un flujo, contexto vacío; {m['b']} tok/s en total con concurrencia {m['c']} y "
            f"la caché KV a medias ({m['t']} tokens cada una), {_swap(m['p'])} por secuencia."
        ),
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
        re.compile(
            r"Fits as (?P<q>\S+(?: \(GGUF file\))?): (?P<g>[\d.,]+) GiB in all(?P<fb>, on a fallback)?"
            r"(?:; decode (?P<t>[\d.,]+) tok/s \((?P<i>[^)]+)\) one stream, empty context)? \(the largest "
            r"format of the quantization matrix that fits\)\."
        ),
        lambda m: (
            f"Cabe como {m['q']}: {m['g']} GiB en total"
            + (", por una ruta de respaldo" if m["fb"] else "")
            + (f"; decode {m['t']} tok/s ({m['i']}) un flujo, contexto vacío" if m["t"] else "")
            + " (el formato más grande de la matriz de cuantización que cabe)."
        ),
    ),
    (
        re.compile(
            r"With --n-cpu-moe (?P<k>\d+) it fits \(the routed experts of \d+ layers in host RAM, "
            r"(?P<g>[\d.,]+) GiB\): decode (?P<t>[\d.,]+) tok/s \((?P<i>[^)]+)\) one stream, empty context\."
        ),
        "Con --n-cpu-moe {k} cabe (los expertos enrutados de {k} capas en la RAM del host, {g} GiB): decode "
        "{t} tok/s ({i}) un flujo, contexto vacío.",
    ),
    (
        re.compile(
            r"(?P<e>vLLM|SGLang|TensorRT-LLM) starts: its KV pool holds (?P<cap>[\d.,]+) tokens, "
            r"(?P<n>[\d.,]+) sequences of (?P<c>[\d.,]+) tokens at once; with --concurrency (?P<k>\d+) it "
            r"fits, and more clients wait for a free slot\."
        ),
        "{e} arranca: su pool KV admite {cap} tokens, {n} secuencias de {c} tokens a la vez; con "
        "--concurrency {k} cabe, y los demás clientes esperan un hueco libre.",
    ),
    (
        re.compile(
            r"As if they fit at once: the total at concurrency (?P<n>\d+) below assumes every sequence's KV "
            r"cache in the pool\."
        ),
        "Como si cupieran a la vez: el total a concurrencia {n} de abajo supone la caché KV de todas las "
        "secuencias en el pool.",
    ),
    (
        re.compile(
            r"With --kv-dtype (?P<k>\S+) it fits: (?P<g>[\d.,]+) GiB in all \(KV cache (?P<v>[\d.,]+) GiB\), "
            r"the weights as asked\."
        ),
        "Con --kv-dtype {k} cabe: {g} GiB en total (caché KV {v} GiB), con los pesos pedidos.",
    ),
    (
        re.compile(
            r"With --split dp it fits \((?P<f>[^:]+): attention data parallel, routed experts "
            r"expert-parallel\): (?P<g>[\d.,]+) GiB in all"
            r"(?:, up to (?P<n>[\d.,]+) sequences of (?P<c>[\d.,]+) tokens)?; each device holds the KV cache"
            r" of its own sequences only\."
        ),
        lambda m: f"Con --split dp cabe ({m['f']}: atención en paralelo de datos, expertos enrutados en "
        f"paralelo de expertos): {m['g']} GiB en total"
        + (f", hasta {m['n']} secuencias de {m['c']} tokens" if m["n"] else "")
        + "; cada dispositivo guarda solo la caché KV de sus propias secuencias.",
    ),
    (
        re.compile(
            r"As if it fit: these speeds and the cost assume every weight in device memory"
            r"(?:; --offload-gib (?P<g>[\d.]+) sizes the least host offload that fits)?\."
        ),
        lambda m: "Como si cupiera: estas velocidades y el coste suponen todos los pesos en la memoria del "
        "dispositivo"
        + (f"; --offload-gib {m['g']} dimensiona la mínima descarga al host que cabe." if m["g"] else "."),
    ),
    (
        re.compile(
            r"Cost: (?P<r>\S+)/h \((?P<s>.+?)\) -> (?P<u>\S+) per 1M output tokens at (?P<t>[\d,.]+) tok/s: "
            r"(?P<b>.+)\."
        ),
        lambda m: f"Costo: {m['r']}/h ({tr(m['s'])}) -> {m['u']} por 1M de tokens de salida a "
        f"{tr(m['t'] + ' tok/s: ' + m['b'])}.",
    ),
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
        re.compile(r"pooled (?P<g>.+?) \((?P<n>\d+) runs; uncalibrated for (?P<f>\S+)\)"),
        lambda m: (
            f"prior agrupado {'todos los dispositivos' if m['g'] == 'all devices' else m['g']} ({m['n']} "
            f"ejecuciones; sin calibrar para {m['f']})"
        ),
    ),
    (
        re.compile(r"calibrated on (?P<b>\S+): (?P<f>\S+) \((?P<n>\d+) runs; uncalibrated for (?P<u>\S+)\)"),
        "calibrado en {b}: {f} ({n} ejecuciones; sin calibrar para {u})",
    ),
    (re.compile(r"Basis: (?P<b>.+)\."), lambda m: f"Base: {tr(m['b'])}."),
    (
        re.compile(
            r"(?P<base>estimated: architecture formulas .+ engine buffers\))"
            r"(?P<rp>; compute buffers replayed: the engine's own graph through its allocator)?"
            r"; runtime coefficients: (?P<r>.+)"
        ),
        lambda m: (
            f"{tr(m['base'])}"
            + (f"; {REPLAYED_ES}" if m["rp"] else "")
            + f"; coeficientes del motor: {tr(m['r'])}"
        ),
    ),
    (re.compile(r"calibrated \((?P<p>.+)\)"), "calibrado ({p})"),
    (
        re.compile(r"Utilisation (?P<p>\S+); verdict: \*\*(?P<v>[^*]+)\*\*\."),
        lambda m: f"Utilización {m['p']}; veredicto: **{_v(m['v'])}**.",
    ),
    (
        re.compile(
            r"Compute buffers: (?P<l>.+?)'s own were (?P<a>[\d.]+)-(?P<b>[\d.]+) x this estimate for 90% of "
            r"(?P<n>[\d,]+) measured configurations(?: on (?P<k>GPUs|CPUs|unified-memory devices|NPUs))? "
            r"\((?P<w>\d+)% within 5%, up to (?P<m>[\d.]+) x; in "
            r"sample\): (?P<g>\S+) GiB here, (?P<h>\S+) GiB at the 95th percentile, (?P<x>\S+) GiB at the "
            r"largest\."
        ),
        lambda m: (
            f"Buffers de cómputo: los de {m['l']} fueron {_swap(m['a'])}-{_swap(m['b'])} x esta "
            f"estimación en el 90% de {_swap(m['n'])} configuraciones medidas"
            + (f" en {_KIND_ES[m['k']]}" if m["k"] else "")
            + f" ({m['w']}% dentro del 5%, "
            f"hasta {_swap(m['m'])} x; dentro de la muestra): {m['g']} GiB aquí, {m['h']} GiB en el "
            f"percentil 95, {m['x']} GiB en el mayor."
        ),
    ),
    (
        re.compile(
            r"Tight: the compute buffers may take (?P<g>\S+) GiB more \(95th percentile of the engine's "
            r"measured buffers\), more than the headroom; see Memory\."
        ),
        "Justo: los buffers de cómputo pueden ocupar {g} GiB más (percentil 95 de los buffers medidos del "
        "motor), más que el margen; vea Memoria.",
    ),
    (
        re.compile(
            r"Tight: the headroom is smaller than the compute buffers' 95th-percentile excess; check the "
            r"engine's own figure before relying on this fit\."
        ),
        "Justo: el margen es menor que el exceso de los buffers de cómputo en el percentil 95; compruebe la "
        "cifra del propio motor antes de confiar en que cabe.",
    ),
    (
        re.compile(
            r"(?P<l>.+?)'s own figure for this point(?: \((?P<s>[^)]+)\))?: (?P<c>python -m harness .+)"
        ),
        lambda m: (
            f"La cifra de {m['l']} para este punto" + (f" ({tr(m['s'])})" if m["s"] else "") + f": {m['c']}"
        ),
    ),
    (
        re.compile(
            r"Compute buffers: (?P<l>.+?)'s own graph for this configuration, replayed through its "
            r"allocator(?: \((?P<s>[^)]+)\))?: the engine's figure, not a formula, so no band applies\."
        ),
        lambda m: (
            f"Buffers de cómputo: el grafo del propio {m['l']} para esta configuración, reproducido con su "
            "asignador" + (f" ({tr(m['s'])})" if m["s"] else "") + ": la cifra del motor, no una fórmula; no "
            "se aplica banda."
        ),
    ),
    (
        re.compile(r"Least host offload that would make it fit: (?P<b>.+)\."),
        "Offload mínimo al host con el que cabría: {b}.",
    ),
    (
        re.compile(
            r"Least expert offload that makes it fit: --n-cpu-moe (?P<k>\d+) \(the routed experts of \d+ "
            r"layers in host RAM: (?P<b>.+) of host RAM\)\."
        ),
        "Offload mínimo de expertos con el que cabe: --n-cpu-moe {k} (los expertos enrutados de {k} capas en "
        "la RAM del host: {b} de RAM del host).",
    ),
    (
        re.compile(
            r"KV capacity (?P<k>[\d,]+) tokens; max concurrency at (?P<c>[\d,]+) tokens: (?P<m>\S+)\."
        ),
        "Capacidad KV {k} tokens; concurrencia máxima a {c} tokens: {m}.",
    ),
    (
        re.compile(
            r"(?P<e>\S+)'s startup log: KV cache size (?P<k>[\d,]+) tokens; maximum concurrency for "
            r"(?P<c>[\d,]+) tokens per request: (?P<m>\S+)x \(its admission bound\)\.(?P<b> Below the "
            r"(?P<s>\d+) above: .+)?"
        ),
        lambda m: (
            f"Registro de arranque de {m['e']}: caché KV de {m['k']} tokens; concurrencia máxima para "
            f"{m['c']} tokens por petición: {m['m']}x (su cota de admisión)."
            + (
                f" Por debajo de los {m['s']} de arriba: cuenta cada capa de ventana deslizante o de "
                "atención por bloques con todos los tokens hasta los fragmentos de prompt en curso más "
                "allá de su ventana; las peticiones en ejecución solo retienen sus ventanas."
                if m["b"]
                else ""
            )
        ),
    ),
    (
        re.compile(
            r"(?:KV cache (?P<kv>.+) in every row; )?\* = selected\.  Decode speeds are estimated from the "
            r"same "
            r"coefficient set as the speed section; fb = .+ device caveats are under Recommended hardware\."
        ),
        lambda m: (
            (f"Caché KV {m['kv']} en todas las filas; " if m["kv"] else "")
            + "* = elegida.  Las velocidades decode se estiman con el mismo conjunto de coeficientes que la "
            "sección de velocidad; fb = el motor ejecuta ahí el formato en modo de respaldo (una parte por "
            "una "
            "ruta más lenta), 'no se ejecuta' = no se ejecuta en absoluto (Soporte del motor).  Opción más "
            "barata: el menor precio de compra de 1, 2, 4 u 8 dispositivos del catálogo que lo ejecutan "
            "(varios "
            "solo de GPUs / NPUs con interconexión; uno que recurre a la CPU del host solo cuando no cabe en "
            "ningún otro); las salvedades de cada dispositivo están en Hardware recomendado."
        ),
    ),
    (
        re.compile(
            r"(?P<kv>.+) \((?P<kinds>(?:full|sliding|chunked|linear|mamba) .+)\); (?P<b>[\d,]+) bytes per "
            r"token "
            r"of context \(full-attention layers\); fixed state (?P<s>.+)\."
        ),
        lambda m: (
            f"{m['kv']} ({_kinds(m['kinds'])}); {m['b']} bytes por token de contexto (capas de atención "
            f"completa); estado fijo {m['s']}."
        ),
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
            f"frente a {_swap(m['a'])} todo en el dispositivo ({m['x']} más lento, estimado)."
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
        re.compile(
            r"speed figures come from the (?P<p>" + _POOL_NAMES + r"): no calibrated coefficients "
            r"for (?P<f>\S+)"
        ),
        lambda m: f"las velocidades vienen {_POOLS[m['p']]}: no hay coeficientes calibrados para {m['f']}",
    ),
    (
        re.compile(
            r"(?P<t>decode|prefill) figures come from the (?P<p>" + _POOL_NAMES + r"): "
            r"no calibrated (?:decode|prefill) coefficients for (?P<f>\S+) \((?P<d>decode|prefill) is "
            r"calibrated\)"
        ),
        lambda m: (
            f"las cifras de {m['t']} vienen {_POOLS[m['p']]}: no hay coeficientes de {m['t']} calibrados "
            f"para {m['f']} (el {m['d']} sí está calibrado)"
        ),
    ),
    (
        re.compile(
            r"prefill of (?P<q>\S+) weights is not modelled on (?P<f>\S+) \(see the notes\): its figures "
            r"have a wide interval \(decode is calibrated\)"
        ),
        lambda m: (
            f"el prefill de pesos {_quant_name(m['q'])} no está modelado en {m['f']} (ver las notas): sus "
            "cifras tienen un intervalo amplio (el decode sí está calibrado)"
        ),
    ),
    (
        re.compile(
            r"unified memory: the GPU's working set and the weights offloaded to the CPU side share one RAM, "
            r"of which (?P<p>\d+)% \((?P<g>[\d.,]+) GiB\) is left to a process; this needs (?P<n>[\d.,]+) GiB"
        ),
        "memoria unificada: el conjunto de trabajo de la GPU y los pesos descargados al lado de la CPU "
        "comparten una RAM, de la que el {p}% ({g} GiB) queda para un proceso; esto necesita {n} GiB",
    ),
    (
        re.compile(
            r"does not fit: (?P<m>\S+) at (?P<q>.+) on (?P<n>\d+) x (?P<h>\S+): (?P<r>unified memory: .+)"
        ),
        lambda m: f"no cabe: {m['m']} en {_quant_name(m['q'])} en {m['n']} x {m['h']}: {tr(m['r'])}",
    ),
    (
        re.compile(
            r"does not fit: (?P<m>\S+) at (?P<q>.+) needs more than the usable memory of (?P<n>\d+) x "
            r"(?P<h>\S+)"
        ),
        "no cabe: {m} en {q} necesita más que la memoria utilizable de {n} x {h}",
    ),
    (
        re.compile(
            r"does not fit: (?P<m>\S+) at (?P<q>.+) on (?P<n>\d+) x (?P<h>\S+): (?P<e>\S+) admits at most "
            r"(?P<s>[\d,]+) sequences of (?P<c>[\d,]+) tokens"
        ),
        "no cabe: {m} en {q} en {n} x {h}: {e} admite como mucho {s} secuencias de {c} tokens",
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
            r"(?P<h>\S+) has no TFLOPS figure: prefill and time to first token use a CPU rate fitted on "
            r"measured CPUs and scaled to its (?P<c>\d+) cores x (?P<g>\S+) GHz, (?P<t>\S+) TFLOPS "
            r"\(estimated; --tflops gives a measured one\)"
        ),
        "{h} no tiene cifra de TFLOPS: prefill y tiempo hasta el primer token usan una tasa de CPU ajustada "
        "en CPU medidas y escalada a sus {c} núcleos x {g} GHz, {t} TFLOPS (estimada; --tflops da una "
        "medida)",
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
        re.compile(
            r"context: one serving request is above (?P<m>.+)'s maximum, so it is sized at its maximum of "
            r"(?P<x>[\d,]+) tokens \(--ctx chooses another\)"
        ),
        "contexto: una petición de servicio supera el máximo de {m}, así que se dimensiona a su máximo de "
        "{x} tokens (--ctx elige otro)",
    ),
    (
        re.compile(
            r"context: sized at (?P<c>[\d,]+) tokens, one serving request of --isl (?P<i>\d+) \+ --osl "
            r"(?P<o>\d+) \(the default (?P<d>[\d,]+) tokens would not hold it; --ctx chooses another\)"
        ),
        "contexto: se dimensiona a {c} tokens, una petición de servicio de --isl {i} + --osl {o} (los {d} "
        "tokens por defecto no la contienen; --ctx elige otro)",
    ),
    (
        re.compile(r"hardware '(?P<t>.+)' is catalog device (?P<id>\S+) \((?P<n>.+)\)"),
        "hardware '{t}' es el dispositivo {id} del catálogo ({n})",
    ),
    (
        re.compile(
            r"model '(?P<t>.+)' is not a catalog id: sized as (?P<e>.+?), the base architecture its name "
            r"points to .+?\)(?:; its name states an? (?P<f>\S+) checkpoint)?$"
        ),
        lambda m: (
            f"modelo '{m['t']}': no es un id del catálogo; se dimensiona como {m['e']}, la arquitectura base "
            "que indica su nombre (las versiones Instruct / chat / con fecha la comparten; el contexto "
            "máximo es el de la entrada del catálogo y una versión puede admitir más: use su config.json "
            "para dimensionarla)"
            + (f"; su nombre indica un checkpoint {m['f']}" if m["f"] else "")
        ),
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
            r"(?P<r>\S+) ships its own code \(config\.json auto_map\): (?P<f>\S+) lets (?P<e>.+?) run it"
        ),
        "{r} trae su propio código (auto_map de config.json): {f} permite que {e} lo ejecute",
    ),
    (
        re.compile(
            r"(?P<r>\S+) is published in (?P<o>\S+); (?P<e>.+?) keeps a checkpoint's quantization"
            r"(?P<d> whatever --dtype says)?, so (?P<q>\S+) needs a dequantized copy"
        ),
        lambda m: (
            f"{m['r']} se publica en {m['o']}; {m['e']} mantiene la cuantización de un checkpoint"
            + (" diga lo que diga --dtype" if m["d"] else "")
            + f", así que {m['q']} necesita una copia descuantizada"
        ),
    ),
    (
        re.compile(
            r"(?P<q>\S+): (?P<p>[\d.]+%) of the weights have rows of (?P<w>.+?) elements, not whole "
            r"(?P<t>\S+) blocks; llama-quantize stores them in its fallback types \((?P<f>.+?)\), so the "
            r"file is larger than the format's name suggests"
        ),
        lambda m: (
            f"{m['q']}: el {m['p']} de los pesos tiene filas de {_THOUSANDS.sub('.', m['w'])} elementos, no "
            f"bloques {m['t']} enteros; llama-quantize los guarda en sus tipos de respaldo ({m['f']}), así "
            "que el archivo es mayor de lo que sugiere el nombre del formato"
        ),
    ),
    (
        re.compile(
            r"weights: (?P<q>\S+), the format (?P<r>\S+) is published in, as (?P<e>.+?) loads it by default; "
            r"--quant NAME sizes another"
        ),
        "pesos: {q}, el formato en que se publica {r}, como {e} lo carga por defecto; --quant NOMBRE "
        "dimensiona otro",
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
    (
        re.compile(r"detected CPU (?P<c>.+) \(catalog (?P<id>\S+)\); copy bandwidth (?P<p>.+)"),
        lambda m: f"detectada la CPU {m['c']} (catálogo {m['id']}); ancho de banda de copia {_probe(m['p'])}",
    ),
    (
        re.compile(
            r"detected CPU (?P<c>.+) \((?P<f>[^,()]+), (?P<r>\S+) GiB RAM\), not in the hardware catalog; "
            r"bandwidth (?P<p>.+)"
        ),
        lambda m: (
            f"detectada la CPU {m['c']} ({m['f']}, {m['r']} GiB de RAM), que no está en el catálogo de "
            f"hardware; ancho de banda {_probe(m['p'])}"
        ),
    ),
    (
        re.compile(r"detected (?P<w>.+) \(catalog (?P<id>\S+)\); driver (?P<d>.+)"),
        "detectado {w} (catálogo {id}); controlador {d}",
    ),
    (
        re.compile(
            r"detected (?P<w>.+), not in the hardware catalog: memory from NVML; no bandwidth or TFLOPS "
            r"figure "
            r"\(--bandwidth-gbs and --tflops give them\)"
        ),
        "detectado {w}, que no está en el catálogo de hardware: memoria según NVML; sin cifras de ancho de "
        "banda ni de TFLOPS (--bandwidth-gbs y --tflops las dan)",
    ),
    (
        re.compile(r"detected (?P<c>.+) with (?P<g>\S+) GiB \(catalog (?P<id>\S+)\)"),
        "detectado {c} con {g} GiB (catálogo {id})",
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
        "every request has exactly these lengths (--lengths fixed), so the engine prefills the clients' "
        "requests together before it decodes them: TTFT includes the whole cohort's prompts and TPOT is "
        "plain decode steps (with lengths that vary, prompts interrupt decoding: shorter TTFT, longer "
        "TPOT)": (
            "cada petición tiene exactamente estas longitudes (--lengths fixed), así que el motor procesa "
            "juntos los prompts de los clientes antes de decodificarlos: el TTFT incluye los prompts de toda "
            "la cohorte y el TPOT son pasos de decode sin más (con longitudes variables, los prompts "
            "interrumpen el decode: TTFT más corto, TPOT más largo)"
        ),
        "request lengths vary (--lengths spread), so new prompts keep arriving and the engine pauses "
        "decoding to prefill them: TPOT includes the other requests' prompts (with exactly equal lengths the "
        "clients move in lock step: longer TTFT, shorter TPOT)": (
            "las longitudes de las peticiones varían (--lengths spread), así que llegan prompts nuevos sin "
            "cesar y el motor pausa el decode para procesarlos: el TPOT incluye los prompts de las demás "
            "peticiones (con longitudes exactamente iguales los clientes avanzan al unísono: TTFT más largo, "
            "TPOT más corto)"
        ),
        "no concurrency meets the latency objective, not even one client": (
            "ninguna concurrencia cumple el objetivo de latencia, ni siquiera un cliente"
        ),
        "the configuration keeps weights in host RAM, and the serving model reads every weight from device "
        "memory (a batch's offloaded layers run on the host CPU or are copied over the link at every step); "
        "the cost is priced at the speed section's decode": (
            "la configuración deja pesos en la RAM del host, y el modelo de servicio lee todos los pesos de "
            "la memoria del dispositivo (las capas descargadas de un lote corren en la CPU del host o se "
            "copian por el enlace en cada paso); el coste se calcula con el decode de la sección de velocidad"
        ),
        "No serving estimate: the configuration keeps weights in host RAM, and the serving model reads every "
        "weight from device memory (a batch's offloaded layers run on the host CPU or are copied over the "
        "link at every step); the cost is priced at the speed section's decode.": (
            "Sin estimación de servicio: la configuración deja pesos en la RAM del host, y el modelo de "
            "servicio lee todos los pesos de la memoria del dispositivo (las capas descargadas de un lote "
            "corren en la CPU del host o se copian por el enlace en cada paso); el coste se calcula con el "
            "decode de la sección de velocidad."
        ),
        "the configuration does not fit in memory: these figures assume it would": (
            "la configuración no cabe en memoria: estas cifras suponen que cabría"
        ),
        "the configuration does not fit in memory: these figures assume it would, with a KV pool as large as "
        "the clients need": (
            "la configuración no cabe en memoria: estas cifras suponen que cabría, con una reserva KV tan "
            "grande como necesiten los clientes"
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
    return f"{n} cliente" if n == "1" else f"{_swap(n)} clientes"


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
            r"request when answered \((?P<c>.+)\); TTFT includes queueing behind other requests"
        ),
        lambda m: (
            f"peticiones de {m['i']} tokens de prompt + {_swap(m['o'])} de salida; cada cliente envía la "
            f"siguiente al recibir la respuesta ({_client(m['c'])}); el TTFT incluye la espera detrás de "
            "otras peticiones"
        ),
    ),
    (
        re.compile(
            r"scheduler: (?P<s>.+?)(?:; (?P<n>\d+) data-parallel ranks, each scheduling its own budget)?"
        ),
        lambda m: f"planificador: {tr(m['s'])}"
        + (
            f"; {m['n']} rangos de paralelismo de datos, cada uno con su propio presupuesto"
            if m["n"]
            else ""
        ),
    ),
    (
        re.compile(
            r"the KV cache of (?P<s>[\d,]+) sequences of (?P<n>[\d,]+) tokens does not fit: these figures "
            r"are of the pool the engine reserves, which runs fewer requests at once"
        ),
        "la caché KV de {s} secuencias de {n} tokens no cabe: estas cifras son las de la reserva del motor, "
        "que ejecuta menos peticiones a la vez",
    ),
    (
        re.compile(r"request lengths capped to the (?P<n>[\d,]+)-token context"),
        "longitudes de petición limitadas al contexto de {n} tokens",
    ),
    (
        re.compile(
            r"the KV pool holds (?P<k>[\d,]+) tokens: about (?P<r>[\d,]+) requests run at once, the others "
            r"wait for a slot"
        ),
        lambda m: (
            f"la reserva KV admite {m['k']} tokens: unas {_swap(m['r'])} peticiones a la vez; las demás "
            "esperan un hueco"
        ),
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
        re.compile(r"(?P<t>[\d,]+) tok/s: decode of (?P<n>\d+) sequences? \(no serving estimate\)"),
        lambda m: f"{m['t']} tok/s: decode de {m['n']} secuencia{'' if m['n'] == '1' else 's'} "
        "(sin estimación de servicio)",
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
        re.compile(r"lowest purchase price that fits \((?P<p>[^)]+)\)"),
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
    (
        re.compile(
            r"TensorRT-LLM loads a pre-quantized (?P<q>\S+) checkpoint: quantize (?P<r>\S+) with NVIDIA "
            r"ModelOpt \(--qformat (?P<f>\S+)\) or use a published one"
        ),
        "TensorRT-LLM carga un checkpoint {q} ya cuantizado: cuantice {r} con NVIDIA ModelOpt "
        "(--qformat {f}) o use uno publicado",
    ),
    (
        re.compile(r"TensorRT-LLM has no (?P<q>\S+) loader; the nearest is an NVFP4 / INT4-AWQ checkpoint"),
        "TensorRT-LLM no tiene cargador de {q}; lo más cercano es un checkpoint NVFP4 / INT4-AWQ",
    ),
    (
        re.compile(r"(?P<f>\S+) holds the KV cache dtype: 'kv_cache_config: \{dtype: fp8\}'"),
        "{f} fija el tipo de la caché KV: 'kv_cache_config: {{dtype: fp8}}'",
    ),
    (
        re.compile(r"(?P<f>\S+) turns on attention data parallelism: 'enable_attention_dp: true'"),
        "{f} activa el paralelismo de datos en la atención: 'enable_attention_dp: true'",
    ),
    (
        re.compile(r"TensorRT-LLM's PyTorch backend has no host-memory weight offload"),
        "el backend PyTorch de TensorRT-LLM no descarga pesos a la memoria del host",
    ),
    (re.compile(r"(?P<e>llama\.cpp|vllm|sglang|trtllm): (?P<n>.+)"), lambda m: f"{m['e']}: {tr(m['n'])}"),
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
        lambda m: f"base NF4 a {_swap(m['b'])} bits/parámetro, embeddings/cabeza en bf16",
    ),
    (
        re.compile(r"(?P<k>qlora|lora|full) \((?P<n>[^)]+\)?)\): (?P<rest>.+)"),
        lambda m: f"{tr(m['k'])} ({tr(m['n'])}): {tr(m['rest'])}",
    ),
    (re.compile(r"coefficients: (?P<p>.+), created (?P<t>\S+)"), "coeficientes: {p}, creados el {t}"),
    (re.compile(r"coefficients: (?P<p>.+)"), lambda m: f"coeficientes: {tr(m['p'])}"),
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
            f"{m['h']} ({_kind(m['k'])}) no se puede combinar en paralelismo tensorial / de pipeline: "
            + tr(m["r"])
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


# Engine support (estimator.physics.support.describe and its findings), the speed coefficients' labels
# (estimator.physics.coefficients.model_set, estimator.physics.speed), model facts, fallback paths, serving
# schedulers and the engines' launch notes.
_ENGINE = r"(?:llama\.cpp|vLLM|SGLang|TensorRT-LLM)"
FALLBACKS_ES = {  # estimator.physics.support.FALLBACK_WORDS, and "not supported"
    "host CPU fallback": "respaldo en la CPU del host",
    "weight-only fallback (dequantized in the kernel, 16-bit compute)": (
        "respaldo solo-pesos (descuantizados en el kernel, cómputo de 16 bits)"
    ),
    "off (attention runs without it)": "desactivada (la atención se ejecuta sin ella)",
    "CPU cores only, not the accelerator": "solo los núcleos de la CPU, no el acelerador",
    "copies between devices go through host memory": (
        "las copias entre dispositivos pasan por la memoria del host"
    ),
    "each token's selected experts are copied before their matmul": (
        "los expertos elegidos por cada token se copian antes de su multiplicación de matrices"
    ),
    "not supported": "no soportado",
}
MATURITY_ES = {
    "mature": "maduro",
    "developing": "en desarrollo",
    "experimental": "experimental",
    "less mature": "menos maduro",
    "not listed": "no listado",
}
CONFIDENCE_ES = {
    "source": "fuente",
    "reported": "informado",
    "assessment": "valoración",
    "uncertain": "incierto",
}
_LAYER_KINDS = {  # estimator.specs.LAYER_KINDS -> (singular, plural) of "capa ..."
    "full": ("completa", "completas"),
    "sliding": ("deslizante", "deslizantes"),
    "chunked": ("por bloques", "por bloques"),
    "linear": ("lineal", "lineales"),
    "mamba": ("mamba", "mamba"),
    "none": ("sin mezclador de tokens", "sin mezclador de tokens"),
}
_HOW = "|".join(re.escape(x) for x in FALLBACKS_ES)
_SCHEMES = {
    "leave-one-model-out": "dejando fuera un modelo",
    "leave-one-device-out": "dejando fuera un dispositivo",
    "leave-one-family-out": "dejando fuera una familia",
}
_BASES = {"device": "dispositivo", "family": "familia", "pooled": "agrupada"}
_WHAT = {"runs": "ejecuciones", "points": "puntos", "run": "ejecución", "point": "punto"}


def _kinds(text: str) -> str:
    """'full 1.00 GiB, sliding 0.50 GiB' (or 'full: 1.00 GiB, ...') with the layer kinds in Spanish."""
    return re.sub(
        r"\b(full|sliding|chunked|linear|mamba)(?=:? )", lambda m: _LAYER_KINDS[m.group(1)][0], text
    )


def _layer_counts(text: str) -> str:
    """'32 sliding, 16 full' -> '32 deslizantes, 16 completas'."""
    return re.sub(
        r"(\d+) (full|sliding|chunked|linear|mamba|none)\b",
        lambda m: f"{m.group(1)} {_LAYER_KINDS[m.group(2)][0 if m.group(1) == '1' else 1]}",
        text,
    )


def _probe(text: str) -> str:
    """A CPU copy-bandwidth probe: '12.3 GB/s measured (memoryview copy, ...)' or 'not measured'."""
    m = re.fullmatch(r"(?P<g>\S+ GB/s) measured \((?P<d>.+)\)", text)
    if m is None:
        return "no medido" if text == "not measured" else text
    how = (
        m["d"]
        .replace("memoryview copy", "copia con memoryview")
        .replace("best of", "la mejor de")
        .replace("moved per copy", "movidos por copia")
    )
    return f"{m['g']} medidos ({how})"


def _kind(kind: str) -> str:
    """A device kind (estimator.specs.HardwareSpec.kind) as the report says it."""
    return {"unified": "memoria unificada"}.get(kind, kind.upper())


def _types(text: str) -> str:
    """'q4_K and q6_K and q5_K' -> 'q4_K, q6_K y q5_K'."""
    *head, last = text.split(" and ")
    return f"{', '.join(head)} y {last}" if head else last


def _clauses(text: str) -> str:
    """The clauses of a support verdict ('; '-separated), each in Spanish."""
    return "; ".join(tr(c) for c in text.split("; "))


def _fallback_parts(text: str) -> str:
    """The parts of a fallback path (estimator.physics.speed.fallback_note), in Spanish."""
    text = re.sub(
        r"host CPU of (?P<n>.+?) \(assumed (?P<b>\S+) GB/s\)",
        r"CPU del host de \g<n> (se suponen \g<b> GB/s)",
        text,
    )
    for en, es in (
        (r"(\S+) of the matmul bytes run on the host CPU", r"el \1 de los bytes de las multiplicaciones de "
         r"matrices se ejecuta en la CPU del host"),
        (r"everything runs on the host CPU", "todo se ejecuta en la CPU del host"),
        (r"(\d+) device<->host switches per layer", r"\1 cambios dispositivo<->host por capa"),
        (r"attention without flash attention", "atención sin atención flash"),
        (r"weight-only kernels \(16-bit compute\)", "kernels solo-pesos (cómputo de 16 bits)"),
        (r"each token's experts copied before their matmul \((\S+) GB per token, moved (\S+)x\)",
         r"los expertos de cada token se copian antes de su multiplicación de matrices (\1 GB por token, "
         r"movidos \2x)"),
    ):  # fmt: skip
        text = re.sub(en, es, text)
    return text


def _where(m: re.Match) -> str:
    """'Q4_K_M on <device> with llama.cpp (CUDA)' in Spanish (the support headline's subject)."""
    return f"{_quant_name(m['q'])} en {m['d']} con {m['e']}{m['b'] or ''}"


_FT_METHODS = r"(?P<m>(?:qlora|lora|full)(?:, (?:qlora|lora|full))*)"  # a list of fine-tuning method ids


def _methods(text: str) -> str:
    """Fine-tuning method ids of a list (``qlora, lora, full``) as the Spanish table heads them."""
    return ", ".join("completo" if x == "full" else x for x in text.split(", "))


def _quant_name(name: str | None) -> str:
    return (name or "").replace(" (GGUF file)", " (archivo GGUF)")


# where an uncalibrated speed comes from (estimator.report.sections.provenance._pool)
# what of the serving fit times a single stream (estimator.physics.stream.phase_set)
_STREAM_WHAT = {
    "TPOT of one stream": "TPOT de un flujo",
    "prompt chunks of TTFT": "fragmentos de prompt del TTFT",
}


def _interval_source(text: str) -> str:
    """estimator.physics.coefficients._interval_source in Spanish."""
    if text == "of default width (too few held-out residuals)":
        return "de anchura por defecto (muy pocos residuos fuera de muestra)"
    m = re.fullmatch(r"from (?P<s>\S+) held-out residuals \(conformal, (?P<n>\S+) residuals\)", text)
    if m is None:
        return text
    return (
        f"a partir de residuos fuera de muestra {_SCHEMES.get(m['s'], m['s'])} (conformal, {m['n']} residuos)"
    )


EXACT.update(
    {
        "Engine support": "Soporte del motor",
        "flash attention": "atención flash",
        **FALLBACKS_ES,
        **{f"[{en}]": f"[{es}]" for en, es in CONFIDENCE_ES.items()},
        "(fallback)": "(respaldo)",
        "(unsupported)": "(no se ejecuta)",
        "does not run": "no se ejecuta",
        "Speed: none — the engine cannot run this configuration on this device (see Support).": (
            "Velocidad: ninguna — el motor no puede ejecutar esta configuración en este dispositivo (vea "
            "Soporte)."
        ),
        "No speed estimate: the configuration does not run (see Engine support).": (
            "Sin estimación de velocidad: la configuración no se ejecuta (vea Soporte del motor)."
        ),
        "fb = runs on a support fallback there (what falls back: the pick's note).": (
            "fb = ahí se ejecuta en modo de respaldo (qué recurre al respaldo: la nota de la elección)."
        ),
        "estimated from the covariates of similar devices (this hardware family is not calibrated): wide "
        "interval": (
            "estimado con las covariables de dispositivos similares (esta familia de hardware no está "
            "calibrada): intervalo amplio"
        ),
        "decode estimated from calibrated coefficients; prefill from the covariates of similar devices (no "
        "prefill measurement of this hardware family): wide interval": (
            "decode estimado con coeficientes calibrados; prefill con las covariables de dispositivos "
            "similares (ninguna medida de prefill de esta familia de hardware): intervalo amplio"
        ),
        "prefill estimated from calibrated coefficients; decode from the covariates of similar devices (no "
        "decode measurement of this hardware family): wide interval": (
            "prefill estimado con coeficientes calibrados; decode con las covariables de dispositivos "
            "similares (ninguna medida de decode de esta familia de hardware): intervalo amplio"
        ),
        "decode estimated from calibrated coefficients; prefill of these weights not modelled on this "
        "hardware family (see the notes): wide interval": (
            "decode estimado con coeficientes calibrados; el prefill de estos pesos no está modelado en esta "
            "familia de hardware (vea las notas): intervalo amplio"
        ),
        "speed from devices like this one (family not calibrated): wide interval": (
            "velocidad de dispositivos como este (familia no calibrada): intervalo amplio"
        ),
        "speed from the pooled prior (uncalibrated): wide interval": (
            "velocidad del prior agrupado (sin calibrar): intervalo amplio"
        ),
        "device measured": "dispositivo medido",
        "family calibrated, device not measured": "familia calibrada, dispositivo no medido",
        "family not measured: covariates of similar devices": (
            "familia no medida: covariables de dispositivos similares"
        ),
        "shipped prior (estimator/data/prior_coefficients.json)": (
            "prior incluido (estimator/data/prior_coefficients.json)"
        ),
        # model facts
        "dense": "denso",
        "MoE": "MoE",
        "state:": "estado:",
        "host GB/s": "GB/s del host",
        "none": "ninguno",
        "– (none)": "– (ninguno)",
        "other": "otro",
        "catalog price x N": "precio de catálogo x N",
        "even with every weight in host RAM the KV cache and buffers do not fit": (
            "ni con todos los pesos en la RAM del host caben la caché KV y los buffers"
        ),
        "on a CPU the host RAM is the device memory, so no offload frees any of it (llama.cpp's "
        "default mmap can still page a larger model file in from disk, at the disk's speed, which this "
        "estimate does not model)": (
            "en una CPU la RAM del host es la memoria del dispositivo, así que ningún offload libera nada "
            "de ella (el mmap por defecto de llama.cpp aún puede paginar desde el disco un archivo de "
            "modelo mayor, a la velocidad del disco, algo que esta estimación no modela)"
        ),
        # recommendations
        "no single catalog device holds this configuration": (
            "ningún dispositivo individual del catálogo admite esta configuración"
        ),
        "no offer of the cloud-rate table holds this configuration": (
            "ninguna oferta de la tabla de tarifas en la nube admite esta configuración"
        ),
        "Atlas 300I Duo: one card is two Ascend 310P chips with 48 GB and ~204 GB/s each, not one 96 GB pool "
        "(shared/reference/hardware.md §4); the estimate treats the card as one device, so a model above 48 "
        "GB must in fact be split across its two chips like two devices": (
            "Atlas 300I Duo: una tarjeta son dos chips Ascend 310P de 48 GB y ~204 GB/s cada uno, no una "
            "reserva "
            "de 96 GB (shared/reference/hardware.md §4); la estimación trata la tarjeta como un "
            "dispositivo, así "
            "que un modelo de más de 48 GB debe en realidad repartirse entre sus dos chips como entre dos "
            "dispositivos"
        ),
        # cost
        "renting costs no more than the electricity of owning: buying never breaks even": (
            "alquilar no cuesta más que la electricidad de tenerlo en propiedad: comprar nunca se amortiza"
        ),
        # fine-tuning
        "full": "completo",
        "QLoRA (4-bit NF4 base)": "QLoRA (base NF4 de 4 bits)",
        "LoRA (16-bit base)": "LoRA (base de 16 bits)",
        "Full fine-tuning (bf16 mixed precision, AdamW)": (
            "Fine-tuning completo (precisión mixta bf16, AdamW)"
        ),
        # serving schedulers (estimator.engines.*.scheduler)
        "llama-server: -b n_batch tokens per llama_decode (slots' decode tokens, then prompt tokens), -np "
        "slots = the sized concurrency": (
            "llama-server: -b n_batch tokens por llama_decode (primero los tokens de decode de los slots, "
            "después "
            "los del prompt), -np slots = la concurrencia dimensionada"
        ),
        # launch notes (estimator.engines.*.launch, estimator.engines.base.checkpoint_args)
        "SGLang reads the quantization settings from the quantized checkpoint's config": (
            "SGLang lee la configuración de cuantización del config del checkpoint cuantizado"
        ),
        "vLLM reads the quantization settings from the quantized checkpoint's config": (
            "vLLM lee la configuración de cuantización del config del checkpoint cuantizado"
        ),
        "vLLM serves MXFP4 only from a checkpoint published in MXFP4": (
            "vLLM sirve MXFP4 solo desde un checkpoint publicado en MXFP4"
        ),
        "llama.cpp needs flash attention (-fa on) for a quantized V cache": (
            "llama.cpp necesita atención flash (-fa on) para una caché V cuantizada"
        ),
        # model notes the estimator writes (estimator.catalog.hfconfig)
        "sliding_window from config.json: vLLM honours it, llama.cpp runs full attention": (
            "sliding_window de config.json: vLLM lo respeta, llama.cpp ejecuta atención completa"
        ),
    }
)

PATTERNS += [
    (re.compile(r"Support: (?P<h>.+)\."), lambda m: f"Soporte: {tr(m['h'])}."),
    (
        re.compile(r"(?P<q>\S+): (?P<e>offload of \d+ bytes exceeds the \d+ weight bytes on the devices)"),
        lambda m: f"{m['q']}: {tr(m['e'])}",
    ),
    (
        re.compile(r"offload of (?P<o>\d+) bytes exceeds the (?P<w>\d+) weight bytes on the devices"),
        "el offload de {o} bytes supera los {w} bytes de pesos en los dispositivos",
    ),
    # the support verdict's headline: "<quant> on <device> with <engine> (<backend>)<tail>"
    (
        re.compile(
            rf"(?P<q>\S+(?: \(GGUF file\))?) on (?P<d>.+) with (?P<e>{_ENGINE})(?P<b> \([^)]+\))?: runs "
            rf"natively"
        ),
        lambda m: f"{_where(m)}: se ejecuta de forma nativa",
    ),
    (
        re.compile(
            rf"(?P<q>\S+(?: \(GGUF file\))?) on (?P<d>.+) with (?P<e>{_ENGINE})(?P<b> \([^)]+\))?: no "
            rf"(?P<l>{_ENGINE}) backend for "
            r"this device in the support table; native speed assumed"
        ),
        lambda m: (
            f"{_where(m)}: no hay backend de {m['l']} para este dispositivo en la tabla de soporte; se "
            f"supone "
            "velocidad nativa"
        ),
    ),
    (
        re.compile(
            rf"(?P<q>\S+(?: \(GGUF file\))?) on (?P<d>.+) with (?P<e>{_ENGINE})(?P<b> \([^)]+\))? "
            rf"(?P<v>runs on a fallback|does "
            r"not run): (?P<c>.+)"
        ),
        lambda m: (
            f"{_where(m)} "
            + ("se ejecuta en modo de respaldo" if m["v"] == "runs on a fallback" else "no se ejecuta")
            + f": {_clauses(m['c'])}"
        ),
    ),
    (re.compile(r"runs on a fallback: (?P<c>.+)"), lambda m: f"se ejecuta en modo de respaldo: {tr(m['c'])}"),
    (
        re.compile(r"the (?P<t>.+) matmuls have no kernels on this backend"),
        lambda m: f"las multiplicaciones de matrices {_types(m['t'])} no tienen kernels en este backend",
    ),
    (
        re.compile(
            r"the (?P<t>.+) matmuls \((?P<p>\S+) of the weight bytes read per token\) run on the host CPU"
        ),
        lambda m: (
            f"las multiplicaciones de matrices {_types(m['t'])} ({m['p']} de los bytes de pesos leídos por "
            "token) se ejecutan en la CPU del host"
        ),
    ),
    (
        re.compile(r"the (?P<t>.+) matmuls run weight-only \(dequantized in the kernel, 16-bit compute\)"),
        lambda m: (
            f"las multiplicaciones de matrices {_types(m['t'])} se ejecutan en modo solo-pesos "
            f"(descuantizados "
            "en el kernel, cómputo de 16 bits)"
        ),
    ),
    # fine-tuning support (estimator.report.sections.finetune): "<methods>: <message>[ — <note> [<conf>:
    # <url>]]"
    (
        re.compile(
            _FT_METHODS + r": does not run on (?P<h>.+) "
            r"\(PyTorch (?P<b>\S+)\)(?: — (?P<n>.+?)(?: \[(?P<c>source|reported|assessment|uncertain): "
            r"(?P<u>.+)\])?)?"
        ),
        lambda m: (
            f"{_methods(m['m'])}: no se ejecuta en {m['h']} (PyTorch {m['b']})"
            + (f" — {m['n']}" if m["n"] else "")
            + (f" [{CONFIDENCE_ES[m['c']]}: {m['u']}]" if m["c"] else "")
        ),
    ),
    (
        re.compile(_FT_METHODS + r": no PyTorch training backend is listed for (?P<v>.+) (?P<k>\S+) devices"),
        lambda m: (
            f"{_methods(m['m'])}: no hay ningún backend de entrenamiento de PyTorch para los dispositivos "
            f"{m['k']} de {m['v']}"
        ),
    ),
    (
        re.compile(_FT_METHODS + r": no fact on PyTorch (?P<b>\S+) for (?P<f>\S+)"),
        lambda m: f"{_methods(m['m'])}: ningún dato sobre PyTorch {m['b']} para {m['f']}",
    ),
    # a finding: "<what>: <how>[ (uncertain)]", followed by " — <the table's note> (since ...) [<confidence>:
    # <source>]" in text, by " — <the table's note>" in the HTML list (the note is the cited fact, as written)
    (
        re.compile(
            rf"(?P<m>.+?: (?:{_HOW})(?: \(uncertain\))?) — (?P<n>.+?)(?: \(since (?P<s>.+)\))? "
            r"\[(?P<c>source|reported|assessment|uncertain): (?P<u>.+)\]"
        ),
        lambda m: (
            f"{tr(m['m'])} — {m['n']}"
            + (f" (desde {m['s']})" if m["s"] else "")
            + f" [{CONFIDENCE_ES[m['c']]}: {m['u']}]"
        ),
    ),
    (
        re.compile(rf"(?P<w>.+?): (?P<h>{_HOW})(?P<u> \(uncertain\))?(?: — (?P<n>.+))?"),
        lambda m: (
            f"{tr(m['w'])}: {FALLBACKS_ES[m['h']]}"
            + (" (incierto)" if m["u"] else "")
            + (f" — {m['n']}" if m["n"] else "")
        ),
    ),
    (
        re.compile(rf"(?P<l>{_ENGINE}) on (?P<f>\S+) \((?P<b>[^)]+)\)"),
        lambda m: f"{m['l']} en {m['f']} ({'ningún backend' if m['b'] == 'none' else m['b']})",
    ),
    (re.compile(r"(?P<a>[\w.-]+) models"), "modelos {a}"),
    (
        re.compile(r"(?P<t>\S+) matmuls \((?P<p>\S+) of the weight bytes read per token\)"),
        "multiplicaciones de matrices {t} ({p} de los bytes de pesos leídos por token)",
    ),
    (re.compile(r"routed experts stored as (?P<t>\S+)"), "expertos enrutados almacenados como {t}"),
    (re.compile(r"attention over the (?P<k>\S+) KV cache"), "atención sobre la caché KV {k}"),
    (
        re.compile(
            r"(?P<w>tensor parallelism|attention data parallelism|the layer \(pipeline\) split) over "
            r"(?P<n>\d+) devices"
            r"(?: for (?P<a>[\w.-]+) models)?(?: with flash attention (?P<f>on|off))?"
        ),
        lambda m: (
            {
                "tensor parallelism": "paralelismo de tensores",
                "attention data parallelism": "paralelismo de datos en la atención",
            }.get(m["w"], "el reparto por capas (pipeline)")
            + f" en {m['n']} dispositivos"
            + (f" para modelos {m['a']}" if m["a"] else "")
            + (f" con flash attention {'activada' if m['f'] == 'on' else 'desactivada'}" if m["f"] else "")
        ),
    ),
    (re.compile(r"(?P<n>\d+) devices"), "{n} dispositivos"),
    (
        re.compile(r"Backend (?P<b>\S+): (?P<m>mature|developing|experimental)\."),
        lambda m: f"Backend {m['b']}: {MATURITY_ES[m['m']]}.",
    ),
    (
        re.compile(r"Speed is estimated on the fallback path(?:: (?P<p>.+))?\."),
        lambda m: (
            "La velocidad se estima por la ruta de respaldo"
            + (f": {_fallback_parts(m['p'])}." if m["p"] else ".")
        ),
    ),
    (
        re.compile(r"fallback path(?:: (?P<p>.+))?"),
        lambda m: "ruta de respaldo" + (f": {_fallback_parts(m['p'])}" if m["p"] else ""),
    ),
    (re.compile(r"no command: (?P<h>.+)"), lambda m: f"sin comando: {tr(m['h'])}"),
    (
        re.compile(r"no speed estimate for (?P<h>\S+): (?P<r>.+)"),
        lambda m: f"sin estimación de velocidad para {m['h']}: {tr(m['r'])}",
    ),
    (re.compile(r"it does not run: (?P<h>.+)"), lambda m: f"no se ejecuta: {tr(m['h'])}"),
    # speed: basis and coefficient labels
    (re.compile(r"\*\*UNCALIBRATED\*\* — (?P<b>.+)\."), lambda m: f"**SIN CALIBRAR** — {tr(m['b'])}."),
    (
        re.compile(r"\*\*PARTLY CALIBRATED\*\* — (?P<b>.+)\."),
        lambda m: f"**CALIBRADO EN PARTE** — {tr(m['b'])}.",
    ),
    (
        re.compile(r"estimated on the fallback path(?:: (?P<p>.+))? \(UNCALIBRATED\): wide interval"),
        lambda m: (
            "estimado por la ruta de respaldo"
            + (f": {_fallback_parts(m['p'])}" if m["p"] else "")
            + " (SIN CALIBRAR): intervalo amplio"
        ),
    ),
    (
        re.compile(
            r"calibrated: (?P<h>\S+) measured, (?P<f>\S+) "
            r"\((?P<n>[\d,]+) (?P<w>runs?|points?)\); basis device"
        ),
        lambda m: f"calibrado: {m['h']} medido, {m['f']} ({m['n']} {_WHAT[m['w']]}); base: dispositivo",
    ),
    (
        re.compile(r"calibrated: family (?P<f>\S+) \((?P<n>[\d,]+) (?P<w>runs?|points?)\); basis family"),
        lambda m: f"calibrado: familia {m['f']} ({m['n']} {_WHAT[m['w']]}); base: familia",
    ),
    (
        re.compile(
            r"covariates: pooled over calibrated families \(uncalibrated for (?P<f>\S+) on (?P<u>[^)]+)\) "
            r"\((?P<n>[\d,]+) (?P<w>runs?|points?)\); basis pooled"
        ),
        lambda m: (
            f"covariables: ajuste conjunto de las familias calibradas (sin calibrar para {m['f']} en "
            f"{m['u']}) "
            f"({m['n']} {_WHAT[m['w']]}); base: agrupada"
        ),
    ),
    (
        re.compile(
            r"TTFT intervals up to (?P<n>\d+) clients are those of lone requests \(held-out TTFTs of such "
            r"runs\); above, of every concurrency, queueing included: wider"
        ),
        "los intervalos del TTFT hasta {n} clientes son los de peticiones solas (TTFT fuera de muestra de "
        "esas ejecuciones); por encima, los de toda concurrencia, colas incluidas: más anchos",
    ),
    (
        re.compile(r"serving fit \((?P<w>TPOT of one stream|prompt chunks of TTFT)\): (?P<l>.+)"),
        lambda m: f"ajuste de servicio ({_STREAM_WHAT[m['w']]}): {tr(m['l'])}",
    ),
    (
        re.compile(r"fallback path \(uncalibrated\): CPU cores only, (?P<l>.+)"),
        lambda m: f"ruta de respaldo (sin calibrar): solo los núcleos de la CPU, {tr(m['l'])}",
    ),
    (
        re.compile(r"fallback path \(uncalibrated\): device (?P<l>.+?)(?:; host CPU: (?P<h>.+))?"),
        lambda m: (
            f"ruta de respaldo (sin calibrar): en el dispositivo, {tr(m['l'])}"
            + (f"; en la CPU del host, {tr(m['h'])}" if m["h"] else "")
        ),
    ),
    (
        re.compile(
            r"(?P<ph>decode|prefill) interval basis: (?P<b>device|family|pooled) \((?P<t>[^)]+)\); 90 % "
            r"interval (?P<s>.+)"
        ),
        lambda m: (
            f"base del intervalo de {m['ph']}: {_BASES[m['b']]} ({tr(m['t'])}); intervalo del 90 % "
            f"{_interval_source(m['s'])}"
        ),
    ),
    (
        re.compile(
            r"backend maturity \((?P<m>[^)]+)\): the lower bound is widened x(?P<x>[\d.]+) "
            r"\((?P<h>measured: backends of this maturity held out|assumed)\)"
        ),
        lambda m: (
            f"madurez del backend ({MATURITY_ES.get(m['m'], m['m'])}): se amplía la cota inferior x{m['x']} "
            f"({'medido: backends de esa madurez dejados fuera' if m['h'] != 'assumed' else 'supuesto'})"
        ),
    ),
    (
        re.compile(r"decode is per sequence with (?P<b>\d+) sequences decoding together"),
        "el decode es por secuencia, con {b} secuencias decodificando a la vez",
    ),
    (re.compile(r"Coeficientes: (?P<c>.+)"), lambda m: f"Coeficientes: {tr(m['c'])}"),
    # model facts
    (
        re.compile(
            r"(?P<k>MoE|dense) \+ (?P<a>MHA|MQA|GQA \((?P<h>\d+) KV heads\)|MLA \(latent (?P<l>\S+)\))"
        ),
        lambda m: (
            ("MoE" if m["k"] == "MoE" else "denso")
            + " + "
            + (f"GQA ({m['h']} cabezas KV)" if m["h"] else f"MLA (latente {m['l']})" if m["l"] else m["a"])
        ),
    ),
    (
        re.compile(r"sliding window (?P<w>\d+) on (?P<n>\d+) of (?P<t>\d+) layers"),
        "ventana deslizante de {w} en {n} de {t} capas",
    ),
    (
        re.compile(r"chunked attention (?P<w>\d+) on (?P<n>\d+) of (?P<t>\d+) layers"),
        "atención por bloques de {w} en {n} de {t} capas",
    ),
    (
        re.compile(r"hybrid: (?P<f>\d+) full-attention \+ (?P<l>\d+) linear/SSM layers"),
        "híbrida: {f} capas de atención completa + {l} capas lineales/SSM",
    ),
    (
        re.compile(r"(?P<n>\d+) \((?P<k>\d+ (?:full|sliding|chunked|linear|mamba|none)(?:, \d+ \w+)*)\)"),
        lambda m: f"{m['n']} ({_layer_counts(m['k'])})",
    ),
    (
        re.compile(
            r"hidden (?P<h>\d+), (?P<nh>\d+) heads, (?P<kv>\d+) KV heads, head_dim (?P<hd>\d+)"
            r"(?:, window (?P<w>\d+))?"
        ),
        lambda m: (
            f"dimensión oculta {m['h']}, {m['nh']} cabezas, {m['kv']} cabezas KV, head_dim {m['hd']}"
            + (f", ventana {m['w']}" if m["w"] else "")
        ),
    ),
    (
        re.compile(r"(?P<e>\d+) routed experts, (?P<u>\d+) used per token, (?P<s>\S+) shared"),
        lambda m: (
            f"{m['e']} expertos enrutados, {m['u']} usados por token, "
            + ("ninguno compartido" if m["s"] in ("0", "None") else f"{m['s']} compartidos")
        ),
    ),
    (
        re.compile(
            r"(?P<s>.+) \((?P<v>verified|NOT verified)\)(?P<g> — exact tensor bytes from the GGUF file)?"
        ),
        lambda m: (
            f"{m['s']} ({'verificado' if m['v'] == 'verified' else 'NO verificado'})"
            + (" — bytes exactos de los tensores del archivo GGUF" if m["g"] else "")
        ),
    ),
    (
        re.compile(r"(?:full|sliding|chunked|linear|mamba): .+"),
        lambda m: _kinds(m.group(0)),
    ),
    (re.compile(r"(?P<n>[\d,]+) \(above max\)"), lambda m: f"{_swap(m['n'])} (sobre el máx.)"),
    # warnings and notes of the request
    (
        re.compile(r"(?P<q>\S+) is not a (?P<e>\S+) format \(formats of (?P<f>.+)\)"),
        "{q} no es un formato de {e} (es un formato de {f})",
    ),
    (
        re.compile(r"context (?P<c>\d+) is above the model's maximum of (?P<m>\d+) tokens"),
        "el contexto de {c} tokens supera el máximo del modelo, de {m} tokens",
    ),
    (
        re.compile(
            r"(?P<h>\S+) is a (?P<k>\w+) device: several of them cannot be combined for tensor / pipeline "
            r"parallelism; the (?P<n>\d+)-device figures assume they could"
        ),
        lambda m: (
            f"{m['h']} es un dispositivo de tipo {_kind(m['k'])}: varios no se pueden combinar en "
            f"paralelismo tensorial / de pipeline; las cifras de {m['n']} dispositivos suponen que sí"
        ),
    ),
    (
        re.compile(r"bandwidth (?P<b>\S+) GB/s \(--bandwidth-gbs\) instead of the catalog's (?P<c>\S+) GB/s"),
        "ancho de banda {b} GB/s (--bandwidth-gbs) en lugar de los {c} GB/s del catálogo",
    ),
    (
        re.compile(
            r"(?P<t>\S+) dense bf16 TFLOPS \(--tflops\) instead of the catalog's (?P<c>\S+); its FP8 / INT8 "
            r"rates are not used"
        ),
        lambda m: (
            f"{m['t']} TFLOPS bf16 densos (--tflops) en lugar de los {_swap(m['c'])} del catálogo; no se "
            "usan sus cifras FP8 / INT8"
        ),
    ),
    (
        re.compile(r"coefficients of family (?P<f>\S+) \(--family\) instead of (?P<o>\S+)"),
        "coeficientes de la familia {f} (--family) en lugar de {o}",
    ),
    (
        re.compile(r"sized for (?P<n>\d+) of the (?P<f>\d+) GPUs found \(--devices\)"),
        "dimensionado para {n} de las {f} GPUs encontradas (--devices)",
    ),
    # serving schedulers
    (
        re.compile(
            r"vLLM V1 defaults of `vllm serve` \((?P<s>[^)]+)\): chunked prefill, max_num_batched_tokens / "
            r"max_num_seqs by device memory, CUDA graphs (?P<g>\S+)"
        ),
        "valores por defecto de vLLM V1 en `vllm serve` ({s}): prefill troceado, "
        "max_num_batched_tokens / max_num_seqs según la memoria del dispositivo, grafos CUDA {g}",
    ),
    (
        re.compile(
            r"SGLang defaults \((?P<s>[^)]+)\): --chunked-prefill-size and --cuda-graph-max-bs by device "
            r"memory, prefill batches not mixed with decode"
        ),
        "valores por defecto de SGLang ({s}): --chunked-prefill-size y --cuda-graph-max-bs según la memoria "
        "del dispositivo; los lotes de prefill no se mezclan con los de decode",
    ),
    (
        re.compile(
            r"TensorRT-LLM defaults of `trtllm-serve` \((?P<s>[^)]+)\): max_num_tokens (?P<t>\d+), "
            r"max_batch_size (?P<b>\d+), in-flight batching without chunked prefill, GUARANTEED_NO_EVICT "
            r"admission, CUDA graphs without padding"
        ),
        "valores por defecto de TensorRT-LLM en `trtllm-serve` ({s}): max_num_tokens {t}, "
        "max_batch_size {b}, batching en vuelo sin prefill troceado, admisión GUARANTEED_NO_EVICT, "
        "grafos CUDA sin relleno",
    ),
    # launch notes
    (
        re.compile(
            r"llama\.cpp has no (?P<q>\S+) weight format; use a GGUF of similar size \(e\.g\. Q8_0 for FP8, "
            r"Q4_K_M for 4-bit\)"
        ),
        "llama.cpp no tiene el formato de pesos {q}; use un GGUF de tamaño parecido (p. ej. Q8_0 en lugar de "
        "FP8, Q4_K_M en lugar de 4 bits)",
    ),
    (
        re.compile(
            r"(?P<e>vLLM|SGLang|TensorRT-LLM) has no (?P<k>\S+) KV cache; (?P<n>\S+) is the nearest "
            r"8-bit type"
        ),
        "{e} no tiene caché KV {k}; {n} es el tipo de 8 bits más cercano",
    ),
    (
        re.compile(r"equivalent override: (?P<o>.+)"),
        "override equivalente: {o}",
    ),
    (
        re.compile(
            r"the (?P<s>\d+) slots share one KV pool of (?P<t>\d+) tokens \(--kv-unified\): room for "
            r"(?P<n>\d+) "
            r"sequences of (?P<c>\d+) tokens, as sized here"
        ),
        "los {s} slots comparten una reserva KV de {t} tokens (--kv-unified): caben {n} secuencias de {c} "
        "tokens, como se dimensiona aquí",
    ),
    (
        re.compile(
            r"each of the (?P<s>\d+) slots has its own KV stream of (?P<c>\d+) tokens \(no --kv-unified\), "
            r"as "
            r"sized here"
        ),
        "cada uno de los {s} slots tiene su propio flujo KV de {c} tokens (sin --kv-unified), como se "
        "dimensiona aquí",
    ),
    (
        re.compile(r"sized for a build that pads the KV cache to (?P<n>\d+) cells"),
        "dimensionado para una compilación que rellena la caché KV a múltiplos de {n} celdas",
    ),
    (
        re.compile(
            r"sliding-window layers get (?P<r>\S+) of the full layers' KV tokens "
            r"\(--swa-full-tokens-ratio\), "
            r"as sized here"
        ),
        lambda m: (
            f"las capas de ventana deslizante reciben {_swap(m['r'])} de los tokens KV de las capas "
            "completas (--swa-full-tokens-ratio), como se dimensiona aquí"
        ),
    ),
    # the HTML footer (estimator.report.sections.provenance.footer)
    (re.compile(r"(?P<a>Generado por .+) · schema (?P<v>\S+)"), "{a} · esquema {v}"),
    # a measured run's source in the HTML (estimator.catalog.measured.MeasuredRun: file:line · origin)
    (
        re.compile(r"(?P<s>\S+) · (?P<o>measured|imported)(?P<t> ·)?"),
        lambda m: f"{m['s']} · {'medido' if m['o'] == 'measured' else 'importado'}{m['t'] or ''}",
    ),
    (  # ... and its chip: "test, engine version, source"; "other" = an engine fitbench does not drive
        re.compile(r"(?P<l>[^,]+), other (?P<v>[^,]*), (?P<s>.+)"),
        "{l}, otro {v}, {s}",
    ),
    # the title and a GGUF file's own format, last: they match broadly
    (re.compile(r"(?P<m>.+) on (?P<n>\d+) x (?P<h>.+)"), "{m} en {n} x {h}"),
    (
        re.compile(r"(?P<q>\S+) \(GGUF file\)(?P<rest>(?: \*| · .*|: .*)?)"),
        "{q} (archivo GGUF){rest}",
    ),
]


# The engine profiles' reasons for a device or CPU path (``vector_gemm``, ``cpu_gemm_fallback``,
# ``cpu_matrix_gemm``, ``cpu_crash_workarounds``), which the speed notes quote; tests/test_lang_es.py checks
# that every profile reason has its entry here
PROFILE_REASONS_ES = {
    "llama.cpp's Vulkan backend enables cooperative matrices on Intel Xe2 only (PR #14001); on Alchemist "
    "(Arc A-series) its GEMMs run in shaders, not on the XMX engines": (
        "el backend Vulkan de llama.cpp activa las matrices cooperativas solo en Intel Xe2 (PR #14001); en "
        "Alchemist (Arc serie A) sus GEMM se ejecutan en shaders, no en los motores XMX"
    ),
    "llama.cpp's AMX weight buffer crashes at the first prompt when llama.cpp was compiled by GCC 12 (its "
    "tile-configuration intrinsic lets the compiler drop the tile shapes; ggml-org/llama.cpp#20824); a build "
    "with a corrected header runs it": (
        "el búfer de pesos AMX de llama.cpp falla en el primer prompt cuando llama.cpp se compiló con GCC 12 "
        "(su intrínseco de configuración de teselas deja que el compilador descarte las formas de las "
        "teselas; ggml-org/llama.cpp#20824); una compilación con la cabecera corregida lo ejecuta"
    ),
    "llama.cpp repacks Q4_0 / Q8_0 / k-quant weights into its AMX buffer and runs prompt GEMMs on AMX-INT8 "
    "tiles (measured on a 2-vCPU Xeon guest with AMX: prompts x2.0-2.7 for Q4_0 / Q8_0, x1.1-1.2 for Q4_K_M, "
    "against the same points with --no-repack)": (
        "llama.cpp reempaqueta los pesos Q4_0 / Q8_0 / k-quant en su búfer AMX y ejecuta las GEMM del prompt "
        "en teselas AMX-INT8 (medido en un invitado Xeon de 2 vCPU con AMX: prompts x2,0-2,7 en Q4_0 / Q8_0, "
        "x1,1-1,2 en Q4_K_M, frente a los mismos puntos con --no-repack)"
    ),
    "vLLM's CPU backend runs BF16 GEMMs, which an AVX2-only x86 CPU has no BF16 instructions for (measured: "
    "prompts ~10x slower than on an AVX-512 BF16 CPU of the same size)": (
        "el backend de CPU de vLLM ejecuta GEMM en BF16, para las que una CPU x86 solo AVX2 no tiene "
        "instrucciones BF16 (medido: prompts ~10x más lentos que en una CPU AVX-512 BF16 del mismo tamaño)"
    ),
    "vLLM's CPU backend runs its BF16 GEMMs through oneDNN, which issues AMX tile instructions on a CPU that "
    "has them (measured on a 2-vCPU Xeon guest with AMX: prompts ~3.6x faster than estimated from the "
    "AVX-512 BF16 CPUs of the same size)": (
        "el backend de CPU de vLLM ejecuta sus GEMM en BF16 con oneDNN, que emite instrucciones de teselas "
        "AMX en una CPU que las tiene (medido en un invitado Xeon de 2 vCPU con AMX: prompts ~3,6x más "
        "rápidos que lo estimado a partir de las CPU AVX-512 BF16 del mismo tamaño)"
    ),
}
EXACT.update(PROFILE_REASONS_ES)

def _more_weights_es(text: str) -> str:
    """"Q4_0 weights read x1.31 slower on top, ..." (speed.cpu_crash_note) in Spanish."""
    parts = re.findall(r"(\S+) weights read x([\d.]+) slower on top", text)
    return ", ".join(f"pesos {q} leídos x{f.replace('.', ',')} más lento además" for q, f in parts) or text


PATTERNS += [
    (
        re.compile(r"prefill GEMMs on the CPU's matrix extension \(fitted term cpu_matrix_gemm\): (?P<w>.+)"),
        lambda m: f"GEMM del prefill en la extensión matricial de la CPU (término ajustado cpu_matrix_gemm): "
        f"{tr(m['w'])}",
    ),
    (
        re.compile(r"prefill GEMMs on a slower path \(fitted term cpu_gemm_fallback\): (?P<w>.+)"),
        lambda m: "GEMM del prefill por una vía más lenta (término ajustado cpu_gemm_fallback): "
        f"{tr(m['w'])}",
    ),
    (
        re.compile(
            r"prefill GEMMs at the shader FP16 rate, (?P<v>[\d.]+) TFLOPS(?:, not the matrix engines' "
            r"(?P<b>[\d.]+))?: (?P<w>.+)"
        ),
        lambda m: f"GEMM del prefill a la tasa FP16 de los shaders, {m['v']} TFLOPS"
        + (f", no los {m['b']} de los motores matriciales" if m["b"] else "")
        + f": {tr(m['w'])}",
    ),
    (
        re.compile(
            r"(?P<w>.+): the estimate is of the default run; where it crashes, use (?P<flag>\S+) \(engine "
            r"option (?P<o>[^)]+)\)(?:; its decode steps take x(?P<f>[\d.]+) the default's \(fitted term "
            r"(?P<s>\S+), from runs measured with and without it\)(?: \((?P<more>[^)]+)\))?)?"
        ),
        lambda m: f"{tr(m['w'])}: la estimación es de la ejecución por defecto; donde falle, use {m['flag']} "
        f"(opción del motor {m['o']})"
        + (
            f"; sus pasos de decode tardan x{m['f'].replace('.', ',')} lo de la ejecución por defecto "
            f"(término ajustado {m['s']}, de ejecuciones medidas con y sin ella)"
            + (f" ({_more_weights_es(m['more'])})" if m["more"] else "")
            if m["f"]
            else ""
        ),
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
            if callable(repl):
                return repl(m)
            # a group named "q" is a weight format's name ("Q8_0 (GGUF file)" names a file's own format)
            return repl.format(
                **{k: _quant_name(v) if k == "q" else v or "" for k, v in m.groupdict().items()}
            )
    if text.endswith(".") and (done := tr(text[:-1], lang)) != text[:-1]:  # a sentence: its words
        return done + "."
    if "; " in text:  # a list of clauses: each on its own
        parts = text.split("; ")
        done = [tr(p, lang) for p in parts]
        if done != parts:
            return "; ".join(done)
    return text


# --- numbers -----------------------------------------------------------------------------------------------
_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.\d+|\d+"
_UNIT = (
    r"(?=\s?(?:GiB|GB/s|GB|GHz|tok/s|TFLOPS|ms\b|s\b|%|W\b|tokens|bytes|h\b|/h|/kWh|meses|months|M\b|B\b|x\b"
    r"|USD\b))"
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


def _client(text: str) -> str:
    """A benchmark client of the serving note in Spanish: commands stay as written."""
    if text == "a closed-loop client of C connections":
        return "un cliente en bucle cerrado de C conexiones"
    return text.replace(" against ", " contra ")


_KIND_ES = {"GPUs": "GPU", "CPUs": "CPU", "unified-memory devices": "dispositivos de memoria unificada",
            "NPUs": "NPU"}  # fmt: skip


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


_SKIP = ("pre", "code", "script", "style")
_TAG = re.compile(r"(<[^>]+>)")
_NAME = re.compile(r"</?\s*([a-zA-Z0-9]+)")


def translate_html(fragment: str, lang: str) -> str:
    """``fragment`` with the text it shows in ``lang``: every text node outside numbers (``data-fmt`` spans,
    which ``Ctx.num`` already formats), code and commands goes through ``tr`` and ``es_numbers``; inside SVG
    charts (their numbers formatted per language when drawn) through ``tr`` only; tags and attributes are kept
    as they are."""
    if lang != "es":
        return fragment
    from html import escape, unescape

    out: list[str] = []
    skip: list[str] = []
    svg = 0  # depth of <svg> elements
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
            elif name == "svg" and not part.endswith("/>"):
                svg += -1 if closing else 1
            out.append(part)
            continue
        if skip or not part.strip():
            out.append(part)
            continue
        lead = part[: len(part) - len(part.lstrip())]
        trail = part[len(part.rstrip()) :]
        core = unescape(part.strip())
        shown = tr(core) if svg else es_numbers(tr(core))
        out.append(lead + escape(shown, quote=False) + trail)
    return "".join(out)
