"""The `nvgg` command and `python -m nvgg`. For a command that runs rows, its first worker starts
here, before this process imports torch and the commands (isolation.prespawn), then the app runs."""

import sys


def main() -> None:
    from . import isolation
    isolation.prespawn(sys.argv[1:])
    from .cli import run
    run()


if __name__ == "__main__":
    main()
