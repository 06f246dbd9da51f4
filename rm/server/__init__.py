"""The ResourceManager process: gRPC servicers and the admin service (thin adapters over
``rm.core``), the SQLite state store, the HTTP port and its web assets, and
``python -m rm``."""
