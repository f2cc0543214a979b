"""Renders the kustomizations in k8s/ and checks what they produce, offline.

    python tools/k8s_check.py                 # every kustomization under k8s/
    python tools/k8s_check.py k8s/sentinel    # some
    python tools/k8s_check.py --render k8s/default   # print the rendered YAML

kustomize itself is not needed: `render` implements the subset of it that k8s/ uses —
`resources` (files, and directories with a kustomization), `patches` with a JSON patch
(RFC 6902) and a target, `images` and `namespace` — and refuses anything else, so a
kustomization cannot silently mean something different here than under `kubectl apply -k`.

`check` validates every rendered object against the Kubernetes OpenAPI schemas bundled
with kubernetes-validate (strict: unknown fields are errors) and then the references
between objects that a schema cannot see: Service and PodDisruptionBudget selectors
select pods, probe and Service target ports exist, ConfigMaps and keys referenced
exist, $(VAR) references are defined, the HPA's target exists, and a Skiff container's
settings parse with `skiff serve`'s own parser and fit its probes and grace period.

For the secured variant (k8s/secure, docs/security.md) it also checks: Secrets referenced
exist (rendered, written by a cert-manager Certificate, or declared as created by the
operator in the kustomization's `skiff.dev/external-secrets` annotation) with the keys
used; cert-manager Issuers and Certificates refer to each other correctly (their CRD
schemas are not bundled, so structurally); NetworkPolicies select pods and name ports
those pods have; in a namespace that enforces Pod Security "restricted" every pod meets
it and has a read-only root filesystem; and a `skiff serve --config` server.properties
from a ConfigMap resolves with Skiff's own reader, its TLS files mounted from a Secret
that holds them.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import k8s_secure
import yaml

ROOT = Path(__file__).resolve().parents[1]
K8S = ROOT / "k8s"
KUBERNETES_VERSIONS = ("1.27.0", "1.37.0")  # oldest and newest schemas checked
KUSTOMIZATION_KEYS = {
    "apiVersion", "kind", "metadata", "namespace", "resources", "patches", "images"
}  # fmt: skip
CLUSTER_SCOPED = {"Namespace", "ClusterIssuer", "ClusterRole", "ClusterRoleBinding"}
CERT_MANAGER = "cert-manager.io"
EXTERNAL_SECRETS = "skiff.dev/external-secrets"
CERT_MANAGER_KEYS = ("tls.crt", "tls.key", "ca.crt")  # what a Certificate's Secret holds
WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}
EXAMPLE_POD_IP = "10.1.2.3"
EXAMPLE_POD_NAME = "skiff-5d8f9c7b6-x2x7k"

Obj = dict[str, Any]


class RenderError(Exception):
    pass


# --- rendering ---------------------------------------------------------------------


def kustomization_dirs(root: Path = K8S) -> list[Path]:
    return sorted(p.parent for p in root.glob("*/kustomization.yaml"))


def _load_docs(path: Path) -> list[Obj]:
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    except yaml.YAMLError as exc:
        raise RenderError(f"{path}: not YAML: {exc}") from None
    for doc in docs:
        if not isinstance(doc, dict) or "kind" not in doc or "metadata" not in doc:
            raise RenderError(f"{path}: a document without kind/metadata")
    return docs


def _ident(obj: Obj) -> tuple[str, str, str]:
    meta = obj.get("metadata") or {}
    return obj.get("kind", ""), meta.get("name", ""), meta.get("namespace", "")


def render(directory: Path) -> list[Obj]:
    """The objects `kubectl kustomize DIRECTORY` prints, for the supported subset."""
    directory = directory.resolve()
    path = directory / "kustomization.yaml"
    if not path.is_file():
        raise RenderError(f"{directory}: no kustomization.yaml")
    spec = yaml.safe_load(path.read_text()) or {}
    unknown = set(spec) - KUSTOMIZATION_KEYS
    if unknown:
        raise RenderError(f"{path}: unsupported kustomization fields {sorted(unknown)}")
    objs: list[Obj] = []
    for entry in spec.get("resources") or []:
        target = (directory / entry).resolve()
        if target.is_dir():
            objs += render(target)
        elif target.is_file():
            if directory not in target.parents:  # kustomize's load restrictor
                raise RenderError(f"{path}: resource file {entry} is outside {directory}")
            objs += _load_docs(target)
        else:
            raise RenderError(f"{path}: resource {entry} does not exist")
    seen: set[tuple[str, str, str]] = set()
    for obj in objs:
        if _ident(obj) in seen:
            raise RenderError(f"{path}: {_ident(obj)[:2]} is defined twice")
        seen.add(_ident(obj))
    for patch in spec.get("patches") or []:
        _apply_patch(directory, path, patch, objs)
    for image in spec.get("images") or []:
        _set_image(objs, image)
    if spec.get("namespace"):
        for obj in objs:
            if obj["kind"] not in CLUSTER_SCOPED:
                obj["metadata"]["namespace"] = spec["namespace"]
    return objs


def external_secrets(directory: Path) -> dict[str, set[str]]:
    """Secret name -> keys, declared in the kustomization's (and the kustomizations it
    includes') `skiff.dev/external-secrets` annotation: "name: key, key; name: key"."""
    directory = directory.resolve()
    spec = yaml.safe_load((directory / "kustomization.yaml").read_text()) or {}
    found: dict[str, set[str]] = {}
    for entry in spec.get("resources") or []:
        if (directory / entry).is_dir():
            for name, keys in external_secrets(directory / entry).items():
                found.setdefault(name, set()).update(keys)
    declared = ((spec.get("metadata") or {}).get("annotations") or {}).get(EXTERNAL_SECRETS, "")
    for item in filter(None, (i.strip() for i in declared.split(";"))):
        name, _, keys = item.partition(":")
        found.setdefault(name.strip(), set()).update(k.strip() for k in keys.split(",") if k)
    return found


