"""Thin shim so that legacy tools (``python setup.py develop``) keep working.

All metadata lives in ``pyproject.toml``.
"""
from setuptools import setup

setup()
