"""Thin adapters that drive real Kafka client libraries with one common API."""
