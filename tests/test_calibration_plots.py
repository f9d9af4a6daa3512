"""The calibration plots (calibration.report._plots): large enough to read (12 x 8 in at 150 dpi), one
legend entry per family with its own (colour, marker) pair even past the palette's 8 colours, the legend
inside the figure, axis labels with units, y = x and the +-25 % band."""

from __future__ import annotations

import struct

import numpy as np
import pandas as pd
import pytest

from calibration import report


def _frame(n_families: int) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for phase in ("decode", "prefill"):
        for f in range(n_families):
            for _ in range(3):
                meas = float(rng.uniform(5, 5000))
                lr = float(rng.normal(0, 0.2))
                rows.append({"phase": phase, "family": f"family-{f:02d}", "measured_tok_s": meas,
                             "predicted_tok_s": meas / np.exp(lr), "log_ratio": lr,
                             "model_gib": float(rng.uniform(0.1, 100))})  # fmt: skip
    return pd.DataFrame(rows)


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def _plot(n_families: int, out, monkeypatch) -> tuple[list[str], dict]:
    """report._plots on a frame of ``n_families`` families: (plot names, figure by name)."""
    figures = {}
    save = report._save_png

    def keep(fig, path):
        figures[path.name] = fig
        save(fig, path)

    monkeypatch.setattr(report, "_save_png", keep)
    return report._plots(_frame(n_families), out), figures


@pytest.mark.parametrize("n_families", [3, 20, 50])
def test_plots_are_readable_and_tell_every_family_apart(tmp_path, monkeypatch, n_families):
    names, figures = _plot(n_families, tmp_path, monkeypatch)
    assert names == ["pred_vs_meas_decode.png", "residuals_decode.png",
                     "pred_vs_meas_prefill.png", "residuals_prefill.png"]  # fmt: skip
    families = [f"family-{f:02d}" for f in range(n_families)]
    for name in names:
        assert _png_size((tmp_path / name).read_bytes()) == (1800, 1200)  # 12 x 8 in at 150 dpi
        fig = figures[name]
        ax = fig.axes[0]
        legend = ax.get_legend()
        labels = [t.get_text() for t in legend.get_texts()]
        assert labels[2:] == families  # one entry per family, after the two reference lines
        assert labels[:2] in (["±25% of measured", "y = x (exact)"], ["prediction ±25%", "0 (exact)"])
        # each family its own (colour, marker) pair
        looks = {(tuple(np.round(c.get_facecolor()[0], 3)), c.get_paths()[0].vertices.tobytes())
                 for c in ax.collections if c.get_label() in families}  # fmt: skip
        assert len(looks) == n_families
        # the legend is drawn inside the figure, beside the axes (not over the points)
        fig.canvas.draw()
        box, frame, axes = legend.get_window_extent(), fig.bbox, ax.get_window_extent()
        assert box.x0 >= axes.x1 and box.x1 <= frame.x1 + 1 and box.y0 >= frame.y0 - 1
        assert "(tokens/s)" in ax.get_xlabel() or "(GiB)" in ax.get_xlabel()
        assert ax.get_ylabel()


def test_pred_vs_meas_draws_y_equals_x_and_the_25_percent_band(tmp_path, monkeypatch):
    _, figures = _plot(2, tmp_path, monkeypatch)
    ax = figures["pred_vs_meas_decode.png"].axes[0]
    (line,) = [ln for ln in ax.get_lines() if ln.get_label() == "y = x (exact)"]
    x, y = line.get_data()
    assert list(x) == list(y)
    (band,) = [c for c in ax.collections if c.get_label() == "±25% of measured"]
    v = band.get_paths()[0].vertices
    ratio = v[:, 1] / v[:, 0]  # predicted / measured along the band's edges
    assert ratio.min() == pytest.approx(0.75) and ratio.max() == pytest.approx(1.25)
    assert ax.get_xlabel() == "measured speed (tokens/s)"
    assert ax.get_ylabel() == "predicted speed, held out (tokens/s)"
