"""Observability: OpenTelemetry traces (tracing.py), Prometheus metrics (metrics.py),
the per-request accounting both feed on (requests.py), Redis round-trip timing
(redis_calls.py), the HTTP endpoint for /healthz, /readyz and /metrics (http.py) and
structured logs (logs.py). runtime.py starts and stops them with the sidecar."""
