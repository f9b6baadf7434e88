"""The native scanner of trace pieces (server/trace/_scan.c, read by server/trace/scan.py). Everything else
about the package is in pyproject.toml. Optional: where it cannot be built (no C compiler), the install
goes on without it and pieces are read by the Python reader, more slowly."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("profboard.server.trace._scan", ["server/trace/_scan.c"], optional=True)])
