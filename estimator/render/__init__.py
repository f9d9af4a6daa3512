"""Presentation kit: number formats, text and Markdown blocks, HTML helpers, SVG charts, i18n, style.
"""
