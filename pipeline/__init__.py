"""Skiff on Spark: the `skiff` PySpark data source, the Kafka connector's jars, and a
sample event-time pipeline (docs/spark.md)."""
