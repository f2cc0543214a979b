"""The Redis layer: every Redis command Skiff sends lives in this package."""
