"""Unit tests of the oprates package (stdlib unittest, synthetic logs in temp dirs).

Run from the repository root:
    python3 -m unittest discover -s scripts/oprates/tests -t scripts
"""