def _matches(target: dict[str, Any], obj: Obj) -> bool:
    group, _, version = obj.get("apiVersion", "").rpartition("/")
    checks = {
        "kind": obj.get("kind"),
        "name": obj["metadata"].get("name"),
        "namespace": obj["metadata"].get("namespace"),
        "group": group,
        "version": version,
    }
    unknown = set(target) - set(checks)
    if unknown:
        raise RenderError(f"unsupported patch target fields {sorted(unknown)}")
    return all(checks[k] == v for k, v in target.items())


def _apply_patch(directory: Path, path: Path, patch: dict[str, Any], objs: list[Obj]) -> None:
    if set(patch) - {"path", "patch", "target"} or "target" not in patch:
        raise RenderError(f"{path}: a patch needs a target and path or patch, got {patch}")
    if "path" in patch:
        source = (directory / patch["path"]).resolve()
        if directory not in source.parents or not source.is_file():
            raise RenderError(f"{path}: patch file {patch['path']} is missing or outside")
        ops = yaml.safe_load(source.read_text())
    else:
        ops = yaml.safe_load(patch["patch"])
    if not isinstance(ops, list):
        raise RenderError(f"{path}: only JSON patches (a list of operations) are supported")
    hits = [obj for obj in objs if _matches(patch["target"], obj)]
    if not hits:
        raise RenderError(f"{path}: patch target {patch['target']} matches no resource")
    for obj in hits:
        for op in ops:
            try:
                json_patch(obj, op)
            except (KeyError, IndexError, TypeError, ValueError) as exc:
                raise RenderError(
                    f"{path}: patch {op.get('op')} {op.get('path')} on "
                    f"{obj['kind']}/{obj['metadata']['name']}: {exc!r}"
                ) from None


