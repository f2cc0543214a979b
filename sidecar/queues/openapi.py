"""The OpenAPI 3.1 document of the HTTP queue API (GET /v1/openapi.json). Schemas are
JSON Schema 2020-12 (as OpenAPI 3.1 says), so tests validate real answers with
jsonschema; tests/test_queues_http.py also checks that the document's paths are
exactly the routes the app serves."""

from __future__ import annotations

from typing import Any

from sidecar.validation import topic_names

REF = "#/components/schemas/"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": REF + name}


def _obj(props: dict[str, Any], required: list[str] | None = None, extra: bool = False) -> dict:
    out: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        out["required"] = required
    if not extra:
        out["additionalProperties"] = False
    return out


INT = {"type": "integer"}
NINT = {"type": ["integer", "null"]}  # null: leave the setting as it is
STR = {"type": "string"}
NSTR = {"type": ["string", "null"]}
WORKER = {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[^~]"}
TOPIC = topic_names.JSON_SCHEMA  # Kafka's topic name rules (sidecar/validation)
PARTITION = {"type": "integer", "minimum": 0, "maximum": 2**31 - 1}
OFFSET = {"type": "integer", "minimum": 0, "maximum": 2**63 - 1}
ENCODING = {
    "type": "string",
    "enum": ["utf8", "base64"],
    "description": "utf8: the string is the bytes as UTF-8 text; base64: standard base64 "
    "of the bytes (used when they are not valid UTF-8)",
}
BASE64 = "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"


def _base64_when(field: str) -> dict[str, Any]:
    """`field` is standard base64 (padded) when its *_encoding marker says base64."""
    return {
        "if": {
            "properties": {f"{field}_encoding": {"const": "base64"}},
            "required": [f"{field}_encoding"],
        },
        "then": {"properties": {field: {"type": ["string", "null"], "pattern": BASE64}}},
    }


ERROR_BODY = _obj(
    {
        "error": _obj({"code": STR, "message": STR}, ["code", "message"]),
        "results": {"type": "array", "items": _ref("SettleResult")},
    },
    ["error"],
)

SCHEMAS: dict[str, Any] = {
    "Error": ERROR_BODY,
    "QueueConfigUpdate": _obj(
        {
            "lock_ms": {**NINT, "minimum": 1, "maximum": 3_600_000, "default": 30000},
            "delivery_limit": {**NINT, "minimum": 1, "maximum": 1000, "default": 5},
            "dead_letter_topic": {"anyOf": [TOPIC, {"type": "null"}]},
            "auto_offset_reset": {"enum": ["earliest", "latest", None]},
            "isolation_level": {"enum": ["read_uncommitted", "read_committed", None]},
        }
    ),
    "QueueConfig": _obj(
        {
            "group": STR,
            "lock_ms": INT,
            "delivery_limit": INT,
            "dead_letter_topic": NSTR,
            # by_duration:<ISO-8601 duration>: set by a Kafka client (share.auto.offset.reset)
            "auto_offset_reset": {
                "type": "string",
                "pattern": "^(earliest|latest|by_duration:.+)$",
            },
            "isolation_level": {"type": "string", "enum": ["read_uncommitted", "read_committed"]},
        },
        [
            "group",
            "lock_ms",
            "delivery_limit",
            "dead_letter_topic",
            "auto_offset_reset",
            "isolation_level",
        ],
    ),
    "GroupList": _obj({"groups": {"type": "array", "items": STR}}, ["groups"]),
    "Deleted": _obj({"deleted": STR}, ["deleted"]),
    "Header": {
        **_obj({"key": STR, "value": NSTR, "value_encoding": ENCODING}, ["key", "value"]),
        **_base64_when("value"),
    },
    "Record": _obj(
        {
            "topic": STR,
            "partition": INT,
            "offset": INT,
            "delivery_count": {**INT, "minimum": 1},
            "lease_deadline_ms": INT,
            "timestamp": INT,
            "key": NSTR,
            "key_encoding": ENCODING,
            "value": NSTR,
            "value_encoding": ENCODING,
            "headers": {"type": "array", "items": _ref("Header")},
        },
        [
            "topic",
            "partition",
            "offset",
            "delivery_count",
            "lease_deadline_ms",
            "timestamp",
            "key",
            "key_encoding",
            "value",
            "value_encoding",
            "headers",
        ],
    ),
    "ReadRequest": _obj(
        {
            "topics": {
                "oneOf": [
                    TOPIC,
                    {"type": "array", "items": TOPIC, "minItems": 1, "maxItems": 100},
                ]
            },
            "max_records": {**INT, "minimum": 1, "maximum": 10000, "default": 100},
            "max_bytes": {**INT, "minimum": 1, "maximum": 2**31 - 1},
            "wait_ms": {**INT, "minimum": 0, "maximum": 60000, "default": 0},
            "worker": {
                **WORKER,
                "description": "the worker id leases are held under; one is made up "
                "(and returned) when absent",
            },
        },
        ["topics"],
    ),
    "ReadResponse": _obj(
        {"worker": STR, "records": {"type": "array", "items": _ref("Record")}},
        ["worker", "records"],
    ),
    "RecordRef": _obj(
        {"topic": TOPIC, "partition": PARTITION, "offset": OFFSET},
        ["topic", "partition", "offset"],
    ),
    "SettleRequest": _obj(
        {
            "worker": WORKER,
            "records": {
                "type": "array",
                "items": _ref("RecordRef"),
                "minItems": 1,
                "maxItems": 10000,
            },
        },
        ["worker", "records"],
    ),
    "SettleResult": _obj(
        {
            "topic": STR,
            "partition": INT,
            "offset": INT,
            "lease_deadline_ms": INT,
            "error": {
                "oneOf": [
                    {"type": "null"},
                    _obj(
                        {
                            "code": {
                                "type": "string",
                                "enum": [
                                    "RECORD_NOT_PENDING",
                                    "RECORD_HELD_BY_OTHER",
                                    "LEASE_EXPIRED",
                                ],
                            },
                            "message": STR,
                        },
                        ["code", "message"],
                    ),
                ]
            },
        },
        ["topic", "partition", "offset", "error"],
    ),
    "SettleResponse": _obj(
        {"results": {"type": "array", "items": _ref("SettleResult")}}, ["results"]
    ),
    "PartitionState": _obj(
        {
            "topic": STR,
            "partition": INT,
            "high_watermark": INT,
            "log_start_offset": INT,
            "next_offset": INT,
            "committed_offset": INT,
            "lag": INT,
            "pending": INT,
            "available_pending": INT,
            "oldest_lease_ms": INT,
            "delivery_counts": {"type": "object", "additionalProperties": INT},
            "holders": {"type": "object", "additionalProperties": INT},
        },
        [
            "topic",
            "partition",
            "high_watermark",
            "log_start_offset",
            "next_offset",
            "committed_offset",
            "lag",
            "pending",
            "available_pending",
            "oldest_lease_ms",
            "delivery_counts",
            "holders",
        ],
    ),
    "Description": _obj(
        {
            "group": STR,
            "lock_ms": INT,
            "delivery_limit": INT,
            "dead_letter_topic": NSTR,
            "auto_offset_reset": STR,
            "isolation_level": STR,
            "pending": INT,
            "lag": INT,
            "partitions": {"type": "array", "items": _ref("PartitionState")},
        },
        ["group", "lock_ms", "delivery_limit", "pending", "lag", "partitions"],
    ),
    "ResetRequest": _obj(
        {
            "topic": TOPIC,
            "partitions": {"type": "array", "items": PARTITION},
            "to": {"oneOf": [{"type": "string", "enum": ["earliest", "latest"]}, OFFSET]},
        },
        ["topic", "to"],
    ),
    "ResetResponse": _obj(
        {
            "partitions": {
                "type": "array",
                "items": _obj({"topic": STR, "partition": INT, "offset": INT}),
            }
        },
        ["partitions"],
    ),
    "RedriveRequest": _obj(
        {
            "limit": {**INT, "minimum": 1, "maximum": 1_000_000, "default": 1000},
            "dead_letter_topic": TOPIC,
        }
    ),
    "RedriveResponse": _obj(
        {"moved": INT, "skipped": INT, "dead_letter_topic": STR},
        ["moved", "skipped", "dead_letter_topic"],
    ),
    "ProduceRecord": _obj(
        {
            "key": NSTR,
            "key_encoding": ENCODING,
            "value": NSTR,
            "value_encoding": ENCODING,
            "headers": {"type": "array", "items": _ref("Header")},
            "partition": {**PARTITION, "type": ["integer", "null"]},  # null: by key
            "timestamp": OFFSET,
        }
    )
    | {"allOf": [_base64_when("key"), _base64_when("value")]},
    "ProduceRequest": _obj(
        {
            "records": {
                "type": "array",
                "items": _ref("ProduceRecord"),
                "minItems": 1,
                "maxItems": 10000,
            }
        },
        ["records"],
    ),
    "ProduceResponse": _obj(
        {
            "offsets": {
                "type": "array",
                "items": _obj({"partition": INT, "offset": INT}, ["partition", "offset"]),
            }
        },
        ["offsets"],
    ),
}


def _json(schema: str) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": _ref(schema)}}}


def _op(
    summary: str,
    ok: str,
    status: str = "200",
    body: str | None = None,
    errors: tuple[str, ...] = (),
    body_required: bool = True,
    more_params: list[dict[str, Any]] | None = None,
    more: dict[str, Any] | None = None,
) -> dict[str, Any]:
    responses: dict[str, Any] = {status: {"description": "done", **_json(ok)}}
    for code in ("400", "404", *errors):  # 404 also for a path no route matches
        responses[code] = {"description": "error", **_json("Error")}
    responses["401"] = {"description": "credentials missing or refused", **_json("Error")}
    responses["403"] = {"description": "an ACL refuses it (Kafka's error name)", **_json("Error")}
    if body:
        responses["413"] = {"description": "body over 16 MiB", **_json("Error")}
    responses["500"] = {"description": "a bug (logged)", **_json("Error")}
    responses["503"] = {"description": "Redis unavailable", **_json("Error")}
    out: dict[str, Any] = {"summary": summary, "responses": {**responses, **(more or {})}}
    if more_params:
        out["parameters"] = more_params
    if body:
        out["requestBody"] = {"required": body_required, **_json(body)}
    return out


GROUP = [{"name": "group", "in": "path", "required": True, "schema": STR}]
# A group made over HTTP: a name that needs no escaping (what http_api checks).
NEW_GROUP = {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,249}$"}


def _settle(verb: str, what: str) -> dict[str, Any]:
    return {
        "parameters": GROUP,
        "post": _op(
            what,
            "SettleResponse",
            body="SettleRequest",
            errors=("409",),
        ),
    }


PATHS: dict[str, Any] = {
    "/v1/openapi.json": {
        "get": {
            "summary": "This document",
            "responses": {"200": {"description": "the OpenAPI document"}},
        }
    },
    "/v1/queues": {"get": _op("List queue groups", "GroupList")},
    "/v1/queues/{group}": {
        "parameters": GROUP,
        "put": _op(
            "Create a queue group or change its settings (201 when created)",
            "QueueConfig",
            body="QueueConfigUpdate",
            errors=("409",),
            body_required=False,  # none: the defaults
            more_params=[{**GROUP[0], "schema": NEW_GROUP}],
            more={"201": {"description": "created", **_json("QueueConfig")}},
        ),
        "get": _op("Describe a queue group: settings and per-partition state", "Description"),
        "delete": _op("Delete a queue group (its leases and positions)", "Deleted"),
    },
    "/v1/queues/{group}/records:read": {
        "parameters": GROUP,
        "post": _op(
            "Read records under leases; with wait_ms, wait for records (long poll)",
            "ReadResponse",
            body="ReadRequest",
        ),
    },
    "/v1/queues/{group}/records:acknowledge": _settle("acknowledge", "Finish records"),
    "/v1/queues/{group}/records:cancel": _settle(
        "cancel", "Release records: available to any worker at once"
    ),
    "/v1/queues/{group}/records:reject": _settle(
        "reject", "Finish records unprocessed; copied to the dead-letter topic if set"
    ),
    "/v1/queues/{group}/records:renew": _settle("renew", "Start the records' leases again"),
    "/v1/queues/{group}/offsets:reset": {
        "parameters": GROUP,
        "post": _op(
            "Start partitions again at an offset (pending records are dropped)",
            "ResetResponse",
            body="ResetRequest",
        ),
    },
    "/v1/queues/{group}/dead-letters:redrive": {
        "parameters": GROUP,
        "post": _op(
            "Move the group's dead letters back to their topics and partitions",
            "RedriveResponse",
            body="RedriveRequest",
            body_required=False,
        ),
    },
    "/v1/topics/{topic}/records": {
        "parameters": [{"name": "topic", "in": "path", "required": True, "schema": TOPIC}],
        "post": _op("Append records to a topic", "ProduceResponse", body="ProduceRequest"),
    },
}

DOCUMENT: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {
        "title": "Skiff queue API",
        "version": "1",
        "description": "Queue-style consumption of Skiff topics: records handed to any "
        "number of workers under leases (docs/queues.md). Keys, values and header values "
        "are UTF-8 strings when their bytes are valid UTF-8, else base64; "
        "*_encoding says which.",
    },
    "paths": PATHS,
    "components": {"schemas": SCHEMAS},
}

