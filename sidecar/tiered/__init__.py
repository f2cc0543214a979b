"""Tiered storage (KIP-405): a topic with remote.storage.enable keeps its recent batches
in Redis and older ones as segment objects in an object store (docs/architecture.md,
"Tiered storage")."""
