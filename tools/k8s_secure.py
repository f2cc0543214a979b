"""The checks tools/k8s_check.py adds for a secured deployment (k8s/secure): Secrets,
cert-manager objects, NetworkPolicies, Pod Security "restricted", and the TLS files and
host names a Skiff container's server.properties relies on."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator
from typing import Any

Obj = dict[str, Any]

CERT_MANAGER_KEYS = frozenset({"tls.crt", "tls.key", "ca.crt"})
ISSUER_TYPES = {"selfSigned", "ca", "acme", "vault", "venafi"}
CERTIFICATE_FIELDS = {
    "secretName", "issuerRef", "dnsNames", "ipAddresses", "uris", "emailAddresses",
    "commonName", "duration", "renewBefore", "isCA", "usages", "privateKey", "subject",
    "secretTemplate", "keystores", "revisionHistoryLimit", "additionalOutputFormats",
    "literalSubject", "nameConstraints", "otherNames", "encodeUsagesInRequest",
}  # fmt: skip
PRIVATE_KEY_FIELDS = {"algorithm", "size", "encoding", "rotationPolicy"}
KEY_USAGES = {
    "signing", "digital signature", "content commitment", "key encipherment",
    "key agreement", "data encipherment", "cert sign", "crl sign", "encipher only",
    "decipher only", "any", "server auth", "client auth", "code signing", "email protection",
    "s/mime", "ipsec end system", "ipsec tunnel", "ipsec user", "timestamping",
    "ocsp signing", "microsoft sgc", "netscape sgc",
}  # fmt: skip
DURATION = re.compile(r"^(\d+(\.\d+)?(h|m|s|ms))+$")
# Volume types Pod Security "restricted" allows.
RESTRICTED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
    "projected", "secret",
}  # fmt: skip
RESTRICTED = "pod-security.kubernetes.io/enforce"


def _name(obj: Obj) -> str:
    return f"{obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}"


def _ns(obj: Obj) -> str:
    return (obj.get("metadata") or {}).get("namespace", "")


def _pod(obj: Obj) -> Obj | None:
    if obj.get("kind") in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"):
        return ((obj.get("spec") or {}).get("template") or {}).get("spec")
    return None


def _pod_labels(obj: Obj) -> dict[str, str]:
    return (((obj.get("spec") or {}).get("template") or {}).get("metadata") or {}).get(
        "labels"
    ) or {}


def _containers(pod: Obj) -> Iterator[Obj]:
    yield from pod.get("initContainers") or []
    yield from pod.get("containers") or []


def certificates(objs: list[Obj]) -> dict[tuple[str, str], Obj]:
    """(namespace, secretName) -> the cert-manager Certificate that writes that Secret."""
    return {
        (_ns(o), o["spec"]["secretName"]): o
        for o in objs
        if o["kind"] == "Certificate" and "secretName" in (o.get("spec") or {})
    }


def secret_keys(objs: list[Obj], external: dict[str, set[str]]) -> dict[str, set[str]]:
    """Secret name -> the keys it will hold: rendered Secrets, Secrets cert-manager
    writes, and those the operator creates (declared in the kustomization)."""
    keys: dict[str, set[str]] = {n: set(k) for n, k in external.items()}
    for o in objs:
        if o["kind"] == "Secret":
            held = set(o.get("data") or {}) | set(o.get("stringData") or {})
            keys.setdefault(o["metadata"]["name"], set()).update(held)
    for (_, secret), _cert in certificates(objs).items():
        keys.setdefault(secret, set()).update(CERT_MANAGER_KEYS)
    return keys


def secret_errors(objs: list[Obj], external: dict[str, set[str]]) -> list[str]:
    """Every Secret a pod uses (env, envFrom, volumes) exists with the keys it names."""
    keys = secret_keys(objs, external)
    errors: list[str] = []

    def need(where: str, name: str, key: str | None, optional: bool | None) -> None:
        if optional:
            return
        if name not in keys:
            errors.append(
                f"{where}: Secret {name} is neither in the manifests, nor written by "
                "a cert-manager Certificate, nor declared in skiff.dev/external-secrets"
            )
        elif key is not None and key not in keys[name]:
            errors.append(f"{where}: Secret {name} has no key {key}")

    for obj in objs:
        pod = _pod(obj)
        if pod is None:
            continue
        for volume in pod.get("volumes") or []:
            if "secret" in volume:
                ref = volume["secret"]
                where = f"{_name(obj)} volume {volume['name']}"
                need(where, ref.get("secretName", ""), None, ref.get("optional"))
                for item in ref.get("items") or []:
                    need(where, ref.get("secretName", ""), item["key"], ref.get("optional"))
        for c in _containers(pod):
            where = f"{_name(obj)} container {c['name']}"
            for source in c.get("envFrom") or []:
                if "secretRef" in source:
                    ref = source["secretRef"]
                    need(where, ref["name"], None, ref.get("optional"))
            for var in c.get("env") or []:
                ref = (var.get("valueFrom") or {}).get("secretKeyRef")
                if ref is not None:
                    need(f"{where} env {var['name']}", ref["name"], ref["key"], ref.get("optional"))
    return errors


def cert_manager_errors(objs: list[Obj]) -> list[str]:
    """cert-manager's CRD schemas are not bundled: Issuers and Certificates are checked
    here, field names included, and so that each Certificate's issuer exists."""
    errors: list[str] = []
    issuers = {(_ns(o), o["metadata"]["name"]) for o in objs if o["kind"] == "Issuer"}
    cluster_issuers = {o["metadata"]["name"] for o in objs if o["kind"] == "ClusterIssuer"}
    written = certificates(objs)
    for o in objs:
        if not o.get("apiVersion", "").startswith("cert-manager.io/"):
            continue
        spec = o.get("spec") or {}
        if o.get("apiVersion") != "cert-manager.io/v1":
            errors.append(f"{_name(o)}: apiVersion {o.get('apiVersion')} (use cert-manager.io/v1)")
        if o["kind"] in ("Issuer", "ClusterIssuer"):
            types = set(spec) & ISSUER_TYPES
            if len(types) != 1 or set(spec) - ISSUER_TYPES:
                errors.append(f"{_name(o)}: spec must be exactly one of {sorted(ISSUER_TYPES)}")
            ca_secret = (spec.get("ca") or {}).get("secretName")
            if "ca" in spec and (_ns(o), ca_secret) not in written:
                errors.append(
                    f"{_name(o)}: ca.secretName {ca_secret} is written by no Certificate here"
                )
        elif o["kind"] == "Certificate":
            unknown = set(spec) - CERTIFICATE_FIELDS
            if unknown:
                errors.append(f"{_name(o)}: unknown spec fields {sorted(unknown)}")
            if not spec.get("secretName"):
                errors.append(f"{_name(o)}: no secretName")
            ref = spec.get("issuerRef") or {}
            kind = ref.get("kind", "Issuer")
            if kind == "Issuer" and (_ns(o), ref.get("name")) not in issuers:
                errors.append(f"{_name(o)}: issuerRef Issuer {ref.get('name')} is not here")
            elif kind == "ClusterIssuer" and ref.get("name") not in cluster_issuers:
                errors.append(
                    f"{_name(o)}: issuerRef ClusterIssuer {ref.get('name')} is not "
                    "here (create it, or use an Issuer)"
                )
            if not (spec.get("dnsNames") or spec.get("commonName") or spec.get("ipAddresses")):
                errors.append(f"{_name(o)}: names nothing (dnsNames, ipAddresses, commonName)")
            for field in ("duration", "renewBefore"):
                if field in spec and not DURATION.match(str(spec[field])):
                    errors.append(f"{_name(o)}: {field} {spec[field]!r} is not a Go duration")
            key = spec.get("privateKey") or {}
            if set(key) - PRIVATE_KEY_FIELDS:
                errors.append(
                    f"{_name(o)}: unknown privateKey fields {sorted(set(key) - PRIVATE_KEY_FIELDS)}"
                )
            if key.get("algorithm", "RSA") not in ("RSA", "ECDSA", "Ed25519"):
                errors.append(f"{_name(o)}: privateKey.algorithm {key.get('algorithm')!r}")
            bad = set(spec.get("usages") or []) - KEY_USAGES
            if bad:
                errors.append(f"{_name(o)}: unknown usages {sorted(bad)}")
    return errors


