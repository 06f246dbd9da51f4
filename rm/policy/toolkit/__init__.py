"""The policy toolkit: orders, queue trees, stage orders, shares, packing and the indexes
that keep them current, from which the built-in policies are made. Plugins import these
through ``rm.policy``."""
