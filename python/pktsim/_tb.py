"""``pktsim-tb``, the testbed's generator and sink, as the Python package's entry point: the
same Rust code as the standalone binary (``make install`` also builds that one), run
through the extension module, so that ``pip install`` brings it along."""

from __future__ import annotations

import sys


def main() -> None:
    from . import _core

    sys.stdout.flush()
    sys.exit(_core.testbed_main(sys.argv[1:]))


if __name__ == "__main__":
    main()
