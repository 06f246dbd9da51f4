"""``python -m nm``: the NodeManager process (``nm.server.main``)."""

from nm.server.main import main

if __name__ == "__main__":
    main()
