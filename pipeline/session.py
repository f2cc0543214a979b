"""A SparkSession with what Skiff's paths need: Spark's Kafka connector jars (Maven
Central, cached) on `spark.jars`, this interpreter for the Python workers, and the
`skiff` data source registered."""

from __future__ import annotations

import os
import sys
from typing import Any

from .spark_jars import spark_jars_conf


def local_session(master: str = "local[2]", app: str = "skiff", **conf: Any) -> Any:
    from pyspark.sql import SparkSession

    # Python workers default to `python3` on PATH, which may lack pyarrow and this package.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.jars", spark_jars_conf())
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")  # 200 tiny tasks cost seconds per batch
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
    )
    for key, value in conf.items():
        builder = builder.config(key.replace("_", "."), value)
    spark = builder.getOrCreate()
    register(spark)
    return spark


def register(spark: Any) -> None:
    """Makes `spark.read.format("skiff")` and friends available in this session."""
    from .skiff_source import SkiffDataSource

    spark.dataSource.register(SkiffDataSource)