# --http-auth's schemes (sidecar/security/http_auth.py), as OpenAPI declares them.
SECURITY_SCHEMES: dict[str, Any] = {
    "basic": {
        "type": "http",
        "scheme": "basic",
        "description": "a SASL user: PLAIN users file or SCRAM credential (over TLS)",
    },
    "bearer": {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "JWT",
        "description": "a JWT validated as SASL/OAUTHBEARER validates it",
    },
}


def document(schemes: tuple[str, ...] = (), open_paths: tuple[str, ...] = ()) -> dict[str, Any]:
    """The document a sidecar serves: with --http-auth, its schemes are required on every
    path except the open ones (which declare no security)."""
    if not schemes:
        return DOCUMENT
    paths: dict[str, Any] = {}
    for path, item in PATHS.items():
        if path in open_paths:
            item = {k: {**v, "security": []} if k in METHODS else v for k, v in item.items()}
        paths[path] = item
    return {
        **DOCUMENT,
        "paths": paths,
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {s: SECURITY_SCHEMES[s] for s in schemes},
        },
        "security": [{s: []} for s in schemes],
    }


METHODS = frozenset({"get", "put", "post", "delete"})


def schema(name: str) -> dict[str, Any]:
    """A self-contained JSON Schema for components.schemas[name] (for validators)."""
    return {"$ref": REF + name, "components": {"schemas": SCHEMAS}}
