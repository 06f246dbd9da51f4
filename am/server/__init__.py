"""The ApplicationMaster host process: its gRPC client loop around ``am.core`` and
``python -m am``."""
