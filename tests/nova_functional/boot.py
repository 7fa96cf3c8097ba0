"""The interpreter stestr starts, when nova's tests run against placement_lite.

stestr runs each worker as `$PYTHON -m stestr.subunit_runner.run ...`
(the same variable nova's coverage job sets). The runner sets
PYTHON="<python> -m tests.nova_functional.boot", so each worker runs

    python -m tests.nova_functional.boot -m stestr.subunit_runner.run discover ...

which applies nova's eventlet patching as nova/tests/__init__.py would
(before anything imports the modules it patches), points Placement's
fixture at placement_lite (hook.install), then runs the module it was
given exactly as `python -m` would have.
"""
from __future__ import annotations

import runpy
import sys


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[0] != "-m":
        raise SystemExit("usage: python -m tests.nova_functional.boot -m MODULE [ARGS...]")
    # The first import of nova.tests does this too; it must come before
    # the hook imports requests and oslo (patching is a no-op when done).
    from nova import monkey_patch
    monkey_patch.patch()
    from tests.nova_functional import hook
    hook.install()
    sys.argv = [argv[1]] + argv[2:]
    runpy.run_module(argv[1], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
