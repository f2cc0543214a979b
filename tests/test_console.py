"""The console (sidecar/console/) in Debian's headless chromium driven by Selenium,
against a real sidecar on a real Redis: the numbers it shows equal what the Kafka
AdminClient (confluent-kafka) reports, records are shown with their exact keys, values
and headers (escaped), lag updates without a reload, redrive moves dead letters back,
10,000 topics page with a bounded number of Redis commands, and with security on the
console wants a login and shows only the topics the user may describe."""

from __future__ import annotations

import base64
import json
import os
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import known_secrets
import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic, ResourceType
from conftest import RedisServer, Skiff, start_redis, start_skiff, stop_process
from http_auth_setup import allow, basic, basic_auth_skiff
from share_raw import ShareMember
from telemetry_helpers import get_json, scrape
from telemetry_helpers import value as sample

from sidecar.storage import keys

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.wait import WebDriverWait  # noqa: E402

CHROMIUM = shutil.which("chromium")
DRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None or DRIVER is None,
    reason="chromium and chromium-driver are not installed (scripts/setup.sh --test)",
)
T0 = 1_700_000_000_000  # record i is produced with timestamp T0 + i
SCREENSHOTS = os.environ.get("SKIFF_CONSOLE_SCREENSHOTS")  # a directory: save PNGs there


def wait_until(what: str, check: Callable[[], Any], seconds: float = 30) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"not within {seconds:g}s: {what}")
        time.sleep(0.1)


