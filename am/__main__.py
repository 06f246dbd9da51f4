"""``python -m am``: the ApplicationMaster host process (``am.server.main``)."""

from am.server.main import main

if __name__ == "__main__":
    main()
