"""A real Redis Cluster on loopback for tests: 3 primaries + 3 replicas, each a
redis-server with `--cluster-enabled yes` on a free port, joined by
`redis-cli --cluster create ... --cluster-replicas 1 --cluster-yes`; killed by pid."""

from __future__ import annotations

import random
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis
from conftest import REDIS_NODE_ARGS, hand_out_ports, stop_process, wait_for_port


@dataclass
class RedisClusterNodes:
    ports: list[int]
    procs: list[subprocess.Popen[bytes]]
    dir: Path
    seeds: list[int] = field(default_factory=list)

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports[:3])

    def node(self, port: int) -> redis.Redis:
        """A plain connection to one node; CLUSTER replies left raw."""
        r = redis.Redis(port=port)
        for name in ("CLUSTER INFO", "CLUSTER NODES", "CLUSTER SLOTS", "CLUSTER MYID"):
            r.set_response_callback(name, lambda resp, **_: resp)
        return r

    def client(self) -> redis.RedisCluster:
        return redis.RedisCluster(host="127.0.0.1", port=self.ports[0])

    def primaries(self) -> list[int]:
        """Ports of the current primaries, by CLUSTER NODES."""
        out = []
        for line in (
            self.node(self.alive_port()).execute_command("CLUSTER NODES").decode().splitlines()
        ):
            parts = line.split()
            if "master" in parts[2] and "fail" not in parts[2]:
                out.append(int(parts[1].split("@")[0].rsplit(":", 1)[1]))
        return sorted(out)

    def owner(self, key: str) -> int:
        """Port of the primary serving key's slot."""
        probe = self.node(self.alive_port())
        slot = int(probe.execute_command("CLUSTER KEYSLOT", key))
        for start, end, primary, *_ in probe.execute_command("CLUSTER SLOTS"):
            if start <= slot <= end:
                return int(primary[1])
        raise AssertionError(f"slot {slot} is not served")

    def replica_of(self, primary_port: int) -> int:
        probe = self.node(primary_port)
        my_id = probe.execute_command("CLUSTER MYID").decode()
        for line in probe.execute_command("CLUSTER NODES").decode().splitlines():
            parts = line.split()
            if parts[3] == my_id and "slave" in parts[2]:
                return int(parts[1].split("@")[0].rsplit(":", 1)[1])
        raise AssertionError(f"no replica of {primary_port}")

    def alive_port(self) -> int:
        for port, proc in zip(self.ports, self.procs, strict=True):
            if proc.poll() is None:
                return port
        raise AssertionError("no cluster node is running")

    def wait_ok(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                states = [
                    self.node(p).execute_command("CLUSTER INFO").decode()
                    for p, proc in zip(self.ports, self.procs, strict=True)
                    if proc.poll() is None
                ]
                if all("cluster_state:ok" in s for s in states):
                    return
            except redis.RedisError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the Redis Cluster did not reach cluster_state:ok")
            time.sleep(0.1)

    def kill(self, port: int) -> None:
        """SIGKILL one node (its data is gone: the nodes run without persistence)."""
        stop_process(self.procs[self.ports.index(port)], signal.SIGKILL)

    def restart(self, port: int) -> None:
        """Start a killed node again: it rejoins the cluster (as a replica, when its slots
        were taken over meanwhile) and resyncs from its primary."""
        binary = shutil.which("redis-server")
        assert binary is not None
        index = self.ports.index(port)
        self.procs[index] = _start_node(binary, port, self.dir)
        wait_for_port(port, self.procs[index])

    def as_session_server(self) -> ClusterAsServer:
        return ClusterAsServer(self.ports[0], self.procs[0], self.dir, self)

    def stop(self) -> None:
        for proc in self.procs:
            stop_process(proc)


@dataclass
class ClusterAsServer:
    """Stands in for conftest.RedisServer (SKIFF_TEST_REDIS=cluster)."""

    port: int
    proc: subprocess.Popen[bytes]
    dir: Path
    cluster: RedisClusterNodes

    @property
    def url(self) -> str:
        return self.cluster.url

    def client(self) -> redis.RedisCluster:
        return self.cluster.client()


# Node ports and their bus ports (port + 10000) both below the kernel's ephemeral range
# (32768+), so no outgoing connection can take a bus port between the check and the bind.
_NODE_PORTS = range(20000, 22700)


def cluster_ports(count: int) -> list[int]:
    """Free ports whose cluster bus port (port + 10000) is free too."""
    ports: list[int] = []
    while len(ports) < count:
        port = random.choice(_NODE_PORTS)
        if port in ports or not _bindable(port) or not _bindable(port + 10000):
            continue
        if hand_out_ports(range(port, port + 1)):
            ports.append(port)
    return ports


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _start_node(binary: str, port: int, tmp: Path) -> subprocess.Popen[bytes]:
    """One cluster node; started again on the same dir it rejoins with its nodes.conf."""
    node_dir = tmp / str(port)
    node_dir.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [
            binary,
            "--port", str(port),
            "--bind", "127.0.0.1",
            "--cluster-enabled", "yes",
            "--cluster-config-file", str(node_dir / "nodes.conf"),
            "--cluster-node-timeout", "2000",
            "--save", "",
            "--appendonly", "no",
            "--dir", str(node_dir),
            "--daemonize", "no",
            *REDIS_NODE_ARGS,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip


def start_redis_cluster(tmp: Path, nodes: int = 6, replicas: int = 1) -> RedisClusterNodes:
    binary = shutil.which("redis-server")
    cli = shutil.which("redis-cli")
    if binary is None or cli is None:
        raise RuntimeError("redis-server and redis-cli are needed for a Redis Cluster")
    for attempt in range(3):
        ports = cluster_ports(nodes)
        procs: list[subprocess.Popen[bytes]] = []
        cluster = RedisClusterNodes(ports, procs, tmp / f"try{attempt}")
        for port in ports:
            procs.append(_start_node(binary, port, cluster.dir))
        try:
            for port, proc in zip(ports, procs, strict=True):
                wait_for_port(port, proc)
            break
        except RuntimeError:
            # Another process bound a port between the check and the node's bind.
            cluster.stop()
            if attempt == 2:
                raise
    try:
        created = subprocess.run(
            [
                cli,
                "--cluster", "create",
                *(f"127.0.0.1:{p}" for p in ports),
                "--cluster-replicas", str(replicas),
                "--cluster-yes",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=60,
        )  # fmt: skip
        if created.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed: {created.stdout.decode()}")
        # Replicas must have synced before a failover can be asked for.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            roles = [cluster.node(p).execute_command("ROLE") for p in ports]
            replicas_up = [r for r in roles if r[0] == b"slave" and r[3] == b"connected"]
            if len(replicas_up) == nodes - nodes // (replicas + 1):
                break
            time.sleep(0.1)
        cluster.wait_ok()
    except BaseException:
        cluster.stop()
        raise
    return cluster
