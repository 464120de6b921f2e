"""Report writers: summary figures, tensor tables and CSV files (pure Python, SI units).

The GUI draws the PNGs; both the window's File > Save report and ``rooflab report`` write
these CSVs through it."""

from __future__ import annotations

from rooflab.core.report.csv_files import (
    CURVE_COLUMNS,
    SUMMARY_COLUMNS,
    TENSOR_COLUMNS,
    curves_csv,
    header_lines,
    slug,
    summary_csv,
    tensors_csv,
    write_text,
)
from rooflab.core.report.summary import Clocks, Summary, summary_rows
from rooflab.core.report.tables import GroupRow, TensorRow, grouped_rows, tensor_row

__all__ = [
    "CURVE_COLUMNS",
    "SUMMARY_COLUMNS",
    "TENSOR_COLUMNS",
    "Clocks",
    "GroupRow",
    "Summary",
    "TensorRow",
    "curves_csv",
    "grouped_rows",
    "header_lines",
    "slug",
    "summary_csv",
    "summary_rows",
    "tensor_row",
    "tensors_csv",
    "write_text",
]
