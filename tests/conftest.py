import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

# Tests send Ctrl-C (SIGINT) to pktsim processes they start. A test run started in the
# background without job control (`make test &` in a script, nohup) inherits SIGINT
# ignored, and so would every pktsim it starts: Python installs no handler for a signal
# ignored at its start. A handler here makes the children start with the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def run_cli(*args, check=True):
    """Run the installed ``pktsim`` command as a user would."""
    proc = subprocess.run([sys.executable, "-m", "pktsim", *map(str, args)], capture_output=True, text=True, cwd=ROOT)
    if check and proc.returncode != 0:
        raise AssertionError(f"pktsim {' '.join(map(str, args))} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


@pytest.fixture
def cli():
    return run_cli
