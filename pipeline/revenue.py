"""The sample Structured Streaming job: revenue per product in event-time windows with a
watermark, from order events in a Skiff topic to an output topic and to Parquet.

As a script (spark-submit against a Skiff deployment, docs/spark.md):

    spark-submit --py-files skiff_pipeline.zip pipeline/revenue.py \
        --bootstrap skiff:9092 --redis-url redis://redis:6379/0 \
        --input orders --output revenue --parquet s3a://bucket/revenue \
        --checkpoint s3a://bucket/checkpoints/revenue [--source kafka] [--trigger-seconds 10]
        [--once]
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

# decimal prices: sums of money stay exact (a double sum drifts in the last digits)
ORDER_SCHEMA = (
    "order_id string, product string, quantity int, price decimal(10,2), event_time timestamp"
)


@dataclass
class Job:
    bootstrap: str  # a Skiff sidecar (writes, and reads with source=kafka)
    redis_url: str | None  # Skiff's Redis: the skiff source reads the streams directly
    input_topic: str
    output_topic: str
    parquet_dir: str
    checkpoint_dir: str
    source: str = "skiff"  # skiff (Python data source) or kafka (Spark's Kafka connector)
    window: str = "1 minute"
    watermark: str = "2 minutes"
    max_records_per_trigger: int = 0


def orders_stream(spark: Any, job: Job) -> Any:
    from pyspark.sql import functions as F

    if job.source == "kafka":
        raw = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", job.bootstrap)
            .option("subscribe", job.input_topic)
            .option("startingOffsets", "earliest")
        )
        if job.max_records_per_trigger:
            raw = raw.option("maxOffsetsPerTrigger", job.max_records_per_trigger)
    else:
        raw = (
            spark.readStream.format("skiff")
            .option("kafka.bootstrap.servers", job.bootstrap)
            .option("topics", job.input_topic)
            .option("startingOffsets", "earliest")
        )
        if job.redis_url:
            raw = raw.option("redis.url", job.redis_url)
        if job.max_records_per_trigger:
            raw = raw.option("maxRecordsPerTrigger", job.max_records_per_trigger)
    return (
        raw.load()
        .select(F.from_json(F.col("value").cast("string"), ORDER_SCHEMA).alias("o"))
        .select("o.*")
    )


def revenue(orders: Any, job: Job) -> Any:
    from pyspark.sql import functions as F

    return (
        orders.withWatermark("event_time", job.watermark)
        .groupBy(F.window("event_time", job.window), "product")
        .agg(
            F.sum(F.col("quantity") * F.col("price")).alias("revenue"),
            F.count("*").alias("orders"),
            F.sum("quantity").alias("quantity"),
        )
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "product",
            "revenue",
            "orders",
            "quantity",
        )
    )


def start(spark: Any, job: Job, trigger: dict[str, Any]) -> list[Any]:
    """Two queries over the same aggregation, each with its own checkpoint: the Parquet
    file sink (exactly once) and the output topic (at least once, as any Kafka sink)."""
    from pyspark.sql import functions as F

    aggregates = revenue(orders_stream(spark, job), job)
    to_parquet = (
        aggregates.writeStream.format("parquet")
        .option("path", job.parquet_dir)
        .option("checkpointLocation", f"{job.checkpoint_dir}/parquet")
        .outputMode("append")
        .trigger(**trigger)
        .queryName(f"revenue-parquet-{job.output_topic}")
        .start()
    )
    as_records = aggregates.select(
        F.col("product").alias("key"),
        F.to_json(F.struct(*aggregates.columns)).alias("value"),
    )
    sink = (
        as_records.writeStream.format("skiff" if job.source == "skiff" else "kafka")
        .option("kafka.bootstrap.servers", job.bootstrap)
        .option("topic", job.output_topic)
        .option("checkpointLocation", f"{job.checkpoint_dir}/topic")
        .outputMode("append")
        .trigger(**trigger)
        .queryName(f"revenue-topic-{job.output_topic}")
    )
    return [to_parquet, sink.start()]


def run(spark: Any, job: Job, trigger_seconds: float = 0, follow: bool = False) -> list[Any]:
    """Runs the job. Without `follow`, until it has caught up with the input topic, then
    stops: processAllAvailable() returns once a trigger finds neither new records nor a
    watermark move, so the no-data batch that emits the windows the final watermark closed
    has run (trigger availableNow stops after the last batch with data, before it). With
    `follow`, runs until stopped."""
    queries = start(spark, job, {"processingTime": f"{trigger_seconds} seconds"})
    if follow:
        for query in queries:
            query.awaitTermination()
        return queries
    for query in queries:
        query.processAllAvailable()
        query.stop()
        if query.exception() is not None:
            raise RuntimeError(f"{query.name} failed") from query.exception()
    return queries


def main() -> None:
    parser = argparse.ArgumentParser(description="revenue per product and window, from Skiff")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--redis-url")
    parser.add_argument("--input", default="orders")
    parser.add_argument("--output", default="revenue")
    parser.add_argument("--parquet", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--source", choices=("skiff", "kafka"), default="skiff")
    parser.add_argument("--trigger-seconds", type=float, default=10)
    parser.add_argument(
        "--once", action="store_true", help="stop once caught up with the input (default: run)"
    )
    args = parser.parse_args()
    from pyspark.sql import SparkSession

    from pipeline.session import register  # absolute: spark-submit runs this file as a script

    spark = SparkSession.builder.appName("skiff-revenue").getOrCreate()
    register(spark)
    job = Job(
        args.bootstrap,
        args.redis_url,
        args.input,
        args.output,
        args.parquet,
        args.checkpoint,
        args.source,
    )
    run(spark, job, args.trigger_seconds, follow=not args.once)


if __name__ == "__main__":
    main()
