"""The RM's live page: static assets served by rm.http (no code)."""
