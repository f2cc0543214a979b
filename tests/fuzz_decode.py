"""Coverage-guided fuzzing (atheris/libFuzzer) of request decoding: the frame parsing
and body decoding every request goes through before its handler (sidecar.server's
decode_body). A malformed frame may raise only BadFrame or CloseConnection (the
connection is closed with one log line); anything else, a crash or an abort is a
finding. Run by tests/test_fuzz.py in a child process (an abort must not take pytest
down):

    python tests/fuzz_decode.py CORPUS_DIR -max_total_time=SECONDS [libFuzzer flags]

CORPUS_DIR is seeded with a valid frame for every API and version Skiff serves
(tests/request_samples.py); libFuzzer adds the inputs that reach new code.
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parent))

with atheris.instrument_imports(include=["sidecar", "kio"]):
    from sidecar import apis
    from sidecar.protocol.framing import BadFrame, CloseConnection, parse_header_prefix
    from sidecar.server import decode_body


def one_frame(data: bytes) -> None:
    try:
        header, pos = parse_header_prefix(data)
    except BadFrame:
        return
    handler = apis.HANDLERS.get(header.api_key)
    if handler is None or not handler.MIN_VERSION <= header.api_version <= handler.MAX_VERSION:
        return  # closed by dispatch before any decoding
    try:
        decode_body(handler, header, data, pos)
    except CloseConnection:
        pass


def seed(corpus: Path) -> None:
    """A valid frame (without its size prefix) per served API and version."""
    import request_samples

    corpus.mkdir(parents=True, exist_ok=True)
    for key, version in request_samples.served():
        frame = request_samples.frame(key, version, request_samples.body(key, version), 1)
        (corpus / f"seed-{key}-{version}").write_bytes(frame[4:])


if __name__ == "__main__":
    seed(Path(sys.argv[1]))
    atheris.Setup(sys.argv, one_frame)
    atheris.Fuzz()
