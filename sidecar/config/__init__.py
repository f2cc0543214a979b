"""Configuration: flags, server.properties, broker and topic configs."""
