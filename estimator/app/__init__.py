"""Entry points: the command line, the local sizing page and the CSV prediction interface.
"""
