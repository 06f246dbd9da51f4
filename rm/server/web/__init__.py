"""The RM's live page: static assets served by rm.server.http (no code)."""