def http(
    url: str, data: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, str]:
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Skiff, RedisServer]]:
    tmp = tmp_path_factory.mktemp("console")
    redis = start_redis(tmp / "redis")
    skiff = start_skiff(tmp / "skiff.log", "--redis-url", redis.url)
    try:
        yield skiff, redis
    finally:
        stop_process(skiff.proc)
        stop_process(redis.proc)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(arg)
    options.add_argument("--window-size=1200,900")
    driver = webdriver.Chrome(service=webdriver.ChromeService(DRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def follow(browser: Any, by: str, what: str) -> None:
    """Click a link or button that loads another page, and wait until it has: a click
    returns before the navigation ends, and under load the next read met the old page."""
    element = browser.find_element(by, what)
    element.click()
    WebDriverWait(browser, 60).until(expected_conditions.staleness_of(element))


def base(skiff: Skiff) -> str:
    return f"http://127.0.0.1:{skiff.http_port}/console"


def create(skiff: Skiff, name: str, partitions: int, fmt: str | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": skiff.bootstrap})
    config = {"skiff.storage.format": fmt} if fmt else {}
    for future in admin.create_topics([NewTopic(name, partitions, 1, config=config)]).values():
        future.result(timeout=30)


def produce(skiff: Skiff, topic: str, records: list[tuple[int, bytes, bytes, list[Any]]]) -> None:
    producer = Producer({"bootstrap.servers": skiff.bootstrap, "linger.ms": 0})
    for i, (partition, key, value, headers) in enumerate(records):
        producer.produce(topic, value, key, partition=partition, headers=headers, timestamp=T0 + i)
    assert producer.flush(30) == 0


def committing_consumer(skiff: Skiff, group: str) -> Any:
    """A consumer of `group` that commits only what the test commits."""
    return Consumer(
        {
            "bootstrap.servers": skiff.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )


def read_all(consumer: Any, count: int) -> None:
    """Polls until the consumer has been given `count` records."""
    got = []

    def all_read() -> bool:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message)
        return len(got) == count

    wait_until(f"the {count} records consumed", all_read, 60)


def cells(browser: Any, table_id: str) -> list[list[str]]:
    rows = browser.find_elements(By.CSS_SELECTOR, f"#{table_id} tbody tr")
    return [[td.text for td in row.find_elements(By.TAG_NAME, "td")] for row in rows]


def shot(browser: Any, name: str) -> None:
    if SCREENSHOTS:
        browser.save_screenshot(str(Path(SCREENSHOTS) / name))


def redis_size(client: Any, topic: str, partitions: int) -> int:
    """What the console reports as a topic's size: MEMORY USAGE of the keys that hold
    its partitions' records, asked here of Redis (or a Redis Cluster) directly."""
    return sum(
        int(client.memory_usage(key) or 0)
        for p in range(partitions)
        for key in keys.trim_keys(topic, p)
    )


def shown_size(used: int) -> str:
    return f"{used} B" if used < 1024 else f"{used / 1024:.1f} KiB"


@pytest.mark.parametrize("fmt", ["batch", "record"])
def test_topic_watermarks_and_records(server: Any, browser: Any, fmt: str) -> None:
    skiff, redis = server
    topic = f"console-{fmt}"
    create(skiff, topic, 2, fmt)
    records = [
        (0, b"k<1>", b'{"total": 12, "tag": "<b>&"}', [("source", b"unit & <test>")]),
        (0, b"k2", b"plain value", [("a", b"1"), ("b", b"")]),
        (1, b"k3", b"\x00\x01\xff", []),
    ]
    produce(skiff, topic, records)
    browser.get(f"{base(skiff)}/topics?q={topic}")
    used = redis_size(redis.client(), topic, 2)
    assert cells(browser, "topics") == [[topic, "2", "3", fmt, shown_size(used)]]
    size_cell = browser.find_element(By.CSS_SELECTOR, "#topics tbody td:nth-child(5) span")
    assert size_cell.get_attribute("title") == f"{used} bytes"
    follow(browser, By.LINK_TEXT, topic)
    consumer = Consumer({"bootstrap.servers": skiff.bootstrap, "group.id": "console-wm"})
    try:
        expected = [
            [str(p), *map(str, consumer.get_watermark_offsets(TopicPartition(topic, p), 30))]
            for p in range(2)
        ]
    finally:
        consumer.close()
    shown = cells(browser, "partitions")
    assert [row[:3] for row in shown] == expected
    follow(browser, By.LINK_TEXT, "0")
    rows = cells(browser, "records")
    assert [(r[0], r[2], r[3], r[4]) for r in rows] == [
        ("0", "k<1>", '{"total": 12, "tag": "<b>&"}', "source: unit & <test>"),
        ("1", "k2", "plain value", "a: 1\nb:"),
    ]
    follow(browser, By.LINK_TEXT, "json")
    pretty = json.dumps(json.loads(records[0][2]), indent=2)
    assert cells(browser, "records")[0][3] == pretty
    assert cells(browser, "records")[0][1] == "2023-11-14 22:13:20.000Z"  # T0
    browser.get(f"{base(skiff)}/topics/{topic}/records?partition=0&timestamp={T0 + 1}")
    assert [r[:3] for r in cells(browser, "records")] == [["1", "2023-11-14 22:13:20.001Z", "k2"]]
    browser.get(f"{base(skiff)}/topics/{topic}/records?partition=1&format=hex")
    assert [r[3] for r in cells(browser, "records")] == ["00 01 ff"]
    if fmt == "batch":
        browser.get(f"{base(skiff)}/topics/{topic}/records?partition=0")
        shot(browser, "console-records.png")
    browser.get(f"{base(skiff)}/topics/{topic}")
    produce(skiff, topic, [(1, b"k4", b"later", [])])  # the page updates itself

    def high_watermark_shown() -> str:
        return str(browser.find_element(By.CSS_SELECTOR, '[data-live="hw:1"]').text)

    wait_until("the new high watermark without a reload", lambda: high_watermark_shown() == "2")


def test_group_lag_matches_admin_and_updates_live(server: Any, browser: Any) -> None:
    skiff, _ = server
    topic, group = "console-lag", "console-lagging"
    create(skiff, topic, 2)
    produce(skiff, topic, [(p, b"k", b"v%d" % i, []) for i in range(5) for p in (0, 1)])
    consumer = committing_consumer(skiff, group)
    try:
        consumer.assign([TopicPartition(topic, 0, 2), TopicPartition(topic, 1, 4)])
        consumer.commit(
            offsets=[TopicPartition(topic, 0, 2), TopicPartition(topic, 1, 4)], asynchronous=False
        )
    finally:
        consumer.close()
    admin = AdminClient({"bootstrap.servers": skiff.bootstrap})
    futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    committed = {tp.partition: tp.offset for tp in futures[group].result(30).topic_partitions}
    assert committed == {0: 2, 1: 4}
    browser.get(f"{base(skiff)}/groups?q=lagging")
    assert cells(browser, "consumer-groups") == [[group]]
    browser.get(f"{base(skiff)}/groups/{group}")
    assert cells(browser, "lag") == [
        [topic, "0", "2", "5", "3"],
        [topic, "1", "4", "5", "1"],
    ]
    assert browser.find_element(By.ID, "total-lag").text == "4"
    produce(skiff, topic, [(0, b"k", b"more", [])] * 3)  # the page updates itself
    wait_until(
        "the lag shown grows without a reload",
        lambda: browser.find_element(By.ID, "total-lag").text == "7",
    )
    assert cells(browser, "lag")[0] == [topic, "0", "2", "8", "6"]
    shot(browser, "console-group.png")


def test_group_members_match_admin(server: Any, browser: Any) -> None:
    skiff, _ = server
    topic, group = "console-members", "console-live"
    create(skiff, topic, 3)
    consumer = Consumer(
        {"bootstrap.servers": skiff.bootstrap, "group.id": group, "client.id": "console-c1"}
    )
    try:
        consumer.subscribe([topic])
        admin = AdminClient({"bootstrap.servers": skiff.bootstrap})

        def stable() -> Any:
            consumer.poll(0.2)
            found = admin.describe_consumer_groups([group])[group].result(30)
            return found if found.state.name == "STABLE" and found.members else None

        described = wait_until("the group is stable", stable)
        (member,) = described.members
        browser.get(f"{base(skiff)}/groups/{group}")
        assert browser.find_element(By.ID, "state").text == "Stable"
        parts = ",".join(str(tp.partition) for tp in member.assignment.topic_partitions)
        assert cells(browser, "members") == [
            [member.member_id, "console-c1", member.host, f"{topic}({parts})"]
        ]
        assert parts == "0,1,2"
    finally:
        consumer.close()


def test_share_group_members(server: Any, browser: Any) -> None:
    skiff, _ = server
    topic, group = "console-shared", "console-share"
    create(skiff, topic, 2)
    member = ShareMember("127.0.0.1", skiff.port, group)
    try:
        joined = member.join([topic])
        epoch = joined.member_epoch
        [sent] = joined.assignment.topic_partitions  # what the coordinator gave the member
        assert sorted(sent.partitions) == [0, 1]
        browser.get(f"{base(skiff)}/groups?q=console-share")
        assert cells(browser, "queue-groups") == [[group]]
        browser.get(f"{base(skiff)}/queues/{group}")
        shown = cells(browser, "share-members")
        assert [(r[0], r[3], r[4], r[5]) for r in shown] == [
            (member.member_id, topic, str(epoch), f"{topic}(0,1)")
        ]
        assert f"epoch {epoch}" in browser.find_element(By.TAG_NAME, "main").text
    finally:
        member.close()


def test_dead_letters_redrive(server: Any, browser: Any) -> None:
    skiff, _ = server
    topic, dlq, group = "console-work", "console-work.dlq", "console-workers"
    create(skiff, topic, 1)
    create(skiff, dlq, 1)
    api = f"http://127.0.0.1:{skiff.http_port}/v1"

    def post(path: str, body: Any, method: str = "POST") -> Any:
        request = urllib.request.Request(
            api + path,
            json.dumps(body).encode(),
            {"Content-Type": "application/json"},
            method=method,
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read())

    post(f"/queues/{group}", {"dead_letter_topic": dlq, "auto_offset_reset": "earliest"}, "PUT")
    produce(skiff, topic, [(0, b"bad-%d" % i, b"poison <%d>" % i, [("h", b"x")]) for i in range(3)])
    got = post(
        f"/queues/{group}/records:read", {"topics": [topic], "max_records": 3, "worker": "w"}
    )
    refs = [{"topic": topic, "partition": 0, "offset": r["offset"]} for r in got["records"]]
    assert len(refs) == 3
    post(f"/queues/{group}/records:reject", {"worker": "w", "records": refs})
    browser.get(f"{base(skiff)}/groups")
    assert [group] in cells(browser, "queue-groups")
    browser.get(f"{base(skiff)}/queues/{group}")
    assert browser.find_element(By.ID, "dead-count").text == "3"
    dead = cells(browser, "dead-letters")
    assert [(r[2], r[3], r[4], r[5], r[7]) for r in dead] == [
        (f"bad-{i}", f"poison <{i}>", "rejected", topic, str(i)) for i in range(3)
    ]
    shot(browser, "console-dead-letters.png")
    follow(browser, By.ID, "redrive")
    assert browser.find_element(By.TAG_NAME, "h1").text == "Confirm redrive"
    consumer = Consumer({"bootstrap.servers": skiff.bootstrap, "group.id": "console-check"})
    try:  # nothing moved before the confirmation
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), 30) == (0, 3)
    finally:
        consumer.close()
    browser.find_element(By.ID, "confirm").click()
    result = wait_until(
        "the redrive answer", lambda: browser.find_elements(By.ID, "redrive-result")
    )
    assert result[0].text == "moved 3, passed over 0"
    consumer = Consumer({"bootstrap.servers": skiff.bootstrap, "group.id": "console-check"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), 30) == (0, 6)
    finally:
        consumer.close()
    browser.get(f"{base(skiff)}/queues/{group}")
    assert browser.find_element(By.ID, "dead-count").text == "0"
    assert not browser.find_elements(By.ID, "redrive")


def test_mistakes_are_one_clear_page(server: Any) -> None:
    skiff, _ = server
    url = f"{base(skiff)}/queues/console-workers/redrive"
    status, body = http(url, b"")
    assert status == 400 and "redrive must be confirmed (confirm=yes)" in body
    status, body = http(f"{base(skiff)}/topics?page=x")
    assert status == 400 and "page must be a number, got &#x27;x&#x27;" in body
    status, body = http(f"{base(skiff)}/topics/no-such-topic")
    assert status == 404 and "UNKNOWN_TOPIC_OR_PARTITION" in body
    status, _ = http(url, b"confirm=yes", {"Origin": "http://evil.example"})
    assert status == 403


def test_cluster_page(server: Any, browser: Any) -> None:
    skiff, redis = server
    browser.get(base(skiff))
    version = redis.client().info("server")["redis_version"]
    redis_rows = dict((r[0], r[1]) for r in cells(browser, "redis"))
    assert redis_rows["version"] == version
    assert redis_rows["persistence"].startswith("AOF off")
    admin = AdminClient({"bootstrap.servers": skiff.bootstrap})
    brokers = admin.describe_cluster().result(30).nodes
    assert [[str(b.id), b.host, str(b.port)] for b in brokers] == cells(browser, "sidecars")
    wait_until(
        "a chart sample",
        lambda: browser.find_element(By.TAG_NAME, "body").get_attribute("data-polled"),
    )
    assert browser.find_elements(By.CSS_SELECTOR, "#ops-chart canvas")
    if SCREENSHOTS:  # a few points on the charts

        def polled() -> bool:
            count = browser.find_element(By.TAG_NAME, "body").get_attribute("data-polled")
            return int(count or 0) >= 4

        wait_until("four chart samples", polled)
        shot(browser, "console-cluster.png")


def test_rates_summed_over_sidecars(server: Any, tmp_path: Path) -> None:
    """Traffic through another sidecar on the same Redis shows on this one's console:
    records produced (high watermarks) and fetched (the sidecars' counts in Redis).
    Last of the module's tests on `server`: the second sidecar moves partitions."""
    skiff, redis = server
    other = start_skiff(tmp_path / "other.log", "--redis-url", redis.url)
    try:
        admin = AdminClient({"bootstrap.servers": skiff.bootstrap})
        wait_until(
            "both sidecars in the cluster",
            lambda: len(admin.describe_cluster().result(30).nodes) == 2,
        )
        topic = "console-two-sidecars"
        create(skiff, topic, 4)  # two partitions led by each sidecar (bounded loads)
        produce(skiff, topic, [(p, b"k", b"v", []) for p in range(4) for _ in range(5)])
        consumer = Consumer(
            {
                "bootstrap.servers": other.bootstrap,
                "group.id": "console-two",
                "auto.offset.reset": "earliest",
            }
        )
        try:
            consumer.subscribe([topic])
            read_all(consumer, 20)
        finally:
            consumer.close()
        # each sidecar served part of the fetches and counts only its own
        here, there = (
            sample(scrape(s.http_port), "skiff_topic_records_out_total", topic=topic)
            for s in (skiff, other)
        )
        assert here > 0 and there > 0 and here + there == 20, (here, there)

        def live() -> Any:
            status, doc = get_json(skiff.http_port, f"/console/api/topics/{topic}")
            assert status == 200, doc
            return doc if doc["fetched"] == 20 else None

        doc = wait_until("both sidecars' fetches in this console", live)
        assert doc["log_end"] == 20
        assert redis.client().hget(keys.TOPIC_FETCHED, topic) == b"20"
        for future in admin.delete_topics([topic]).values():
            future.result(timeout=30)
        assert not redis.client().hexists(keys.TOPIC_FETCHED, topic)  # gone with the topic
    finally:
        stop_process(other.proc)


def test_ten_thousand_topics_bounded(tmp_path: Path, browser: Any) -> None:
    redis = start_redis(tmp_path / "redis")
    skiff = start_skiff(tmp_path / "skiff.log", "--redis-url", redis.url)
    try:
        admin = AdminClient({"bootstrap.servers": skiff.bootstrap})
        names = [f"t{i:05d}" for i in range(10_000)]
        # one request of 100 topics at a time: several in flight make a loaded
        # machine's sidecar time out on Redis ("Redis is unavailable")
        for i in range(0, len(names), 100):
            futures = admin.create_topics([NewTopic(n, 1, 1) for n in names[i : i + 100]])
            for future in futures.values():
                future.result(timeout=120)
        client = redis.client()
        client.config_resetstat()
        started = time.monotonic()
        browser.get(f"http://127.0.0.1:{skiff.http_port}/console/topics?page=3")
        took = time.monotonic() - started
        stats = client.info("commandstats")
        assert browser.find_element(By.ID, "count").text == "10000 topics, page 3 of 200"
        assert [r[0] for r in cells(browser, "topics")] == names[100:150]
        # 1 HKEYS, 1 HMGET of the page's topics, per topic shown an HMGET of watermarks
        # and 5 MEMORY USAGE (its size: log, meta, time, byte and aborted-transaction
        # index); the rest is the sidecar's own background (registration renewals) and
        # this INFO.
        assert stats["cmdstat_hkeys"]["calls"] == 1
        assert stats["cmdstat_hmget"]["calls"] <= 51 + 5
        assert stats["cmdstat_memory|usage"]["calls"] == 5 * 50
        total = sum(v["calls"] for v in stats.values())
        print(f"10,000 topics, page 3: {total} Redis commands, {took:.2f} s")  # -rP shows it
        assert total < 5 * 50 + 51 + 50, stats  # far from one per topic (10,000)
        assert took < 10, took
    finally:
        stop_process(skiff.proc)
        stop_process(redis.proc)


def test_on_redis_cluster(tmp_path: Path, browser: Any) -> None:
    """The pages on a 3+3 Redis Cluster: a topic's partitions in several slots, its size,
    records, a group's lag and the fetched count (each read routed to its node)."""
    from redis_cluster_harness import start_redis_cluster

    cluster = start_redis_cluster(tmp_path / "cluster")
    try:
        skiff = start_skiff(tmp_path / "skiff.log", "--redis-url", cluster.url)
        try:
            topic, group = "console-cluster", "console-cluster-group"
            create(skiff, topic, 6)
            produce(
                skiff, topic, [(p, b"k%d" % p, b"v%d" % i, []) for i in range(3) for p in range(6)]
            )
            consumer = committing_consumer(skiff, group)
            try:
                consumer.assign([TopicPartition(topic, p) for p in range(6)])
                read_all(consumer, 18)
                consumer.commit(
                    offsets=[TopicPartition(topic, p, 1) for p in range(6)], asynchronous=False
                )
            finally:
                consumer.close()
            browser.get(f"{base(skiff)}/topics?q={topic}")
            used = redis_size(cluster.client(), topic, 6)
            assert cells(browser, "topics") == [[topic, "6", "18", "batch", shown_size(used)]]
            browser.get(f"{base(skiff)}/topics/{topic}")
            assert [r[:4] for r in cells(browser, "partitions")] == [
                [str(p), "0", "3", "3"] for p in range(6)
            ]
            browser.get(f"{base(skiff)}/topics/{topic}/records?partition=4")
            assert [(r[0], r[2], r[3]) for r in cells(browser, "records")] == [
                (str(i), "k4", f"v{i}") for i in range(3)
            ]
            browser.get(f"{base(skiff)}/groups/{group}")
            assert cells(browser, "lag") == [[topic, str(p), "1", "3", "2"] for p in range(6)]

            def fetched() -> bool:
                status, doc = get_json(skiff.http_port, f"/console/api/topics/{topic}")
                assert status == 200, doc
                return doc["fetched"] == 18

            wait_until("the fetched count in the cluster", fetched)
            browser.get(base(skiff))
            redis_rows = dict((r[0], r[1]) for r in cells(browser, "redis"))
            assert redis_rows["mode"] == "cluster"
        finally:
            stop_process(skiff.proc)
    finally:
        cluster.stop()


USERS = {
    u: known_secrets.register(f"console password of {u}", f"{u}-Console-Pw-41b") for u in ("alice",)
}


def test_security_login_and_acls(tmp_path: Path, browser: Any) -> None:
    with basic_auth_skiff(tmp_path, USERS, "User:ANONYMOUS") as skiff:
        for name in ("alice-topic", "secret-topic"):
            create(skiff, name, 1)
        allow(skiff, "alice", ResourceType.TOPIC, "alice-topic", AclOperation.DESCRIBE)
        status, body = http(f"{base(skiff)}/topics")
        assert status == 401, body
        # the console's 401 is the login form, without the challenge that would make the
        # browser ask in its own dialog; the API still challenges
        assert challenge(f"{base(skiff)}/topics") is None
        assert challenge(f"http://127.0.0.1:{skiff.http_port}/v1/queues") == (
            'Basic realm="skiff", charset="UTF-8"'
        )
        assert 'id="login"' in body and "/static/" not in body
        wrong = basic("alice", "wrong")
        assert http(f"{base(skiff)}/topics", headers=wrong)[0] == 401
        as_alice = basic("alice", USERS["alice"])

        def topics_shown() -> str:
            status, body = http(f"{base(skiff)}/topics", headers=as_alice)
            assert status == 200, body
            return body

        body = wait_until(
            "alice's ACL applies", lambda: "alice-topic" in topics_shown() and topics_shown()
        )
        assert "secret-topic" not in body and "1 topics" in body
        status, body = http(f"{base(skiff)}/topics/secret-topic", headers=as_alice)
        assert status == 403 and "TOPIC_AUTHORIZATION_FAILED" in body
        login_in_browser(skiff, browser)


def challenge(url: str) -> str | None:
    """The WWW-Authenticate header of an unauthenticated GET (which must be a 401)."""
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(url, timeout=30)
    with refused.value:
        assert refused.value.code == 401
        return refused.value.headers.get("WWW-Authenticate")


def login_in_browser(skiff: Skiff, browser: Any) -> None:
    """The login form: a wrong password is refused; the right one gives a session
    cookie (HttpOnly, SameSite=Strict, /console only) that shows alice's topics and
    nothing else; a forged one is refused; logging out ends it."""
    browser.get(f"{base(skiff)}/login")
    browser.delete_all_cookies()  # those of this module's other sidecars (same host)

    def log_in(password: str) -> None:
        browser.get(f"{base(skiff)}/topics")
        assert browser.find_element(By.TAG_NAME, "h1").text == "Log in"
        browser.find_element(By.ID, "user").send_keys("alice")
        browser.find_element(By.ID, "password").send_keys(password)
        follow(browser, By.ID, "login")

    log_in("wrong")
    assert browser.find_element(By.ID, "login-message").text == "Wrong user name or password."
    log_in(USERS["alice"])
    assert browser.find_element(By.TAG_NAME, "h1").text == "Topics"
    assert cells(browser, "topics")[0][0] == "alice-topic" and len(cells(browser, "topics")) == 1
    cookie = browser.get_cookie("skiff_console")
    assert (cookie["httpOnly"], cookie["sameSite"], cookie["path"]) == (True, "Strict", "/console")
    session = {"Cookie": f"skiff_console={cookie['value']}"}
    assert http(f"{base(skiff)}/topics", headers=session)[0] == 200
    api = f"http://127.0.0.1:{skiff.http_port}/v1/queues"
    assert http(api, headers=session)[0] == 401  # the session is the console's only
    _, expires, mac = cookie["value"].split(".")
    forged = base64.urlsafe_b64encode(b"ANONYMOUS").decode()  # a super user here
    status, _ = http(
        f"{base(skiff)}/topics", headers={"Cookie": f"skiff_console={forged}.{expires}.{mac}"}
    )
    assert status == 401
    browser.get(f"{base(skiff)}/logout")
    browser.get(f"{base(skiff)}/topics")
    assert browser.find_element(By.TAG_NAME, "h1").text == "Log in"


def test_console_off(tmp_path: Path) -> None:
    redis = start_redis(tmp_path / "redis")
    skiff = start_skiff(tmp_path / "skiff.log", "--redis-url", redis.url, "--console", "false")
    try:
        assert http(f"{base(skiff)}/topics")[0] == 404
        assert http(f"http://127.0.0.1:{skiff.http_port}/healthz")[0] == 200
    finally:
        stop_process(skiff.proc)
        stop_process(redis.proc)
