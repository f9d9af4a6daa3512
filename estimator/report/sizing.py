"""Memoised physics calls for one report: the quant matrix, the context table, the multi-device table, the
charts and the recommendations ask for overlapping configurations, so memory and speed are computed once per
(quant, device, workload).  Scalar calls only (no numpy / scipy / pandas), so ``python -m estimator report``
starts fast.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from estimator.physics import speed as speed_mod
from estimator.physics import stream as stream_mod
from estimator.physics import support as support_mod
from estimator.physics.memory import estimate_memory
from estimator.physics.runtime import coerce as memory_coefficients
from estimator.specs import HardwareSpec, ModelSpec, QuantSpec, SpecError, Workload

# what the physics raises for a configuration it cannot size (missing figures, impossible sizes)
SIZING_ERRORS = (SpecError, ValueError, ArithmeticError)


@dataclass(frozen=True)
class SpeedFigure:
    """One estimated speed: tok/s with its interval and the coefficient set it came from (label, calibrated,
    number of runs behind it)."""

    tok_s: float
    lo_tok_s: float
    hi_tok_s: float
    coefficients: str
    calibrated: bool
    n_points: int


class Sizing:
    """Memoised memory / speed calls for one model and coefficient table.

    Decode: the features of tg{n_gen} (``speed.tg_features``) do not depend on the device, so they are built
    once per (quant, workload) and every device applies ``speed.decode_estimate`` to them (its native path or
    its support fallback, ``sets``): the same numbers as ``speed.estimate_speed`` at a fraction of the cost
    when many devices are sized.
    """

    def __init__(self, model: ModelSpec, table):
        self.model, self.table = model, table
        self._mem: dict = {}
        self._feats: dict = {}
        self._decode: dict = {}
        self._sets: dict = {}
        self._coeffs: dict = {}  # engine -> its MemoryCoefficients, parsed once

    def memory(self, quant: QuantSpec, hw: HardwareSpec, wl: Workload):
        """Memory with the KV cache of ``memory_sequences(wl)`` sequences (what the launch commands
        allocate: llama-server ``-c n_ctx x -np``, vLLM ``--max-num-seqs``)."""
        wl = replace(wl, n_seq=memory_sequences(wl))
        key = (quant.name, hw, wl)
        if key not in self._mem:
            if wl.engine not in self._coeffs:
                self._coeffs[wl.engine] = memory_coefficients(self.table.memory_for(wl.engine), wl.engine)
            self._mem[key] = estimate_memory(self.model, quant, hw, wl, self._coeffs[wl.engine])
        return self._mem[key]

    def sets(self, quant: QuantSpec, hw: HardwareSpec, wl: Workload):
        """The configuration's ``speed.SpeedSets`` (the backend's sets; on a support fallback also the
        host's; a serving engine's single stream may run on the serving fit's step:
        estimator.physics.stream)."""
        key = (quant.name, hw, wl)
        if key not in self._sets:
            self._sets[key] = stream_mod.speed_sets(self.table, self.model, quant, hw, wl)
        return self._sets[key]

    def _decode_features(self, quant: QuantSpec, wl: Workload) -> list:
        key = (quant.name, wl)
        if key not in self._feats:
            n_gen = max(int(wl.n_gen), 1)
            self._feats[key] = speed_mod.tg_features(self.model, quant, wl, int(wl.n_depth), n_gen)
        return self._feats[key]

    def decode(self, quant: QuantSpec, hw: HardwareSpec, wl: Workload) -> SpeedFigure:
        """Mean single-stream decode speed over wl.n_gen tokens from wl.n_depth (tg{n_gen}), on the path the
        support table gives the configuration."""
        key = (quant.name, hw, wl)
        if key not in self._decode:
            sets = self.sets(quant, hw, wl)
            feats = self._decode_features(quant, sets.workload(wl))
            self._decode[key] = from_estimate(speed_mod.decode_estimate(feats, hw, sets))
        return self._decode[key]

    def decode_tok_s(self, model: ModelSpec, quant: QuantSpec, hw: HardwareSpec, wl: Workload) -> float:
        """Single-stream decode tok/s (the speed function the recommendations take)."""
        return self.decode(quant, hw, wl).tok_s

    def prefill(self, quant: QuantSpec, hw: HardwareSpec, wl: Workload) -> SpeedFigure:
        """Prefill tok/s of B x n_prompt tokens (pp{n_prompt}, 512 if unset), as ``speed.estimate_speed``."""
        sets = self.sets(quant, hw, wl)
        return from_estimate(speed_mod.pp_path_estimate(self.model, quant, hw, wl, sets))

    def aggregate_tok_s(self, quant: QuantSpec, hw: HardwareSpec, wl: Workload) -> float:
        """Total decode tok/s of wl.concurrency sequences with the KV cache at half of n_ctx."""
        sets = self.sets(quant, hw, wl)
        return speed_mod.aggregate_path_estimate(self.model, quant, hw, wl, sets).tok_s

    def support(self, quant: QuantSpec, hw: HardwareSpec, wl: Workload):
        """The support verdict of a configuration (estimator.physics.support.judge)."""
        return support_mod.judge(self.model, quant, hw, wl)

    def min_moe_offload(self, quant: QuantSpec, hw: HardwareSpec, wl: Workload):
        """(k, memory) for the fewest layers k of routed experts in host RAM (llama.cpp ``--n-cpu-moe k``)
        with which the configuration fits, or None (it does not fit even with every layer's experts there).
        Memory falls as k grows, so k is found by bisection over 1 .. n_layers."""
        n_layers = self.model.n_layers

        def fits(k: int):
            try:
                m = self.memory(quant, hw, replace(wl, moe_offload_layers=k))
            except SIZING_ERRORS:
                return None
            return m if m.verdict != "does not fit" else None

        if fits(n_layers) is None:
            return None
        lo, hi = 1, n_layers  # fits(hi) holds; find the smallest k that fits
        while lo < hi:
            mid = (lo + hi) // 2
            if fits(mid) is not None:
                hi = mid
            else:
                lo = mid + 1
        return lo, fits(lo)


def memory_sequences(wl: Workload) -> int:
    """Sequences the memory is sized for: ``max(n_seq, concurrency)``.  ``--concurrency N`` starts N slots
    (llama-server ``-np N`` with ``-c n_ctx x N``; vLLM ``--max-num-seqs N``), so the KV cache holds N
    sequences of n_ctx tokens each; speed keeps ``n_seq`` as the batch of its single-stream figures."""
    return max(int(wl.n_seq), int(wl.concurrency), 1)


def from_estimate(e) -> SpeedFigure:
    """The SpeedFigure of a physics SpeedEstimate."""
    return SpeedFigure(
        tok_s=e.tok_s,
        lo_tok_s=e.lo_tok_s,
        hi_tok_s=e.hi_tok_s,
        coefficients=e.coefficients,
        calibrated=bool(e.calibrated),
        n_points=int(e.n_points),
    )
