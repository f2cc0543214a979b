"""The sidecar process: start-up, the embedded Redis, --workers."""
