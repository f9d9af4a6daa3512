"""llama.cpp's own quantizer on synthetic GGUF probes: the known answers of the recipe tests.

``python tests/quantizer/quantizer.py`` writes every probe below as an F16 GGUF (harness.synth), quantizes it
with every llama.cpp recipe of the estimator (``estimator.physics.quant.LLAMA_RECIPES``: file type, uniform
importance matrix for imatrix recipes, ``--output-tensor-type`` / ``--token-embedding-type`` overrides for the
``_L`` / ``_XL`` recipes) through ``llama_model_quantize`` (llama-cpp-python), and stores the summed tensor
bytes of each output file (gguf.GGUFReader), with the bytes per ggml type, in ``bytes.json`` next to this
file.  Nothing in ``bytes.json`` is computed by the estimator; tests/test_quant_recipes.py compares the
estimator with it (and re-measures a few entries when llama-cpp-python is installed).

The probes are small (hidden 256-320) so every file type quantizes in seconds, with the features the recipes
branch on: 16 layers (n/8 = 2, n/16 = 1, use_more_bits), GQA 2 / 4 / 5, rows that are not whole k-quant
blocks (hidden 320, ffn 640: fallbacks), 8 experts with a dense first layer and shared experts (MLA),
a tied embedding with sliding-window layers, and 80 layers (llama.cpp's "70B" type; MHA is "65B").
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from estimator.physics.quant import LLAMA_RECIPES  # noqa: E402
from estimator.specs import ModelSpec  # noqa: E402

BYTES_JSON = HERE / "bytes.json"


def probes() -> dict[str, ModelSpec]:
    """The probe geometries (harness.synth.tiny_model shapes, widened / deepened as each name says)."""
    from harness.synth import tiny_model

    def deep(arch: str, n: int, **changes) -> ModelSpec:
        m = tiny_model(arch, n_layers=n)
        return dataclasses.replace(m, id=f"probe-{arch}-{n}", **changes)

    return {
        "llama-16": deep("llama", 16),
        "llama-16-gqa4": deep("llama", 16, n_kv_heads=1),
        "llama-16-odd": deep("llama", 16, hidden_size=320, n_heads=5, n_kv_heads=1, intermediate_size=640),
        "qwen3moe-16": deep("qwen3_moe", 16),
        "gemma3-16-tied": deep("gemma3", 16),
        "deepseek2-16": deep("deepseek_v2", 16),
        "llama-80": deep("llama", 80),
        "llama-80-mha": deep("llama", 80, n_kv_heads=4),
        "qwen2-80": deep("qwen2", 80),
    }


# the 80-layer probes only need the recipes whose attn_v can be q3_K / q4_K (the 70B bump) and one control
DEEP_QUANTS = ("Q2_K", "Q3_K_S", "Q3_K_M", "Q4_K_S", "Q4_K_M", "IQ3_M", "IQ4_XS", "Q8_0")


def quants_for(probe: str) -> tuple[str, ...]:
    return DEEP_QUANTS if probe.endswith(("-80", "-80-mha")) else tuple(LLAMA_RECIPES)


def measure(model: ModelSpec, quant: str, cache: Path) -> dict:
    """Quantize the probe with llama.cpp and sum the output file's tensors: {total_bytes, by_type}."""
    import gguf

    from harness import synth

    f16 = synth.synthetic_model(model, "F16", cache_dir_path=cache)
    out = cache / f"{f16.stem.removesuffix('-F16')}-{quant}.gguf"
    if not out.exists():
        synth.quantize(f16, out, quant)
    by_type: dict[str, int] = {}
    for t in gguf.GGUFReader(str(out)).tensors:
        name = t.tensor_type.name.lower().replace("_k", "_K")
        by_type[name] = by_type.get(name, 0) + int(t.n_bytes)
    return {"total_bytes": sum(by_type.values()), "by_type": dict(sorted(by_type.items()))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default="/tmp/fitbench-quantizer", help="folder for the GGUF files")
    ap.add_argument("--out", default=str(BYTES_JSON))
    args = ap.parse_args(argv)
    import llama_cpp

    from harness.synth import WRITER_VERSION

    cache = Path(args.cache)
    results: dict[str, dict[str, dict]] = {}
    for name, model in probes().items():
        results[name] = {}
        for q in quants_for(name):
            t0 = time.perf_counter()
            results[name][q] = measure(model, q, cache)
            print(f"{name} {q}: {results[name][q]['total_bytes']} B ({time.perf_counter() - t0:.1f} s)")
    doc = {
        "source": "llama_model_quantize of llama-cpp-python "
        f"{llama_cpp.__version__} on harness.synth F16 probes (writer version {WRITER_VERSION}); "
        "imatrix recipes with a uniform importance matrix (harness.synth.uniform_imatrix)",
        "generated_by": "python tests/quantizer/quantizer.py",
        "probes": {
            n: {k: v for k, v in dataclasses.asdict(m).items() if v not in (None, (), False)}
            for n, m in probes().items()
        },
        "bytes": results,
    }
    tmp = Path(args.out).with_suffix(".part")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=False, default=list) + "\n")
    tmp.replace(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