def _selected(selector: Obj | None, namespace: str, objs: list[Obj]) -> list[Obj]:
    """Workloads of `namespace` whose pods a NetworkPolicy podSelector selects."""
    labels = (selector or {}).get("matchLabels") or {}
    return [
        o for o in objs
        if _pod(o) is not None and _ns(o) == namespace
        and all(_pod_labels(o).get(k) == v for k, v in labels.items())
    ]  # fmt: skip


def network_policy_errors(objs: list[Obj]) -> list[str]:
    """Each NetworkPolicy selects pods, its `from` pod selectors select pods, and the
    ports it names are ports of the pods it protects."""
    errors: list[str] = []
    for policy in (o for o in objs if o["kind"] == "NetworkPolicy"):
        spec = policy["spec"]
        if (spec["podSelector"] or {}).get("matchExpressions"):
            errors.append(f"{_name(policy)}: matchExpressions are not checked; use matchLabels")
        targets = _selected(spec["podSelector"], _ns(policy), objs)
        if not targets:
            errors.append(f"{_name(policy)}: podSelector selects no pod")
            continue
        for rule in spec.get("ingress") or []:
            for peer in rule.get("from") or []:
                if "podSelector" in peer and "namespaceSelector" not in peer:
                    if not _selected(peer["podSelector"], _ns(policy), objs):
                        errors.append(
                            f"{_name(policy)}: from podSelector "
                            f"{peer['podSelector']} selects no pod"
                        )
            for port in rule.get("ports") or []:
                wanted = port.get("port")
                for target in targets:
                    if not any(_has_port(c, wanted) for c in _containers(_pod(target) or {})):
                        errors.append(
                            f"{_name(policy)}: port {wanted!r} is no port of {_name(target)}"
                        )
    return errors


