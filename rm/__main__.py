"""``python -m rm``: the ResourceManager process (``rm.server.main``)."""

from rm.server.main import main

if __name__ == "__main__":
    main()
