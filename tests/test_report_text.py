"""The terminal report: compact fixed-width tables that fit the terminal, wrapping, the per-row fallback."""

import pytest

from estimator.catalog.data import all_hardware, get_hardware, get_model
from estimator.catalog.rates import load_cloud_rates
from estimator.physics.coefficients import load_coefficients
from estimator.physics.quant import get_quant
from estimator.render.blocks import Table
from estimator.render.text import fit_widths, layout, table_lines
from estimator.report.document import blocks as report_sections
from estimator.report.document import build_report, report_to_dict
from estimator.report.document import to_text as render_text
from estimator.report.units import ReportOptions
from estimator.specs import Workload

OPTS = ReportOptions(hardware_catalog=tuple(all_hardware()), rates=load_cloud_rates())


@pytest.fixture(scope="module")
def glm():
    return report_to_dict(
        build_report(
            get_model("glm-4.5"),
            get_hardware("mi300x"),
            get_quant("Q4_K_M"),
            Workload(n_ctx=8192),
            load_coefficients(None),
            OPTS,
        )
    )


def _plain(lines):
    return ["".join(t for t, _ in line) for line in lines]


@pytest.mark.parametrize("width", [80, 100, 140])
def test_every_line_fits_the_width(glm, width):
    commands = {x for s in report_sections(glm) for _, text in s.code for x in text.splitlines()}
    for line in render_text(glm, width).splitlines():
        assert len(line) <= width or line in commands, (width, line)


def test_same_numbers_as_markdown_tables(glm):
    text = render_text(glm, 250)  # wide enough that no cell wraps
    for s in report_sections(glm):
        assert s.title in text
        for t in s.tables:
            for row in t.rows:
                for cell in row:
                    for word in cell.split():
                        assert word in text, (s.key, cell)


def test_table_aligns_numbers_right_and_wraps_text():
    t = Table(["name", "GiB", "why"], [["a", "1.50", "short"], ["bb", "12.25", "a much longer reason " * 3]])
    lines = _plain(table_lines(t, 40))
    assert all(len(x) <= 40 for x in lines)
    row_a = next(x for x in lines if x.startswith(" a "))
    row_b = next(x for x in lines if x.startswith(" bb "))
    assert row_a.index("1.50") + 4 == row_b.index("12.25") + 5  # numbers right-aligned
    assert sum("reason" in x for x in lines) >= 2  # the text column wrapped over several lines


def test_too_wide_table_falls_back_to_one_block_per_row():
    headers = [f"column{i}" for i in range(12)]
    t = Table(headers, [[f"value{i}" for i in range(12)]])
    assert fit_widths(t.headers, t.rows, 60) is None
    lines = _plain(table_lines(t, 60))
    assert lines[0].strip() == "value0" and "column5: value5" in "\n".join(lines)


def test_styles_mark_verdicts_and_uncalibrated(glm):
    segs = [seg for line in layout(report_sections(glm), 100) for seg in line]
    assert ("no", "bold red") in [(t.strip(), s) for t, s in segs]  # the "fits" column of a table
    if not glm["speed"]["calibrated"]:
        assert ("UNCALIBRATED", "bold yellow") in segs


def test_rich_console_output_matches_plain(glm):
    import io

    from rich.console import Console

    from estimator.report.document import print_text as print_report

    buf = io.StringIO()
    print_report(glm, Console(file=buf, width=90, color_system=None, force_terminal=False))
    assert buf.getvalue() == render_text(glm, 90)


def test_quant_matrix_fits_80_columns_as_a_table(glm):
    """The quant matrix stays a table at 80 columns: one header rule, a row starting with each quant."""
    text = render_text(glm, 80)
    section = text[text.index("Quantization matrix") : text.index("Speed (estimated)")]
    import re

    rules = [x for x in section.splitlines() if x.startswith(" ─")]
    assert len(rules) == 1 and len(rules[0].split()) == 7  # one table of 7 columns, not a block per row
    for r in glm["quant_matrix"]:
        assert any(line.startswith(f" {r['quant']} ") for line in section.splitlines()), r["quant"]
    assert re.search(r"\d \(\d[\d.,]*–\d", section)  # the interval shares the cell: "31.4 (3.75–120)"
    assert re.search(r" \d× \w", section)  # cheapest fit as "4× device"


def test_long_ids_split_at_hyphens():
    from estimator.render.text import _wrap

    assert _wrap("4× atlas-300i-duo-96gb", 14) == ["4× atlas-300i-", "duo-96gb"]
    assert _wrap("docs.nvidia.com/nemo/megatron-bridge/latest", 20)[0].endswith("/")


def test_markdown_escapes_html_and_pipes_outside_code():
    """A GGUF name or path holding HTML renders as text in every Markdown cell, heading and line (issue 17:
    5); commands stay literal inside a fence no backtick run can close."""
    from estimator.render.blocks import Block, Table
    from estimator.render.markdown import render_markdown

    evil = "<script>alert(1)</script><img src=x onerror=alert(2)> & | x"
    block = Block(
        key="t",
        title=f"Sizing {evil}",
        lines=[f"model {evil}"],
        tables=[Table([f"h {evil}"], [[f"cell {evil}"]], f"cap {evil}")],
        code=[(f"run {evil}", "llama-server -m '/tmp/```\n<svg onload=x>'")],
        notes=[f"note {evil}"],
    )
    md = render_markdown([block])
    prose = md.split("````bash")[0] + md.split("````bash")[1].split("````")[1]
    assert "<script" not in prose and "<img" not in prose and "&lt;script&gt;" in prose
    assert "&amp; \\| x |" in md  # cells: & escaped, the pipe too
    assert "````bash\nllama-server -m '/tmp/```\n<svg onload=x>'\n````" in md  # literal, fenced by 4


def test_byte_amounts_too_small_for_gib_print_in_mib():
    """A 4 MB shortfall is '4.07 MiB (4.26 MB)', not '0.00 GiB' (gpt-oss-120b Q4_K_M on an RTX 5090 with
    --n-cpu-moe 24 at 32K: 4,264,540 B over); zero stays in GiB."""
    from estimator.render.blocks import both

    assert both(4_264_540) == "4.07 MiB (4.26 MB)"
    assert both(0) == "0.00 GiB (0.00 GB)"
    assert both(2**30) == "1.00 GiB (1.07 GB)"
    assert both(None) == "–"