def _pointer(path: str) -> list[str]:
    if not path.startswith("/"):
        raise ValueError(f"JSON pointer {path!r} does not start with /")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def json_patch(doc: Obj, op: dict[str, Any]) -> None:
    """One RFC 6902 operation (add, remove, replace, test) applied in place."""
    parts = _pointer(op["path"])
    parent: Any = doc
    for part in parts[:-1]:
        parent = parent[int(part)] if isinstance(parent, list) else parent[part]
    last = parts[-1]
    kind = op["op"]
    if kind not in ("add", "remove", "replace", "test"):
        raise ValueError(f"unsupported op {kind}")
    if isinstance(parent, list):
        if kind == "add":
            index = len(parent) if last == "-" else int(last)
            if not 0 <= index <= len(parent):
                raise IndexError(index)
            parent.insert(index, copy.deepcopy(op["value"]))
            return
        index = int(last)
        if not 0 <= index < len(parent):
            raise IndexError(index)
    elif not isinstance(parent, dict):
        raise TypeError(f"{op['path']}: parent is not an object or array")
    else:
        index = last  # type: ignore[assignment]
        if kind != "add" and last not in parent:
            raise KeyError(last)
    if kind == "remove":
        del parent[index]
    elif kind == "test":
        if parent[index] != op["value"]:
            raise ValueError(f"test failed: {parent[index]!r} != {op['value']!r}")
    else:
        parent[index] = copy.deepcopy(op["value"])


def _image_name(image: str) -> tuple[str, str]:
    """(name, tag-or-digest suffix) of an image reference."""
    if "@" in image:
        name, _, digest = image.partition("@")
        return name, "@" + digest
    slash = image.rfind("/")
    colon = image.rfind(":")
    if colon > slash:
        return image[:colon], image[colon:]
    return image, ""


def _containers(obj: Obj) -> Iterator[Obj]:
    spec = _pod_spec(obj)
    if spec is not None:
        yield from spec.get("initContainers") or []
        yield from spec.get("containers") or []


def _set_image(objs: list[Obj], entry: dict[str, Any]) -> None:
    if set(entry) - {"name", "newName", "newTag", "digest"}:
        raise RenderError(f"unsupported images entry {entry}")
    for obj in objs:
        for container in _containers(obj):
            name, suffix = _image_name(container.get("image", ""))
            if name != entry["name"]:
                continue
            name = entry.get("newName", name)
            if "digest" in entry:
                suffix = "@" + entry["digest"]
            elif "newTag" in entry:
                suffix = ":" + str(entry["newTag"])
            container["image"] = name + suffix


# --- checks ------------------------------------------------------------------------


def _pod_spec(obj: Obj) -> Obj | None:
    if obj.get("kind") in WORKLOADS:
        return (((obj.get("spec") or {}).get("template") or {}).get("spec")) or None
    return None


def _pod_labels(obj: Obj) -> dict[str, str]:
    return ((obj["spec"].get("template") or {}).get("metadata") or {}).get("labels") or {}


