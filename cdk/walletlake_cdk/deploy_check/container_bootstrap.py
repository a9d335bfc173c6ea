"""Run a module as the image's ``python -m`` would, with the image's ``sys.path`` and nothing else.

Standard library only. Usage: ``python -I -S container_bootstrap.py PATHS_JSON MODULE ARGS…``:
``PATHS_JSON`` is the image's ``PYTHONPATH`` entries then its site-packages (as folders of the
image root built by the deploy check); ``-I`` would ignore ``PYTHONPATH``, so it goes on
``sys.path`` here, ahead of the standard library, as the interpreter would put it.
"""

from __future__ import annotations

import json
import runpy
import sys


def main() -> None:
    paths = json.loads(sys.argv[1])
    module = sys.argv[3] if sys.argv[2] == "-m" else sys.argv[2]
    arguments = sys.argv[4:] if sys.argv[2] == "-m" else sys.argv[3:]
    stdlib = [path for path in sys.path if path]
    sys.path[:] = [*paths, *stdlib]
    sys.argv = [module, *arguments]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
