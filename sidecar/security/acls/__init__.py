"""ACLs and Kafka's StandardAuthorizer: the binding model and filters (model.py), the
in-memory index that answers a check with no Redis round trip (index.py), and the
authorizer that keeps that index current from Redis (authorizer.py; the Redis side is
sidecar/storage/acl_store.py)."""