def _selects(selector: dict[str, str] | None, labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def schema_errors(objs: list[Obj], versions: tuple[str, ...] = KUBERNETES_VERSIONS) -> list[str]:
    import kubernetes_validate

    errors = []
    for obj in objs:
        if obj.get("apiVersion", "").startswith(CERT_MANAGER + "/"):
            continue  # no bundled CRD schema: k8s_secure.cert_manager_errors checks these
        for version in versions:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                where = "/".join(str(p) for p in exc.absolute_path)
                errors.append(f"{_name(obj)}: Kubernetes {version} schema: {where}: {exc.message}")
            except kubernetes_validate.SchemaNotFoundError as exc:
                errors.append(f"{_name(obj)}: {exc.message}")
    return errors


def _name(obj: Obj) -> str:
    return f"{obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}"


def reference_errors(objs: list[Obj]) -> list[str]:
    errors: list[str] = []
    configmaps = {
        o["metadata"]["name"]: o.get("data") or {} for o in objs if o["kind"] == "ConfigMap"
    }
    services = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Service"}
    workloads = [o for o in objs if o["kind"] in WORKLOADS]

    for obj in workloads:
        errors += _workload_errors(obj, configmaps, services, objs)

    for svc in services.values():
        selector = svc["spec"].get("selector")
        if not selector:
            continue
        pods = [w for w in workloads if _selects(selector, _pod_labels(w))]
        if not pods:
            errors.append(f"{_name(svc)}: selector {selector} selects no pod template")
            continue
        for port in svc["spec"].get("ports") or []:
            target = port.get("targetPort", port["port"])
            if not any(_port_in(target, c) for w in pods for c in _containers(w)):
                errors.append(
                    f"{_name(svc)}: targetPort {target!r} is no port of the pods "
                    f"it selects ({', '.join(_name(w) for w in pods)})"
                )

    for pdb in (o for o in objs if o["kind"] == "PodDisruptionBudget"):
        selector = (pdb["spec"].get("selector") or {}).get("matchLabels")
        if not any(_selects(selector, _pod_labels(w)) for w in workloads):
            errors.append(f"{_name(pdb)}: selector {selector} selects no pod template")

    for hpa in (o for o in objs if o["kind"] == "HorizontalPodAutoscaler"):
        ref = hpa["spec"]["scaleTargetRef"]
        target = next(
            (
                w
                for w in workloads
                if w["kind"] == ref["kind"] and w["metadata"]["name"] == ref["name"]
            ),
            None,
        )
        if target is None:
            errors.append(f"{_name(hpa)}: scaleTargetRef {ref['kind']}/{ref['name']} not found")
            continue
        if "replicas" in target["spec"]:
            errors.append(
                f"{_name(target)}: sets replicas, which {_name(hpa)} owns "
                "(every kubectl apply would reset the autoscaled count)"
            )
        for metric in hpa["spec"].get("metrics") or []:
            resource = (metric.get("resource") or {}).get("name")
            for c in _containers(target):
                if resource and resource not in ((c.get("resources") or {}).get("requests") or {}):
                    errors.append(
                        f"{_name(target)}: container {c['name']} has no {resource} "
                        f"request, which {_name(hpa)} scales on"
                    )
    return errors


def _port_in(port: Any, container: Obj) -> bool:
    ports = container.get("ports") or []
    if isinstance(port, str):
        return any(p.get("name") == port for p in ports)
    return any(p.get("containerPort") == port for p in ports)


def _probe_ports(container: Obj) -> Iterator[tuple[str, Any]]:
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        handler = container.get(probe) or {}
        for kind in ("httpGet", "tcpSocket", "grpc"):
            if kind in handler:
                yield probe, handler[kind]["port"]


def _workload_errors(
    obj: Obj, configmaps: dict[str, dict[str, str]], services: dict[str, Obj], objs: list[Obj]
) -> list[str]:
    errors: list[str] = []
    spec = obj["spec"]
    labels = _pod_labels(obj)
    selector = (spec.get("selector") or {}).get("matchLabels")
    if obj["kind"] != "Job" and not _selects(selector, labels):
        errors.append(f"{_name(obj)}: selector {selector} does not match its pod labels {labels}")
    pod = _pod_spec(obj) or {}
    for tsc in pod.get("topologySpreadConstraints") or []:
        if not _selects((tsc.get("labelSelector") or {}).get("matchLabels"), labels):
            errors.append(f"{_name(obj)}: a topologySpreadConstraint does not select its own pods")
    if obj["kind"] == "StatefulSet":
        svc = services.get(spec.get("serviceName", ""))
        if svc is None or svc["spec"].get("clusterIP") != "None":
            errors.append(
                f"{_name(obj)}: serviceName {spec.get('serviceName')!r} is no headless Service"
            )
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    claims = {c["metadata"]["name"] for c in spec.get("volumeClaimTemplates") or []}
    for v in volumes.values():
        if "configMap" in v:
            cm = v["configMap"]
            if cm["name"] not in configmaps:
                errors.append(
                    f"{_name(obj)}: volume {v['name']}: ConfigMap {cm['name']} does not exist"
                )
            for item in cm.get("items") or []:
                if item["key"] not in configmaps.get(cm["name"], {}):
                    errors.append(f"{_name(obj)}: ConfigMap {cm['name']} has no key {item['key']}")
    for c in _containers(obj):
        where = f"{_name(obj)} container {c['name']}"
        image = c.get("image", "")
        if not _image_name(image)[1]:
            errors.append(f"{where}: image {image!r} has no tag or digest")
        for mount in c.get("volumeMounts") or []:
            if mount["name"] not in volumes and mount["name"] not in claims:
                errors.append(f"{where}: volumeMount {mount['name']} names no volume")
        for probe, port in _probe_ports(c):
            if not _port_in(port, c):
                errors.append(f"{where}: {probe} port {port!r} is no port of the container")
        env, args = _container_env(c, configmaps, where, errors)
        if _is_skiff(c):
            errors += _skiff_errors(obj, c, env, args, where, objs)
    return errors


_VAR = re.compile(r"(?<!\$)\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def _container_env(
    c: Obj,
    configmaps: dict[str, dict[str, str]],
    where: str,
    errors: list[str],
    pod_ip: str = EXAMPLE_POD_IP,
) -> tuple[dict[str, str], list[str]]:
    """The container's environment as Kubernetes builds it (envFrom, then env in order,
    $(VAR) expanded) and its args expanded; undefined references and missing
    ConfigMaps/keys are errors."""
    env: dict[str, str] = {}
    for source in c.get("envFrom") or []:
        ref = source.get("configMapRef")
        if ref is None:
            continue
        if ref["name"] not in configmaps:
            if not ref.get("optional"):
                errors.append(f"{where}: envFrom ConfigMap {ref['name']} does not exist")
            continue
        env.update({k: str(v) for k, v in configmaps[ref["name"]].items()})

    def expand(text: str, context: str) -> str:
        def one(m: re.Match[str]) -> str:
            if m.group(1) not in env:
                errors.append(
                    f"{where}: {context} refers to $({m.group(1)}), defined nowhere before it"
                )
                return m.group(0)
            return env[m.group(1)]

        return _VAR.sub(one, text)

    for var in c.get("env") or []:
        if "value" in var:
            env[var["name"]] = expand(str(var["value"]), f"env {var['name']}")
            continue
        source = var.get("valueFrom") or {}
        if "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            data = configmaps.get(ref["name"])
            if data is None or ref["key"] not in data:
                errors.append(
                    f"{where}: env {var['name']}: ConfigMap {ref['name']} key "
                    f"{ref['key']} does not exist"
                )
                continue
            env[var["name"]] = str(data[ref["key"]])
        elif (source.get("fieldRef") or {}).get("fieldPath") == "status.podIP":
            env[var["name"]] = pod_ip
        elif (source.get("fieldRef") or {}).get("fieldPath") == "metadata.name":
            env[var["name"]] = EXAMPLE_POD_NAME
        else:
            env[var["name"]] = f"<{var['name']}>"
    for a in c.get("command") or []:
        expand(str(a), "command")
    return env, [expand(str(a), "args") for a in c.get("args") or []]


def _is_skiff(c: Obj) -> bool:
    return _image_name(c.get("image", ""))[0].rsplit("/", 1)[-1] == "skiff"


@contextlib.contextmanager
def _environ(env: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _config_file(args: list[str], env: dict[str, str]) -> str | None:
    for i, arg in enumerate(args):
        if arg == "--config" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--config="):
            return arg.partition("=")[2]
    return env.get("SKIFF_CONFIG")


def _server_properties(
    obj: Obj,
    c: Obj,
    path: str,
    configmaps: dict[str, dict[str, str]],
    actions: Any,
    where: str,
    errors: list[str],
) -> tuple[dict[str, str], dict[str, str]]:
    """(flag values, properties) of the container's `--config` file, read from the
    ConfigMap mounted there and resolved by Skiff's own reader."""
    from sidecar.config import server_properties

    source = k8s_secure.mounted_file(_pod_spec(obj) or {}, c, path)
    if source is None or source[0] != "ConfigMap":
        errors.append(f"{where}: --config {path} is not a file of a mounted ConfigMap")
        return {}, {}
    text = configmaps.get(source[1], {}).get(source[2])
    if text is None:
        errors.append(f"{where}: --config {path}: ConfigMap {source[1]} has no key {source[2]}")
        return {}, {}
    try:
        props = server_properties.parse(text, path)
        loaded = server_properties.resolve(props, Path(path), actions)
        server_properties.check(loaded.values, actions)
    except server_properties.ConfigFileError as exc:
        errors.append(f"{where}: skiff serve refuses its config file: {exc}")
        return {}, {}
    errors += [f"{where}: {path}: {text}" for text in loaded.unsupported]
    return {f: v.value for f, v in loaded.values.items()}, {p.key: p.value for p in props}


def _file_errors(obj: Obj, c: Obj, props: dict[str, str], objs: list[Obj], where: str) -> list[str]:
    """Files server.properties names (`*.location`) are in a mounted Secret or ConfigMap
    that holds them."""
    errors: list[str] = []
    configmaps = {
        o["metadata"]["name"]: o.get("data") or {} for o in objs if o["kind"] == "ConfigMap"
    }
    secrets = k8s_secure.secret_keys(objs, {})
    for key, value in props.items():
        if not key.endswith(".location") or not value.strip():
            continue
        source = k8s_secure.mounted_file(_pod_spec(obj) or {}, c, value.strip())
        if source is None:
            errors.append(f"{where}: {key}={value}: no Secret or ConfigMap is mounted there")
            continue
        kind, name, file = source
        held = configmaps.get(name, {}) if kind == "ConfigMap" else secrets.get(name)
        if held is not None and file not in held:  # None: an external Secret
            errors.append(f"{where}: {key}={value}: {kind} {name} has no key {file}")
    return errors


def _listener_errors(
    obj: Obj, c: Obj, parsed: Any, props: dict[str, str], objs: list[Obj], where: str
) -> list[str]:
    """Every listener binds all interfaces on a container port and advertises the pod's
    IP or DNS name; a TLS listener's certificate (a cert-manager Certificate's Secret)
    covers the advertised host and the Services clients bootstrap through."""
    errors: list[str] = []
    endpoints = getattr(parsed, "listeners", None) or ()
    if not endpoints:  # one PLAINTEXT listener: --listen / --advertise
        if parsed.listen.host != "0.0.0.0":
            errors.append(f"{where}: --listen {parsed.listen} is not reachable from other pods")
        advertised = parsed.advertise
        if advertised is None or advertised.host != EXAMPLE_POD_IP:
            errors.append(
                f"{where}: --advertise {advertised} is not the pod's IP: clients "
                "could not reach the broker Metadata names"
            )
        if not any(p.get("containerPort") == parsed.listen.port for p in c.get("ports") or []):
            errors.append(f"{where}: no containerPort for --listen port {parsed.listen.port}")
        return errors
    protocols = dict(getattr(parsed, "listener_security_protocol_map", ()) or ())
    advertised = {e.name: e.address for e in getattr(parsed, "advertised_listeners", ()) or ()}
    for endpoint in endpoints:
        name, bound = endpoint.name, endpoint.address
        if bound.host not in ("0.0.0.0", "::", ""):
            errors.append(f"{where}: listener {endpoint} is not reachable from other pods")
        port = next((p for p in c.get("ports") or [] if p.get("containerPort") == bound.port), None)
        if port is None:
            errors.append(f"{where}: no containerPort for listener {endpoint}")
        host = advertised.get(name, bound).host
        if host != EXAMPLE_POD_IP and not host.startswith(EXAMPLE_POD_NAME + "."):
            errors.append(
                f"{where}: listener {name} advertises {host}, not the pod's IP or "
                "name: clients could not reach the broker Metadata names"
            )
        if protocols.get(name, name) not in ("SSL", "SASL_SSL"):
            continue
        prefix = f"listener.name.{name.lower()}."
        cert_path = next(
            (
                props[k]
                for k in (
                    prefix + "ssl.keystore.certificate.location",
                    "ssl.keystore.certificate.location",
                    prefix + "ssl.keystore.location",
                    "ssl.keystore.location",
                )
                if k in props
            ),
            None,
        )
        source = k8s_secure.mounted_file(_pod_spec(obj) or {}, c, cert_path or "")
        cert = k8s_secure.certificates(objs).get((_ns(obj), source[1])) if source else None
        if cert is None:
            continue  # a certificate from elsewhere: its names cannot be checked here
        names = cert["spec"].get("dnsNames") or []
        wanted = [host] if host != EXAMPLE_POD_IP else []
        for svc in (o for o in objs if o["kind"] == "Service" and _ns(o) == _ns(obj)):
            selector = svc["spec"].get("selector")
            headless = svc["spec"].get("clusterIP") == "None"
            targets = {str(p.get("targetPort", p["port"])) for p in svc["spec"].get("ports") or []}
            if (
                not headless
                and _selects(selector, _pod_labels(obj))
                and port is not None
                and targets & {str(port.get("name")), str(bound.port)}
            ):
                wanted.append(f"{svc['metadata']['name']}.{_ns(obj) or 'default'}.svc")
        for want in wanted:
            if not k8s_secure.host_covered(want, names):
                errors.append(
                    f"{where}: listener {name}'s certificate ({_name(cert)}) does "
                    f"not cover {want}: clients verifying the host name would fail"
                )
    return errors


def _ns(obj: Obj) -> str:
    return (obj.get("metadata") or {}).get("namespace", "")


def _skiff_errors(
    obj: Obj, c: Obj, env: dict[str, str], args: list[str], where: str, objs: list[Obj]
) -> list[str]:
    """The container's `skiff serve` settings (its --config file included), parsed by
    Skiff's own CLI parser."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from sidecar.cli import main as cli

    errors: list[str] = []
    if c.get("command") or not args or args[0] != "serve":
        return [f"{where}: expected the image's entrypoint with args `serve ...`"]
    actions = cli._serve_actions(cli.build_parser())
    flags = {"SKIFF_" + f.upper().replace("-", "_") for f in actions}
    for name in env:
        if name.startswith("SKIFF_") and name not in flags:
            errors.append(f"{where}: {name} is no `skiff serve` setting")
    configmaps = {
        o["metadata"]["name"]: o.get("data") or {} for o in objs if o["kind"] == "ConfigMap"
    }
    config = _config_file(args, env)
    file_values, props = (
        ({}, {})
        if config is None
        else _server_properties(obj, c, config, configmaps, actions, where, errors)
    )
    # A Secret's value is not in the manifests (secret_errors checks it exists).
    from_secrets = {
        v["name"] for v in c.get("env") or [] if "secretKeyRef" in (v.get("valueFrom") or {})
    }
    env = {k: v for k, v in env.items() if k not in from_secrets or not k.startswith("SKIFF_")}
    stderr = io.StringIO()
    with _environ(env), contextlib.redirect_stderr(stderr):
        cli._FILE_VALUES.update(file_values)
        try:
            parsed = cli.build_parser().parse_args(args)
        except SystemExit:
            return errors + [
                f"{where}: skiff serve refuses its settings: "
                f"{stderr.getvalue().strip().splitlines()[-1]}"
            ]
        finally:
            cli._FILE_VALUES.clear()
    if parsed.redis_url is None:
        errors.append(
            f"{where}: no --redis-url (SKIFF_REDIS_URL): it would start an "
            "embedded redis-server, which the image does not have"
        )
    http = parsed.http_listen
    if http is None or http.host != "0.0.0.0":
        errors.append(
            f"{where}: --http-listen {http} is not reachable by the kubelet's "
            "probes (use 0.0.0.0:PORT)"
        )
    errors += _listener_errors(obj, c, parsed, props, objs, where)
    errors += _file_errors(obj, c, props, objs, where)
    named = {p.get("name"): p["containerPort"] for p in c.get("ports") or []}
    for probe, port in _probe_ports(c):
        number = named.get(port, port)
        if http is not None and number != http.port:
            errors.append(f"{where}: {probe} port {port!r} is not --http-listen's {http.port}")
    paths = {
        p: ((c.get(p) or {}).get("httpGet") or {}).get("path")
        for p in ("livenessProbe", "readinessProbe")
    }
    if paths != {"livenessProbe": "/healthz", "readinessProbe": "/readyz"}:
        errors.append(f"{where}: probes {paths}: liveness must be /healthz, readiness /readyz")
    pre_stop = ((c.get("lifecycle") or {}).get("preStop") or {}).get("exec") or {}
    sleep = pre_stop.get("command") or []
    sleep_s = float(sleep[1]) if len(sleep) == 2 and sleep[0] == "sleep" else 0.0
    grace = (_pod_spec(obj) or {}).get("terminationGracePeriodSeconds", 30)
    needed = sleep_s + parsed.shutdown_timeout_ms / 1000
    if grace <= needed:
        errors.append(
            f"{where}: terminationGracePeriodSeconds {grace} leaves no time after "
            f"preStop ({sleep_s:g} s) and --shutdown-timeout-ms "
            f"({parsed.shutdown_timeout_ms} ms)"
        )
    return errors


def skiff_containers(
    objs: list[Obj], pod_ip: str = EXAMPLE_POD_IP
) -> list[tuple[str, dict[str, str], list[str]]]:
    """(where, environment, args) of every Skiff container, as its pod would start it."""
    configmaps = {
        o["metadata"]["name"]: o.get("data") or {} for o in objs if o["kind"] == "ConfigMap"
    }
    found = []
    for obj in objs:
        for c in _containers(obj):
            if _is_skiff(c):
                where = f"{_name(obj)} container {c['name']}"
                errors: list[str] = []
                env, args = _container_env(c, configmaps, where, errors, pod_ip)
                if errors:
                    raise RenderError("; ".join(errors))
                found.append((where, env, args))
    return found


def check(directory: Path) -> list[str]:
    """Every problem of one kustomization directory (empty: none)."""
    try:
        objs = render(directory)
    except RenderError as exc:
        return [f"render: {exc}"]
    return (
        schema_errors(objs)
        + reference_errors(objs)
        + k8s_secure.secret_errors(objs, external_secrets(directory))
        + k8s_secure.cert_manager_errors(objs)
        + k8s_secure.network_policy_errors(objs)
        + k8s_secure.restricted_errors(objs)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("dirs", nargs="*", type=Path)
    parser.add_argument("--render", action="store_true", help="print the rendered YAML")
    args = parser.parse_args(argv)
    dirs = args.dirs or kustomization_dirs()
    if args.render:
        for d in dirs:
            sys.stdout.write(yaml.safe_dump_all(render(d), sort_keys=False))
        return 0
    failed = 0
    for d in dirs:
        problems = check(d)
        print(f"{d}: {'ok' if not problems else f'{len(problems)} problem(s)'}")
        for p in problems:
            print(f"  {p}")
        failed += bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
