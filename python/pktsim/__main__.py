import sys

try:
    from .cli import main
except KeyboardInterrupt:  # Ctrl-C while starting up
    print("pktsim: interrupted", file=sys.stderr)
    sys.exit(130)

sys.exit(main())
