"""Kafka's classic consumer-group protocol: group state (state.py), the coordinator
that runs it (coordinator.py) and the consumer protocol's subscription format."""
