"""Skiff: the Kafka protocol on Redis Streams."""
