"""Coverage-guided fuzzing (atheris/libFuzzer) of request decoding: the frame parsing
and body decoding every request goes through before its handler (sidecar.server's
decode_body). A malformed frame may raise only BadFrame or CloseConnection (the
connection is closed with one log line); anything else, a crash or an abort is a
finding. Inputs that start with the byte 0xB7 are instead a produced record batch for
`batch` topics' decoder of untrusted batches (sidecar.protocol.stored_batch.check,
after record_batch.single_batch), which may raise only InvalidBatch; after 0xB8 the
same with the batch's CRC32C made to match, so mutations get past the CRC check; after
0xB9 the next byte picks a codec for protocol/inflate.inflate (bounded decompression of
producer data, a 1 MiB limit here), which may raise only InflateError; after 0xBA the
rest is a tiered-storage segment object as read from the object store
(tiered/segments.py: its batch walk and the entries a Fetch serves), which may raise
only CorruptSegment. Run by
tests/test_fuzz.py in a child process (an abort must not take pytest
down):

    python tests/fuzz_decode.py CORPUS_DIR -max_total_time=SECONDS [libFuzzer flags]

CORPUS_DIR is seeded with a valid frame for every API and version Skiff serves
(tests/request_samples.py) and a valid batch per codec; libFuzzer adds the inputs that
reach new code.
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris
from crc32c import crc32c

sys.path.insert(0, str(Path(__file__).resolve().parent))

with atheris.instrument_imports(include=["sidecar", "kio"]):
    from sidecar import apis
    from sidecar.protocol import stored_batch
    from sidecar.protocol.framing import BadFrame, CloseConnection, parse_header_prefix
    from sidecar.protocol.inflate import InflateError, inflate
    from sidecar.protocol.record_batch import InvalidBatch, single_batch
    from sidecar.server import decode_body
    from sidecar.tiered.segments import CorruptSegment, entries_from

BATCH_INPUT, BATCH_INPUT_CRC_FIXED, INFLATE_INPUT, SEGMENT_INPUT = 0xB7, 0xB8, 0xB9, 0xBA
NOW_MS = 1_700_000_000_000
_TOPIC = {
    "message.timestamp.type": "CreateTime",
    "cleanup.policy": "delete",
    "compression.type": "producer",
    "message.timestamp.before.max.ms": 2**63 - 1,
    "message.timestamp.after.max.ms": 2**63 - 1,
}
# Topic configs the batch decoder branches on: key checks, timestamp bounds,
# recompression, LogAppendTime stamping.
CONFIGS = [
    _TOPIC,
    {**_TOPIC, "cleanup.policy": "compact", "message.timestamp.before.max.ms": 10**9},
    {**_TOPIC, "compression.type": "gzip", "message.timestamp.type": "LogAppendTime"},
    {**_TOPIC, "compression.type": "uncompressed"},
]


def one_input(data: bytes) -> None:
    if data[:1] == bytes([BATCH_INPUT]):
        one_batch(data[1:])
    elif data[:1] == bytes([BATCH_INPUT_CRC_FIXED]):
        batch = bytearray(data[1:])
        if len(batch) >= 61:
            batch[17:21] = crc32c(memoryview(batch)[21:]).to_bytes(4, "big")
        one_batch(bytes(batch))
    elif data[:1] == bytes([SEGMENT_INPUT]):
        try:
            for _, fields in entries_from(data[1:], len(data) % 7, 1 << 16):
                stored_batch.serve([(b"0-1", fields)], 1 << 16)
        except CorruptSegment:
            pass
    elif data[:1] == bytes([INFLATE_INPUT]) and len(data) >= 2:
        try:
            inflate(data[2:], data[1] % 8, limit=1 << 20)
        except InflateError:
            pass
    else:
        one_frame(data)


def one_batch(data: bytes) -> None:
    try:
        view = single_batch(data)
        stored_batch.check(view, CONFIGS[len(data) % len(CONFIGS)], "t", 0, NOW_MS)
    except InvalidBatch:
        pass


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
    from rawkafka import Rec, build_batch

    records = [Rec(b"value %d" % i, key=None if i == 2 else b"k%d" % i) for i in range(4)]
    for codec in range(5):
        batch = build_batch(records, base_timestamp=NOW_MS, compression=codec)
        (corpus / f"seed-batch-{codec}").write_bytes(bytes([BATCH_INPUT]) + batch)
        (corpus / f"seed-batch-crc-{codec}").write_bytes(bytes([BATCH_INPUT_CRC_FIXED]) + batch)
    segment = b"".join(
        stored_batch.placed(b"0-%d" % (4 * i + 4), build_batch(records, base_timestamp=NOW_MS))
        for i in range(3)
    )
    (corpus / "seed-segment").write_bytes(bytes([SEGMENT_INPUT]) + segment)
    import cramjam

    plain = b"".join(b"record %d " % i for i in range(200))
    compressed = {
        1: cramjam.gzip.compress(plain),
        2: cramjam.snappy.compress_raw(plain),
        3: cramjam.lz4.compress(plain),
        4: cramjam.zstd.compress(plain),
    }
    for codec, data in compressed.items():
        (corpus / f"seed-inflate-{codec}").write_bytes(bytes([INFLATE_INPUT, codec]) + data)
    raw = bytes(compressed[2])  # xerial framing, the Java client's snappy
    xerial = b"\x82SNAPPY\x00" + bytes([0, 0, 0, 1, 0, 0, 0, 1]) + len(raw).to_bytes(4, "big")
    (corpus / "seed-inflate-xerial").write_bytes(bytes([INFLATE_INPUT, 2]) + xerial + raw)


if __name__ == "__main__":
    seed(Path(sys.argv[1]))
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
