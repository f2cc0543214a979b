"""The Skiff console under /console on the HTTP listener (docs/console.md)."""
