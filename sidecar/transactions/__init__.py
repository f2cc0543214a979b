"""Kafka transactions: the coordinator (docs/transactions.md)."""
