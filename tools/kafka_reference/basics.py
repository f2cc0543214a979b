"""ApiVersions, Metadata, and versions or APIs a broker does not support."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import cache
from typing import Any

from rawkafka import (
    ConnectionClosed,
    encode,
    fetch_request,
    list_offsets_request,
    make_request,
    metadata_request,
    produce_request,
    request_type,
)

from .compare import Masked
from .constants import API_VERSIONS, FETCH, INIT_PRODUCER_ID, LIST_OFFSETS, METADATA, PRODUCE, RUN
from .talk import (
    SetupError,
    Side,
    add,
    api_versions_body,
    ask,
    ask_and_watch,
    data_topic,
    make_topic,
    metadata_topic,
    small_batch,
    topic,
    wait_topic,
)


def api_versions_scenarios() -> None:
    def normal(version: int) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            answer = ask(side, API_VERSIONS, version, api_versions_body())
            if isinstance(answer, dict):  # the ranges are compared in api_versions.ranges
                answer["api_keys"] = Masked("api ranges", f"{len(answer['api_keys'])} APIs")
            return answer

        return run

    for v in range(6):
        add(f"api_versions.v{v}", normal(v))

    def naming(**named: Any) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:  # KIP-1242 (Kafka 4.4): the cluster and node meant
            return ask(side, API_VERSIONS, 5, {**api_versions_body(), **named})

        return run

    add("api_versions.v5.other_cluster", naming(cluster_id="other", node_id=1), "REBOOTSTRAP")
    add("api_versions.v5.cluster_only", naming(cluster_id="other"), "INVALID_REQUEST")

    def ranges(side: Side) -> Any:
        answer = ask(side, API_VERSIONS, 3, api_versions_body())
        if not isinstance(answer, dict):
            return answer
        return {
            api_name(a["api_key"]): f"{a['min_version']}-{a['max_version']}"
            for a in answer["api_keys"]
        }

    add("api_versions.ranges", ranges, "the advertised version range of every API")

    def bad_name(side: Side) -> Any:
        answer = ask(side, API_VERSIONS, 3, api_versions_body("bad name!", "1.0"))
        if isinstance(answer, dict) and len(answer["api_keys"]) > 1:
            answer["api_keys"] = Masked("api ranges", f"{len(answer['api_keys'])} APIs")
        return answer

    add("api_versions.v3.bad_software_name", bad_name, "client_software_name 'bad name!'")

    def unsupported(version: int) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:  # a version kio lacks takes raw bytes: a v4 body
            body = encode(make_request(API_VERSIONS, 4, api_versions_body()))
            return ask_and_watch(side, API_VERSIONS, version, body, decode_as=0)

        return run

    add("api_versions.v6.unsupported", unsupported(6), "answer decoded as v0")
    add("api_versions.v127.unsupported", unsupported(127), "answer decoded as v0")


@cache
def api_name(api_key: int) -> str:
    for v in range(20):
        try:
            return f"{request_type(api_key, v).__module__.split('.')[2]}({api_key})"
        except Exception:
            continue
    return f"api({api_key})"


def meta_topic(side: Side) -> str:
    make_topic(side, topic("meta"))
    return topic("meta")


def metadata_scenarios() -> None:
    def existing(version: int) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            name = side.fixture("meta", meta_topic)
            return ask(side, METADATA, version, metadata_request([name], False))

        return run

    def auto_created(version: int) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            name = topic(f"meta-auto-v{version}")
            first = ask(side, METADATA, version, metadata_request([name], True))
            try:
                settled: Any = wait_topic(side, name, 1, timeout=10)
                settled = {k: settled[k] for k in ("error_code", "partitions")}
            except SetupError as exc:
                settled = str(exc)
            return {"first_answer": first, "settled_v12": settled}

        return run

    def not_created(version: int) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            name = topic(f"meta-none-v{version}")
            answer = ask(side, METADATA, version, metadata_request([name], False))
            time.sleep(0.5)
            exists = metadata_topic(side, name)["error_code"] != 3
            return {"answer": answer, "topic_exists_after": exists}

        return run

    def invalid(version: int) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            return ask(side, METADATA, version, metadata_request(["bad name!"], True))

        return run

    def all_topics(version: int) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            name = topic(f"meta-all-v{version}")
            make_topic(side, name)
            answer = ask(side, METADATA, version, metadata_request(None))
            if isinstance(answer, dict):  # other scenarios' topics come and go: keep ours
                topics = answer.pop("topics")
                answer["this_topic"] = [t for t in topics if t["name"] == name]
                answer["topics_not_from_this_run"] = sorted(
                    t["name"] for t in topics if not t["name"].startswith(RUN)
                )
            return answer

        return run

    for v in (1, 4, 9, 12):
        add(f"metadata.v{v}.existing", existing(v))
        add(
            f"metadata.v{v}.missing_autocreate",
            auto_created(v),
            "first answer, then Metadata v12 polled until the topic is led",
        )
        add(
            f"metadata.v{v}.missing_no_autocreate",
            not_created(v),
            "v1-v3 have no allow_auto_topic_creation (always true)" if v < 4 else "",
        )
        add(f"metadata.v{v}.invalid_name", invalid(v), "topic 'bad name!', auto-create on")
        add(f"metadata.v{v}.all_topics", all_topics(v), "null topic list")


def unsupported_scenarios() -> None:
    """Versions above Skiff's range: does each side answer, and does it close?"""

    def produce(version: int) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            data = side.fixture("data", data_topic)
            body = produce_request(data.name, {0: small_batch()})
            body["topic_data"][0]["topic_id"] = data.topic_id  # v13+ names topics by id
            return ask_and_watch(side, PRODUCE, version, body)

        return run

    def fetch(version: int) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            data = side.fixture("data", data_topic)
            body = fetch_request(data.name, {0: 0}, data.topic_id)
            return ask_and_watch(side, FETCH, version, body)

        return run

    def other(api_key: int, version: int, body: dict[str, Any]) -> Callable[[Side], Any]:
        return lambda side: ask_and_watch(side, api_key, version, body)

    for v in (12, 13):
        add(f"produce.v{v}.unsupported", produce(v), "(writes to the data topic if accepted)")
    for v in (16, 17, 18):
        add(f"fetch.v{v}.unsupported", fetch(v))
    add("metadata.v13.unsupported", other(METADATA, 13, metadata_request([topic("meta")], False)))
    add(
        "list_offsets.v9.unsupported",
        other(LIST_OFFSETS, 9, list_offsets_request(topic("data"), {0: -1})),
    )
    add(
        "init_producer_id.v5.unsupported",
        other(INIT_PRODUCER_ID, 5, {"transactional_id": None, "transaction_timeout": 60_000}),
    )

    def unknown_api(side: Side) -> Any:
        with side.connect() as client:
            client.send(9999, 0, b"")
            try:
                client.recv_raw()
                answer = "answered"
            except ConnectionClosed:
                answer = "connection closed, no answer"
            except TimeoutError:
                answer = "no answer"
        return answer

    add("unknown_api_key.9999", unknown_api, "API key 9999 v0 with an empty body")
