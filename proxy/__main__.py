"""`python -m proxy` and the `mrtr-bridge` script: the command line in `proxy.app.cli`."""

from proxy.app.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
