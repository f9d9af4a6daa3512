"""The sizing report: its sections, each one unit with its builder and renderings, and their assembly.
"""
