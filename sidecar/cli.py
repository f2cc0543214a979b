"""The `skiff` command."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path

from .settings import HostPort, Settings


def _env(name: str, default: str | None) -> str | None:
    return os.environ.get(f"SKIFF_{name}", default)


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _hostport(text: str) -> HostPort:
    try:
        return HostPort.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="skiff", description="Kafka protocol on Redis Streams")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the Kafka listener (every flag also reads SKIFF_*)")
    serve.add_argument(
        "--listen",
        type=_hostport,
        default=_env("LISTEN", "127.0.0.1:9092"),
        help="HOST:PORT to listen on (SKIFF_LISTEN; default 127.0.0.1:9092)",
    )
    serve.add_argument(
        "--advertise",
        type=_hostport,
        default=_env("ADVERTISE", None),
        help="HOST:PORT Metadata gives clients (SKIFF_ADVERTISE; default: listen)",
    )
    serve.add_argument(
        "--redis-url",
        default=_env("REDIS_URL", None),
        help="Redis to use, e.g. redis://host:6379/0 (SKIFF_REDIS_URL); without "
        "it Skiff runs a private redis-server with AOF in --data-dir",
    )
    serve.add_argument(
        "--data-dir",
        type=Path,
        default=Path(_env("DATA_DIR", "skiff-data") or ""),
        help="where the embedded redis-server keeps its data (SKIFF_DATA_DIR)",
    )
    serve.add_argument(
        "--auto-create-topics",
        type=_bool,
        default=_env("AUTO_CREATE_TOPICS", "true"),
        help="auto.create.topics.enable (SKIFF_AUTO_CREATE_TOPICS; default true)",
    )
    serve.add_argument(
        "--num-partitions",
        type=int,
        default=_env("NUM_PARTITIONS", "1"),
        help="partitions of auto-created topics (SKIFF_NUM_PARTITIONS; default 1)",
    )
    serve.add_argument(
        "--max-request-bytes",
        type=int,
        default=_env("MAX_REQUEST_BYTES", str(100 * 1024 * 1024)),
        help="largest request frame accepted (SKIFF_MAX_REQUEST_BYTES)",
    )
    serve.add_argument(
        "--message-timestamp-type",
        choices=["CreateTime", "LogAppendTime"],
        default=_env("MESSAGE_TIMESTAMP_TYPE", "CreateTime"),
        help="log.message.timestamp.type (SKIFF_MESSAGE_TIMESTAMP_TYPE)",
    )
    serve.add_argument(
        "--log-level",
        default=_env("LOG_LEVEL", "INFO"),
        help="DEBUG, INFO, WARNING (SKIFF_LOG_LEVEL)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.command == "serve":
        if isinstance(args.auto_create_topics, str):
            args.auto_create_topics = _bool(args.auto_create_topics)
        settings = Settings(
            listen=args.listen if isinstance(args.listen, HostPort) else _hostport(args.listen),
            advertise=(
                args.advertise
                if args.advertise is None or isinstance(args.advertise, HostPort)
                else _hostport(args.advertise)
            ),
            redis_url=args.redis_url,
            data_dir=args.data_dir,
            auto_create_topics=args.auto_create_topics,
            num_partitions=int(args.num_partitions),
            max_request_bytes=int(args.max_request_bytes),
            message_timestamp_type=args.message_timestamp_type,
        )
        from .app import serve

        try:
            asyncio.run(serve(settings))
        except RuntimeError as exc:
            logging.getLogger("skiff").error("%s", exc)
            return 1
        except KeyboardInterrupt:
            pass
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
