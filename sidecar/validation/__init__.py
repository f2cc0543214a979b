"""What Skiff refuses, in one place, for every way in (the Kafka APIs, the HTTP API, UDP
ingest, the CLIs): topic names (topic_names), topic configs (topic_configs), record
batch sizes as Kafka counts them (record_sizes) and Produce's checks against a topic's
configs (produce_limits)."""