def _has_port(container: Obj, port: Any) -> bool:
    ports = container.get("ports") or []
    if isinstance(port, str):
        return any(p.get("name") == port for p in ports)
    return port is None or any(p.get("containerPort") == port for p in ports)


def allows(objs: list[Obj], source_labels: dict[str, str], target: Obj, port: str) -> bool:
    """Whether the NetworkPolicies let a pod with `source_labels` (same namespace) reach
    the named port of `target`'s pods: no policy selecting the target means open."""
    namespace = _ns(target)
    policies = [
        p for p in objs
        if p["kind"] == "NetworkPolicy" and _ns(p) == namespace
        and "Ingress" in (p["spec"].get("policyTypes") or ["Ingress"])
        and target in _selected(p["spec"]["podSelector"], namespace, objs)
    ]  # fmt: skip
    if not policies:
        return True
    for policy in policies:
        for rule in policy["spec"].get("ingress") or []:
            peers = rule.get("from")
            ports = [p.get("port") for p in rule.get("ports") or []]
            if ports and port not in ports:
                continue
            if peers is None:
                return True
            for peer in peers:
                labels = (peer.get("podSelector") or {}).get("matchLabels") or {}
                if "podSelector" in peer and all(
                    source_labels.get(k) == v for k, v in labels.items()
                ):
                    return True
    return False


def restricted_errors(objs: list[Obj]) -> list[str]:
    """Pods in a namespace enforcing Pod Security "restricted" meet it (non-root, no
    privilege escalation, capabilities dropped, seccomp, allowed volume types), and have
    a read-only root filesystem (Skiff's rule for its secured variant, not the standard's)."""
    strict = {
        o["metadata"]["name"] for o in objs
        if o["kind"] == "Namespace"
        and ((o["metadata"].get("labels") or {}).get(RESTRICTED) == "restricted")
    }  # fmt: skip
    errors: list[str] = []
    for obj in objs:
        pod = _pod(obj)
        if pod is None or _ns(obj) not in strict:
            continue
        pod_sc = pod.get("securityContext") or {}
        for field in ("hostNetwork", "hostPID", "hostIPC"):
            if pod.get(field):
                errors.append(f"{_name(obj)}: {field} is not allowed")
        for volume in pod.get("volumes") or []:
            kinds = set(volume) - {"name"}
            if not kinds <= RESTRICTED_VOLUMES:
                errors.append(f"{_name(obj)}: volume {volume['name']} type {sorted(kinds)}")
        for c in _containers(pod):
            sc = c.get("securityContext") or {}
            where = f"{_name(obj)} container {c['name']}"
            if not sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")):
                errors.append(f"{where}: runAsNonRoot is not true")
            if sc.get("runAsUser", pod_sc.get("runAsUser")) == 0:
                errors.append(f"{where}: runAsUser 0")
            seccomp = (sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}).get("type")
            if seccomp not in ("RuntimeDefault", "Localhost"):
                errors.append(f"{where}: seccompProfile {seccomp} (RuntimeDefault or Localhost)")
            if sc.get("allowPrivilegeEscalation") is not False:
                errors.append(f"{where}: allowPrivilegeEscalation is not false")
            if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
                errors.append(f"{where}: capabilities do not drop ALL")
            if set((sc.get("capabilities") or {}).get("add") or []) - {"NET_BIND_SERVICE"}:
                errors.append(f"{where}: adds capabilities")
            if sc.get("readOnlyRootFilesystem") is not True:
                errors.append(f"{where}: readOnlyRootFilesystem is not true")
    return errors


def mounted_file(pod: Obj, container: Obj, path: str) -> tuple[str, str, str] | None:
    """(volume kind, source name, key) of a file a container reads from a ConfigMap or
    Secret volume mounted at its directory; None when no such volume is mounted there."""
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    directory, _, filename = path.rpartition("/")
    for mount in container.get("volumeMounts") or []:
        if mount["mountPath"].rstrip("/") != directory or mount.get("subPath"):
            continue
        volume = volumes.get(mount["name"]) or {}
        if "secret" in volume:
            return "Secret", volume["secret"].get("secretName", ""), filename
        if "configMap" in volume:
            return "ConfigMap", volume["configMap"]["name"], filename
    return None


def host_covered(host: str, names: list[str]) -> bool:
    """Whether a certificate with these dnsNames is valid for `host` (RFC 6125: a
    wildcard stands for exactly one left-most label)."""
    for name in names:
        if name.startswith("*."):
            first, _, rest = host.partition(".")
            if first and rest == name[2:]:
                return True
        elif fnmatch.fnmatchcase(host.lower(), name.lower()) and "*" not in name:
            return True
    return False
