"""The Kubernetes manifests in k8s/: every kustomization renders, every object passes the
Kubernetes schemas (strict, 1.27 and 1.37) and the cross-reference checks of
tools/k8s_check.py; the deployment has what docs/kubernetes.md promises; Redis accepts
the redis.conf the manifests ship; and a deliberately broken copy fails the check."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import known_secrets
import pytest
import redis
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from conftest import ROOT, RedisServer, free_port, start_redis, stop_process, wait_for_port
from redis_cluster_harness import cluster_ports

sys.path.insert(0, str(ROOT / "tools"))
import k8s_check  # noqa: E402 - tools/ is not a package

DIRS = k8s_check.kustomization_dirs()


def _by_kind(objs: list[dict], kind: str, name: str) -> dict:
    return next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)


def test_every_variant_is_there() -> None:
    assert {d.name for d in DIRS} >= {
        "default",
        "redis",
        "skiff",
        "sentinel",
        "in-pod",
        "otel",
        "redis-cluster",
        "tiered",
    }


@pytest.mark.parametrize("directory", DIRS, ids=[d.name for d in DIRS])
def test_kustomization_passes_schemas_and_references(directory: Path) -> None:
    assert k8s_check.check(directory) == []


def test_default_deployment_has_what_the_docs_promise() -> None:
    objs = k8s_check.render(ROOT / "k8s" / "default")
    kinds = sorted(f"{o['kind']}/{o['metadata']['name']}" for o in objs)
    assert kinds == [
        "ConfigMap/redis-config",
        "ConfigMap/skiff-env",
        "Deployment/skiff",
        "HorizontalPodAutoscaler/skiff",
        "PodDisruptionBudget/skiff",
        "Service/redis",
        "Service/redis-headless",
        "Service/skiff",
        "StatefulSet/redis",
    ]
    redis_set = _by_kind(objs, "StatefulSet", "redis")
    assert redis_set["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data"
    conf = _by_kind(objs, "ConfigMap", "redis-config")["data"]["redis.conf"].splitlines()
    assert "appendonly yes" in conf and "maxmemory-policy noeviction" in conf

    pod = _by_kind(objs, "Deployment", "skiff")["spec"]["template"]["spec"]
    (skiff,) = pod["containers"]
    assert skiff["image"] == "skiff:0.1.0"
    assert skiff["args"] == [
        "serve",
        "--listen",
        "0.0.0.0:9092",
        "--advertise",
        "$(POD_IP):9092",
        "--http-listen",
        "0.0.0.0:8080",
    ]
    assert skiff["env"][0] == {
        "name": "POD_IP",
        "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
    }
    assert skiff["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert skiff["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert skiff["resources"]["requests"]["cpu"] and skiff["resources"]["limits"]["memory"]
    assert pod["terminationGracePeriodSeconds"] == 20
    hpa = _by_kind(objs, "HorizontalPodAutoscaler", "skiff")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"
    svc = _by_kind(objs, "Service", "skiff")
    assert [p["port"] for p in svc["spec"]["ports"]] == [9092, 8080]


def test_overlays_set_what_they_are_for() -> None:
    sentinel = k8s_check.render(ROOT / "k8s" / "sentinel")
    env = _by_kind(sentinel, "ConfigMap", "skiff-env")["data"]
    assert env["SKIFF_REDIS_URL"] == "redis+sentinel://redis-sentinel:26379/mymaster/0"
    assert env["SKIFF_MIN_INSYNC_REPLICAS"] == "2"
    assert _by_kind(sentinel, "StatefulSet", "redis-sentinel")["spec"]["replicas"] == 3

    otel = k8s_check.render(ROOT / "k8s" / "otel")
    env = _by_kind(otel, "ConfigMap", "skiff-env")["data"]
    assert env["OTEL_TRACES_EXPORTER"] == "otlp"
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://otel-collector:4317"
    _by_kind(otel, "Deployment", "otel-collector")

    tiered = k8s_check.render(ROOT / "k8s" / "tiered")
    container = _by_kind(tiered, "Deployment", "skiff")["spec"]["template"]["spec"]["containers"][0]
    from_secret = {
        e["name"]: e["valueFrom"]["secretKeyRef"]
        for e in container["env"]
        if "secretKeyRef" in e.get("valueFrom", {})
    }
    assert from_secret["SKIFF_REMOTE_STORAGE"] == {"name": "skiff-object-store", "key": "url"}
    assert {"AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} <= set(from_secret)

    in_pod = k8s_check.render(ROOT / "k8s" / "in-pod")
    assert not [o for o in in_pod if o["kind"] == "Deployment"]
    pod = _by_kind(in_pod, "StatefulSet", "redis")["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["redis", "skiff"]
    assert _by_kind(in_pod, "ConfigMap", "skiff-env")["data"]["SKIFF_REDIS_URL"] == (
        "redis://127.0.0.1:6379/0"
    )


def test_image_can_be_overridden_in_an_overlay(tmp_path: Path) -> None:
    overlay = tmp_path / "k8s" / "mine"
    shutil.copytree(ROOT / "k8s", tmp_path / "k8s")
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        "resources: [../default]\n"
        "images:\n  - {name: skiff, newName: registry.example.com/team/skiff, newTag: '1.2'}\n"
    )
    objs = k8s_check.render(overlay)
    skiff = _by_kind(objs, "Deployment", "skiff")["spec"]["template"]["spec"]["containers"][0]
    assert skiff["image"] == "registry.example.com/team/skiff:1.2"
    assert k8s_check.check(overlay) == []


# (kustomization, file, text, replacement, expected problem)
BROKEN = [
    (
        "default",
        "skiff/deployment.yaml",
        "readinessProbe:",
        "readinesProbe:",
        "'readinesProbe' was unexpected",
    ),
    ("default", "skiff/deployment.yaml", "containerPort: 9092", "containerPort: '9092'", "schema"),
    (
        "default",
        "skiff/service.yaml",
        "component: broker",
        "component: brokr",
        "Service/skiff: selector",
    ),
    (
        "default",
        "skiff/service.yaml",
        "targetPort: kafka",
        "targetPort: kafak",
        "targetPort 'kafak' is no port",
    ),
    (
        "default",
        "skiff/deployment.yaml",
        "port: http\n            periodSeconds: 2\n            failureThreshold: 2",
        "port: htttp\n            periodSeconds: 2\n            failureThreshold: 2",
        "readinessProbe port 'htttp' is no port",
    ),
    (
        "default",
        "skiff/deployment.yaml",
        "name: skiff-env",
        "name: skiff-envv",
        "envFrom ConfigMap skiff-envv does not exist",
    ),
    (
        "default",
        "redis/statefulset.yaml",
        "name: redis-config",
        "name: redis-conf",
        "ConfigMap redis-conf does not exist",
    ),
    (
        "default",
        "skiff/configmap.yaml",
        "SKIFF_REDIS_URL:",
        "SKIFF_REDIS_ULR:",
        "SKIFF_REDIS_ULR is no `skiff serve` setting",
    ),
    (
        "default",
        "skiff/configmap.yaml",
        'SKIFF_NUM_PARTITIONS: "6"',
        'SKIFF_NUM_PARTITIONS: "six"',
        "skiff serve refuses its settings",
    ),
    (
        "default",
        "skiff/deployment.yaml",
        "$(POD_IP):9092",
        "$(POD_IPS):9092",
        "refers to $(POD_IPS)",
    ),
    (
        "default",
        "skiff/deployment.yaml",
        "- 0.0.0.0:8080",
        "- 127.0.0.1:8080",
        "not reachable by the kubelet's probes",
    ),
    (
        "default",
        "skiff/deployment.yaml",
        "terminationGracePeriodSeconds: 20",
        "terminationGracePeriodSeconds: 12",
        "terminationGracePeriodSeconds 12 leaves no time",
    ),
    (
        "default",
        "skiff/pdb.yaml",
        "app.kubernetes.io/name: skiff\n      app",
        "app.kubernetes.io/name: skif\n      app",
        "PodDisruptionBudget/skiff: selector",
    ),
    (
        "default",
        "skiff/hpa.yaml",
        "name: skiff\n  minReplicas",
        "name: skif\n  minReplicas",
        "scaleTargetRef Deployment/skif not found",
    ),
    (
        "default",
        "skiff/kustomization.yaml",
        '    newTag: "0.1.0"',
        '    newTagg: "0.1.0"',
        "unsupported images",
    ),
    (
        "default",
        "redis/statefulset.yaml",
        "serviceName: redis-headless",
        "serviceName: redis-headles",
        "is no headless Service",
    ),
    (
        "sentinel",
        "sentinel/kustomization.yaml",
        "path: /data/SKIFF_REDIS_URL",
        "path: /data/SKIFF_REDIS_URI",
        "patch replace /data/SKIFF_REDIS_URI",
    ),
    (
        "otel",
        "otel/kustomization.yaml",
        "name: skiff\n    patch",
        "name: skif\n    patch",
        "matches no resource",
    ),
    (
        "in-pod",
        "in-pod/add-skiff-container.yaml",
        "name: skiff-env",
        "name: skiff-environment",
        "envFrom ConfigMap skiff-environment does not exist",
    ),
    # k8s/secure (tools/k8s_secure.py)
    (
        "secure",
        "secure/skiff-deployment-patch.yaml",
        "name: skiff-redis",
        "name: skiff-rediss",
        "Secret skiff-rediss is neither in the manifests",
    ),
    (
        "secure",
        "secure/redis-statefulset-patch.yaml",
        "key: password\n    - name: REDISCLI",
        "key: pasword\n    - name: REDISCLI",
        "Secret skiff-redis has no key pasword",
    ),
    (
        "secure",
        "secure/skiff-deployment-patch.yaml",
        "secretName: skiff-tls",
        "secretName: skiff-tlss",
        "Secret skiff-tlss is neither",
    ),
    (
        "secure",
        "secure/certificates.yaml",
        "    name: skiff-ca\n    kind: Issuer",
        "    name: skiff-ca2\n    kind: Issuer",
        "issuerRef Issuer skiff-ca2 is not here",
    ),
    (
        "secure",
        "secure/certificates.yaml",
        "  duration: 2160h",
        "  duration: 90d",
        "duration '90d' is not a Go duration",
    ),
    (
        "secure",
        "secure/certificates.yaml",
        '    - "*.skiff-headless.skiff.svc"\n',
        "",
        "does not cover skiff-5d8f9c7b6-x2x7k.skiff-headless.skiff.svc",
    ),
    (
        "secure",
        "secure/certificates.yaml",
        "    - skiff.skiff.svc\n",
        "",
        "does not cover skiff.skiff.svc",
    ),
    (
        "secure",
        "secure/server-properties.yaml",
        "/etc/skiff/tls/tls.key",
        "/etc/skiff/tls/tls.pem",
        "Secret skiff-tls has no key tls.pem",
    ),
    (
        "secure",
        "secure/server-properties.yaml",
        "SASL_SSL://0.0.0.0:9093",
        "SASL_SSL://127.0.0.1:9093",
        "is not reachable from other pods",
    ),
    (
        "secure",
        "secure/network-policies.yaml",
        "          port: redis",
        "          port: redis2",
        "port 'redis2' is no port of StatefulSet/redis",
    ),
    (
        "secure",
        "secure/network-policies.yaml",
        "              app.kubernetes.io/component: broker\n      ports",
        "              app.kubernetes.io/component: brokr\n      ports",
        "selects no pod",
    ),
    (
        "secure",
        "secure/redis-statefulset-patch.yaml",
        "    readOnlyRootFilesystem: true",
        "    readOnlyRootFilesystem: false",
        "StatefulSet/redis container redis: readOnlyRoot",
    ),
    (
        "secure",
        "secure/redis-statefulset-patch.yaml",
        "    runAsNonRoot: true",
        "    runAsNonRoot: false",
        "StatefulSet/redis container redis: runAsNonRoot is not true",
    ),
    (
        "secure",
        "secure/kustomization.yaml",
        "skiff-admin: add-scram",
        "skiff-admin: scram",
        "Secret skiff-admin has no key add-scram",
    ),
]


@pytest.mark.parametrize("case", BROKEN, ids=[f"{c[0]}:{c[4][:30]}" for c in BROKEN])
def test_a_broken_copy_fails(tmp_path: Path, case: tuple[str, str, str, str, str]) -> None:
    variant, file, text, replacement, expected = case
    copy = tmp_path / "k8s"
    shutil.copytree(ROOT / "k8s", copy)
    path = copy / file
    source = path.read_text()
    assert source.count(text) == 1, f"{text!r} must occur once in {file}"
    path.write_text(source.replace(text, replacement))
    problems = k8s_check.check(copy / variant)
    assert any(expected in p for p in problems), problems
    assert k8s_check.check(ROOT / "k8s" / variant) == []  # the original still passes


def test_the_command_line_exits_1_on_a_broken_manifest(tmp_path: Path) -> None:
    copy = tmp_path / "k8s"
    shutil.copytree(ROOT / "k8s", copy)
    tool = [sys.executable, str(ROOT / "tools" / "k8s_check.py")]
    ok = subprocess.run([*tool, str(copy / "default")], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout
    (copy / "skiff" / "service.yaml").write_text(
        (copy / "skiff" / "service.yaml").read_text().replace("targetPort: http", "targetPort: 80")
    )
    bad = subprocess.run([*tool, str(copy / "default")], capture_output=True, text=True)
    assert bad.returncode == 1 and "targetPort 80 is no port" in bad.stdout


def _redis_confs() -> list[tuple[str, str]]:
    confs = {}
    for d in DIRS:
        for obj in k8s_check.render(d):
            if obj["kind"] == "ConfigMap" and "redis.conf" in (obj.get("data") or {}):
                confs[obj["metadata"]["name"]] = obj["data"]["redis.conf"]
    return sorted(confs.items())


REDIS_CONFS = _redis_confs()


@pytest.mark.parametrize("name,conf", REDIS_CONFS, ids=[name for name, _ in REDIS_CONFS])
def test_redis_accepts_the_shipped_redis_conf(tmp_path: Path, name: str, conf: str) -> None:
    """redis-server starts with the ConfigMap's redis.conf (its data dir and port moved
    to the test's) and runs with AOF on and eviction off."""
    # A cluster node also listens on port + 10000, which must be a valid port.
    port = cluster_ports(1)[0] if "cluster-enabled yes" in conf else free_port()
    lines = []
    for line in conf.splitlines():
        key = line.split(" ", 1)[0]
        if key in ("port", "dir", "bind", "cluster-config-file"):
            continue
        lines.append(line)
    lines += [
        f"port {port}",
        "bind 127.0.0.1",
        f"dir {tmp_path}",
        f"cluster-config-file {tmp_path}/nodes.conf",
    ]
    path = tmp_path / "redis.conf"
    path.write_text("\n".join(lines) + "\n")
    proc = subprocess.Popen(
        [shutil.which("redis-server") or "redis-server", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for_port(port, proc, timeout=20)
        client = redis.Redis(port=port)
        assert client.config_get("appendonly") == {"appendonly": "yes"}
        assert client.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
        assert int(client.config_get("maxmemory")["maxmemory"]) > 0
    finally:
        stop_process(proc)


def test_shell_scripts_in_configmaps_parse() -> None:
    scripts = [
        (d.name, key, text)
        for d in DIRS
        for obj in k8s_check.render(d)
        if obj["kind"] == "ConfigMap"
        for key, text in (obj.get("data") or {}).items()
        if key.endswith(".sh")
    ]
    assert {key for _, key, _ in scripts} >= {"redis-init.sh", "sentinel-init.sh", "create.sh"}
    for variant, key, text in scripts:
        run = subprocess.run(["sh", "-n"], input=text, capture_output=True, text=True)
        assert run.returncode == 0, f"{variant} {key}: {run.stderr}"


def test_dockerfile_copies_what_exists_and_ignores_nothing_it_needs() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text().splitlines()
    assert dockerfile[[i for i, ln in enumerate(dockerfile) if ln.startswith("FROM")][0]] == (
        "FROM python:3.11-slim"
    )
    sources = [ln.split()[1] for ln in dockerfile if ln.startswith("COPY ")]
    assert sources and all((ROOT / s).exists() for s in sources), sources
    ignored = set((ROOT / ".dockerignore").read_text().split())
    assert not ignored & {s.rstrip("/") for s in sources}
    # pyproject's packages (all must be in the image for `pip install -e .`) are copied.
    assert {"sidecar", "pipeline", "lua", "pyproject.toml"} <= set(sources)


@pytest.mark.parametrize("variant", ["default", "sentinel", "in-pod", "otel"])
def test_skiff_container_runs_as_rendered(
    own_redis: RedisServer, tmp_path: Path, variant: str
) -> None:
    """The Skiff container of each variant, started with exactly its rendered args and
    environment (ConfigMap included), except: Redis is the test's, the pod IP is
    127.0.0.1 and ports 9092/8080 are free ones. Its probes answer 200 on the probed
    paths, Metadata names the advertised pod address, a record goes round, and SIGTERM
    ends it with exit 0 within the pod's grace period less the preStop sleep."""
    ((_, env, args),) = k8s_check.skiff_containers(
        k8s_check.render(ROOT / "k8s" / variant), pod_ip="127.0.0.1"
    )
    kafka_port, http_port = free_port(), free_port()
    args = [a.replace(":9092", f":{kafka_port}").replace(":8080", f":{http_port}") for a in args]
    env["SKIFF_REDIS_URL"] = own_redis.url
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SKIFF_", "OTEL_"))}
    log_path = tmp_path / "skiff.log"
    known_secrets.output_file(log_path)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sidecar.cli.main", *args],
            cwd=ROOT,
            env={**base, **env},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for_port(kafka_port, proc)

        def get(path: str) -> tuple[int, dict]:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{http_port}{path}", timeout=2) as r:
                    return r.status, json.loads(r.read())
            except urllib.error.HTTPError as exc:
                return exc.code, json.loads(exc.read())

        deadline = time.monotonic() + 30
        while get("/readyz")[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert get("/readyz") == (200, {"ready": True, "reason": "ready"})
        assert get("/healthz") == (200, {"status": "alive"})

        brokers = (
            AdminClient({"bootstrap.servers": f"127.0.0.1:{kafka_port}"})
            .list_topics(timeout=10)
            .brokers
        )
        assert [(b.host, b.port) for b in brokers.values()] == [("127.0.0.1", kafka_port)]
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{kafka_port}", "acks": 1})
        producer.produce("k8s-check", b"hello")
        assert producer.flush(20) == 0
        consumer = Consumer(
            {
                "bootstrap.servers": f"127.0.0.1:{kafka_port}",
                "group.id": "k8s-check",
                "auto.offset.reset": "earliest",
            }
        )
        consumer.subscribe(["k8s-check"])
        msg = None
        deadline = time.monotonic() + 30
        while msg is None and time.monotonic() < deadline:
            msg = consumer.poll(1)
        consumer.close()
        assert msg is not None and msg.error() is None and msg.value() == b"hello"

        # SKIFF_LOG_FORMAT=json from the ConfigMap took effect.
        first = log_path.read_text().splitlines()[0]
        assert json.loads(first)["level"] in ("INFO", "WARNING")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        stop_process(proc)


def test_secure_overlay_has_what_docs_security_promises() -> None:
    """k8s/secure (docs/security.md, Kubernetes): TLS from cert-manager's Secret layout,
    one SASL_SSL listener, SCRAM admin and Redis password from Secrets the operator
    creates, ACLs on, Redis reachable only from the sidecars, pods restricted."""
    import k8s_secure

    objs = k8s_check.render(ROOT / "k8s" / "secure")
    assert {o["metadata"].get("namespace") for o in objs if o["kind"] != "Namespace"} == {"skiff"}
    namespace = _by_kind(objs, "Namespace", "skiff")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    # Secrets: none shipped; the operator's two are declared, cert-manager writes skiff-tls.
    assert not [o for o in objs if o["kind"] == "Secret"]
    assert k8s_check.external_secrets(ROOT / "k8s" / "secure") == {
        "skiff-redis": {"password"},
        "skiff-admin": {"add-scram"},
    }
    cert = _by_kind(objs, "Certificate", "skiff-tls")
    assert cert["spec"]["secretName"] == "skiff-tls"
    assert cert["spec"]["issuerRef"] == {"name": "skiff-ca", "kind": "Issuer"}
    assert _by_kind(objs, "Issuer", "skiff-ca")["spec"] == {"ca": {"secretName": "skiff-ca"}}

    deployment = _by_kind(objs, "Deployment", "skiff")
    pod = deployment["spec"]["template"]["spec"]
    (skiff,) = pod["containers"]
    env = {v["name"]: v for v in skiff["env"]}
    assert env["SKIFF_REDIS_URL"]["value"] == "redis://:$(REDIS_PASSWORD)@redis:6379/0"
    assert env["SKIFF_ADD_SCRAM"]["valueFrom"]["secretKeyRef"] == {
        "name": "skiff-admin",
        "key": "add-scram",
    }
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == "skiff-tls"
    assert not any(m.get("subPath") for m in skiff["volumeMounts"])  # renewals reach the pod
    properties = _by_kind(objs, "ConfigMap", "skiff-server-properties")["data"]
    lines = set(properties["server.properties"].splitlines())
    assert {
        "listeners=SASL_SSL://0.0.0.0:9093",
        "ssl.keystore.certificate.location=/etc/skiff/tls/tls.crt",
        "ssl.keystore.key.location=/etc/skiff/tls/tls.key",
        "sasl.enabled.mechanisms=SCRAM-SHA-512",
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users=User:admin",
        "allow.everyone.if.no.acl.found=false",
    } <= lines
    assert [p["port"] for p in _by_kind(objs, "Service", "skiff")["spec"]["ports"]] == [9093, 8080]

    redis_set = _by_kind(objs, "StatefulSet", "redis")
    redis_pod = redis_set["spec"]["template"]["spec"]
    assert redis_pod["securityContext"]["runAsUser"] == 999
    redis_env = {
        v["name"]: v["valueFrom"]["secretKeyRef"] for v in redis_pod["containers"][0]["env"]
    }
    assert redis_env == {
        "REDIS_PASSWORD": {"name": "skiff-redis", "key": "password"},
        "REDISCLI_AUTH": {"name": "skiff-redis", "key": "password"},
    }
    # NetworkPolicies, evaluated: sidecars reach Redis, nothing else does; anyone reaches
    # the sidecars' Kafka and HTTP ports.
    sidecar_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert k8s_secure.allows(objs, sidecar_labels, redis_set, "redis")
    assert not k8s_secure.allows(objs, {"app.kubernetes.io/name": "client"}, redis_set, "redis")
    assert not k8s_secure.allows(objs, {}, redis_set, "redis")
    for port in ("kafka", "http"):
        assert k8s_secure.allows(objs, {"app.kubernetes.io/name": "client"}, deployment, port)
    assert k8s_check.check(ROOT / "k8s" / "secure") == []


def _secure_redis_command(objs: list[dict]) -> str:
    redis_pod = _by_kind(objs, "StatefulSet", "redis")["spec"]["template"]["spec"]
    args = redis_pod["containers"][0]["args"]
    assert args[:2] == ["sh", "-c"]
    return args[2]


def test_secure_redis_starts_with_the_password_from_the_secret(tmp_path: Path) -> None:
    """The secured Redis container's start command, run as rendered (paths moved to the
    test's): the config it writes is private, Redis refuses clients without the password,
    and redis-cli with REDISCLI_AUTH (the readiness probe) gets PONG."""
    objs = k8s_check.render(ROOT / "k8s" / "secure")
    conf = _by_kind(objs, "ConfigMap", "redis-config")["data"]["redis.conf"]
    etc, run = tmp_path / "etc", tmp_path / "run"
    etc.mkdir()
    run.mkdir()
    port = free_port()
    lines = [ln for ln in conf.splitlines() if ln.split(" ", 1)[0] not in ("port", "dir", "bind")]
    (etc / "redis.conf").write_text(
        "\n".join([*lines, f"port {port}", "bind 127.0.0.1", f"dir {tmp_path}"]) + "\n"
    )
    command = (_secure_redis_command(objs).replace("/etc/redis/", f"{etc}/")
               .replace("/run/redis/", f"{run}/"))  # fmt: skip
    password = "0123456789abcdef0123456789abcdef"
    proc = subprocess.Popen(["sh", "-c", command], env={**os.environ, "REDIS_PASSWORD": password},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        wait_for_port(port, proc, timeout=20)
        assert (run / "redis.conf").stat().st_mode & 0o077 == 0
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(port=port).ping()
        assert redis.Redis(port=port, password=password).ping()
        probe = subprocess.run(["sh", "-c", "redis-cli -p $PORT ping | grep -q PONG"],
                               env={**os.environ, "REDISCLI_AUTH": password, "PORT": str(port)},
                               timeout=10)  # fmt: skip
        assert probe.returncode == 0
        assert password not in subprocess.run(["ps", "-eo", "args"], capture_output=True,
                                              text=True).stdout  # fmt: skip
    finally:
        stop_process(proc)


def test_secure_skiff_container_runs_as_rendered(tmp_path: Path) -> None:
    """The secured Skiff container, started with exactly its rendered args, environment
    and server.properties, with cert-manager's Secret layout (tls.crt, tls.key, ca.crt)
    made by trustme for the Certificate's names, a Redis with a password and the admin
    from SKIFF_ADD_SCRAM; only file paths, the pod's name and the ports are the test's.
    A client that verifies the broker's host name produces and consumes as admin over
    SASL_SSL through the advertised pod name; a wrong password and a plaintext client
    are refused; no password reaches the log."""
    import trustme

    objs = k8s_check.render(ROOT / "k8s" / "secure")
    ((_, env, args),) = k8s_check.skiff_containers(objs, pod_ip="127.0.0.1")
    cert_spec = _by_kind(objs, "Certificate", "skiff-tls")["spec"]
    tls, config = tmp_path / "tls", tmp_path / "config"
    tls.mkdir()
    config.mkdir()
    ca = trustme.CA()
    # The advertised pod name resolves to 127.0.0.1 in the test (it is "localhost").
    names = ["localhost", *(n for n in cert_spec["dnsNames"] if "*" not in n)]
    issued = ca.issue_cert(*names)
    issued.cert_chain_pems[0].write_to_path(str(tls / "tls.crt"))
    for blob in issued.cert_chain_pems[1:]:
        blob.write_to_path(str(tls / "tls.crt"), append=True)
    issued.private_key_pem.write_to_path(str(tls / "tls.key"))
    ca.cert_pem.write_to_path(str(tls / "ca.crt"))
    kafka_port, http_port = free_port(), free_port()
    text = _by_kind(objs, "ConfigMap", "skiff-server-properties")["data"]["server.properties"]
    (config / "server.properties").write_text(
        text.replace("/etc/skiff/tls/", f"{tls}/").replace(":9093", f":{kafka_port}")
    )
    redis_password = known_secrets.register("k8s Redis password", "9f8e7d6c5b4a39281706f5e4d3")
    admin_password = known_secrets.register("k8s SCRAM admin password", "c0ffee00d15ea5e0")
    own = start_redis(tmp_path / "redis")
    own.client().config_set("requirepass", redis_password)
    env = {
        **env,
        "SKIFF_CONFIG": str(config / "server.properties"),
        "SKIFF_REDIS_URL": env["SKIFF_REDIS_URL"].replace("<REDIS_PASSWORD>", redis_password)
        .replace("@redis:6379", f"@127.0.0.1:{own.port}"),
        "SKIFF_ADD_SCRAM": f"SCRAM-SHA-512=[name=admin,password={admin_password}]",
    }  # fmt: skip
    pod_host = f"{k8s_check.EXAMPLE_POD_NAME}.skiff-headless.skiff.svc"
    args = [a.replace(pod_host, "localhost").replace(":9093", f":{kafka_port}")
            .replace(":8080", f":{http_port}") for a in args]  # fmt: skip
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SKIFF_", "OTEL_"))}
    log_path = tmp_path / "skiff.log"
    known_secrets.output_file(log_path)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sidecar.cli.main", *args],
            cwd=ROOT,
            env={**base, **env},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    client = {
        "bootstrap.servers": f"localhost:{kafka_port}",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "admin",
        "sasl.password": admin_password,
        "ssl.ca.location": str(tls / "ca.crt"),
        "ssl.endpoint.identification.algorithm": "https",
        "broker.address.family": "v4",
    }
    try:
        wait_for_port(kafka_port, proc)
        brokers = AdminClient(client).list_topics(timeout=20).brokers
        assert [(b.host, b.port) for b in brokers.values()] == [("localhost", kafka_port)]
        producer = Producer({**client, "acks": "all"})
        producer.produce("k8s-secure", b"over SASL_SSL")
        assert producer.flush(30) == 0
        consumer = Consumer({**client, "group.id": "k8s-secure", "auto.offset.reset": "earliest"})
        consumer.subscribe(["k8s-secure"])
        msg = None
        deadline = time.monotonic() + 30
        while msg is None and time.monotonic() < deadline:
            msg = consumer.poll(1)
        consumer.close()
        assert msg is not None and msg.error() is None and msg.value() == b"over SASL_SSL"

        refused = AdminClient({**client, "sasl.password": "wrong", "error_cb": lambda e: None})
        with pytest.raises(Exception):  # noqa: B017 - librdkafka's KafkaException
            refused.list_topics(timeout=5)
        plaintext = AdminClient({"bootstrap.servers": f"localhost:{kafka_port}",
                                 "error_cb": lambda e: None})  # fmt: skip
        with pytest.raises(Exception):  # noqa: B017
            plaintext.list_topics(timeout=5)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        stop_process(proc)
        stop_process(own.proc)
    out = log_path.read_text()
    assert redis_password not in out and admin_password not in out, out
