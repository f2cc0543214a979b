/* The record walk of a produced v2 batch (protocol/stored_batch.check), in C: at ~1,000
 * records a batch, parsing each record as a Python object (aiokafka's Cython reader) cost
 * the sidecar 0.6-0.8 us a record, most of the broker's CPU budget per record; this pass
 * costs a few ns a record and creates Python objects only for what it reports.
 *
 * walk(records, count, first_ts, max_ts, log_append, want_keyless, want_stamps)
 *   records: the uncompressed records section (after the 61-byte batch header)
 * returns (min_ts, max_ts, max_delta, keyless, stamps, trace_parents)
 *   keyless: indexes of records without a key (when want_keyless), else []
 *   stamps: every record's timestamp (when want_stamps), else None
 *   trace_parents: values of the records' `traceparent` headers, in order
 * raises ValueError(kind, message), kind "CORRUPT_MESSAGE" or "INVALID_RECORD", as
 * Kafka's broker answers a batch whose records do not parse (DefaultRecord.readFrom) or
 * whose offset deltas are not 0, 1, 2, ...
 *
 * Every read is bounded by the section's length. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    const uint8_t *p;
    const uint8_t *end;
} cursor;

/* Kafka's zig-zag varint: at most 5 bytes (varint) or 10 (varlong). */
static int read_varlong(cursor *c, int max_bytes, int64_t *out) {
    uint64_t raw = 0;
    int shift = 0;
    for (int i = 0; i < max_bytes; i++) {
        if (c->p >= c->end) return -1;
        uint8_t b = *c->p++;
        raw |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
            return 0;
        }
        shift += 7;
    }
    return -2; /* too long */
}

static PyObject *fail(const char *kind, const char *fmt, ...) {
    char message[256];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    PyObject *arg = Py_BuildValue("(ss)", kind, message);
    if (arg != NULL) {
        PyErr_SetObject(PyExc_ValueError, arg);
        Py_DECREF(arg);
    }
    return NULL;
}

static int utf8_valid(const uint8_t *s, int64_t n) {
    PyObject *text = PyUnicode_DecodeUTF8((const char *)s, (Py_ssize_t)n, "strict");
    if (text == NULL) {
        PyErr_Clear();
        return 0;
    }
    Py_DECREF(text);
    return 1;
}

static const char TRACEPARENT[] = "traceparent";

static PyObject *walk(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t count;
    long long first_ts, batch_max_ts;
    int log_append, want_keyless, want_stamps;
    if (!PyArg_ParseTuple(args, "y*nLLppp", &view, &count, &first_ts, &batch_max_ts,
                          &log_append, &want_keyless, &want_stamps))
        return NULL;
    PyObject *keyless = PyList_New(0);
    PyObject *stamps = want_stamps ? PyList_New(0) : (Py_INCREF(Py_None), Py_None);
    PyObject *parents = PyList_New(0);
    PyObject *result = NULL;
    if (keyless == NULL || stamps == NULL || parents == NULL) goto done;

    cursor c = {(const uint8_t *)view.buf, (const uint8_t *)view.buf + view.len};
    int64_t min_ts = INT64_MAX, max_ts = INT64_MIN;
    Py_ssize_t max_delta = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t length, ts_delta, offset_delta, key_len, value_len, header_count;
        if (read_varlong(&c, 5, &length) != 0 || length < 0 || length > c.end - c.p) {
            fail("CORRUPT_MESSAGE", "undecodable record %zd: bad or truncated length", i);
            goto done;
        }
        cursor r = {c.p, c.p + length};
        c.p = r.end;
        if (r.p >= r.end) {
            fail("CORRUPT_MESSAGE", "undecodable record %zd: empty", i);
            goto done;
        }
        r.p++; /* attributes: unused in v2 records */
        if (read_varlong(&r, 10, &ts_delta) != 0 || read_varlong(&r, 5, &offset_delta) != 0) {
            fail("CORRUPT_MESSAGE", "undecodable record %zd: bad timestamp or offset delta", i);
            goto done;
        }
        if (offset_delta != i) {
            fail("INVALID_RECORD", "Inner record offset delta %lld of record %zd is not %zd",
                 (long long)offset_delta, i, i);
            goto done;
        }
        if (read_varlong(&r, 5, &key_len) != 0 || key_len > r.end - r.p) {
            fail("CORRUPT_MESSAGE", "undecodable record %zd: bad key length", i);
            goto done;
        }
        if (key_len >= 0)
            r.p += key_len;
        else if (want_keyless) {
            PyObject *index = PyLong_FromSsize_t(i);
            if (index == NULL || PyList_Append(keyless, index) != 0) {
                Py_XDECREF(index);
                goto done;
            }
            Py_DECREF(index);
        }
        if (read_varlong(&r, 5, &value_len) != 0 || value_len > r.end - r.p) {
            fail("CORRUPT_MESSAGE", "undecodable record %zd: bad value length", i);
            goto done;
        }
        if (value_len > 0) r.p += value_len;
        if (read_varlong(&r, 5, &header_count) != 0 || header_count < 0) {
            fail("CORRUPT_MESSAGE", "undecodable record %zd: bad header count", i);
            goto done;
        }
        for (int64_t h = 0; h < header_count; h++) {
            int64_t hkey_len, hvalue_len;
            if (read_varlong(&r, 5, &hkey_len) != 0 || hkey_len < 0 || hkey_len > r.end - r.p) {
                fail("CORRUPT_MESSAGE", "undecodable record %zd: bad header key length", i);
                goto done;
            }
            const uint8_t *hkey = r.p;
            r.p += hkey_len;
            if (!utf8_valid(hkey, hkey_len)) {
                fail("CORRUPT_MESSAGE", "undecodable record %zd: header key is not UTF-8", i);
                goto done;
            }
            if (read_varlong(&r, 5, &hvalue_len) != 0 || hvalue_len > r.end - r.p) {
                fail("CORRUPT_MESSAGE", "undecodable record %zd: bad header value length", i);
                goto done;
            }
            if (hvalue_len >= 0) {
                if (hkey_len == sizeof TRACEPARENT - 1 &&
                    memcmp(hkey, TRACEPARENT, sizeof TRACEPARENT - 1) == 0) {
                    PyObject *value =
                        PyBytes_FromStringAndSize((const char *)r.p, (Py_ssize_t)hvalue_len);
                    if (value == NULL || PyList_Append(parents, value) != 0) {
                        Py_XDECREF(value);
                        goto done;
                    }
                    Py_DECREF(value);
                }
                r.p += hvalue_len;
            }
        }
        if (r.p != r.end) {
            fail("CORRUPT_MESSAGE",
                 "undecodable record %zd: Invalid record size: expected to read %lld bytes in "
                 "record payload, but instead read %lld",
                 i, (long long)length, (long long)(length - (r.end - r.p)));
            goto done;
        }
        /* a LogAppendTime batch's records all carry its max timestamp, as readers see them */
        int64_t ts = log_append ? batch_max_ts : (int64_t)((uint64_t)first_ts + (uint64_t)ts_delta);
        if (ts < min_ts) min_ts = ts;
        if (ts > max_ts) {
            max_ts = ts;
            max_delta = i;
        }
        if (want_stamps) {
            PyObject *stamp = PyLong_FromLongLong(ts);
            if (stamp == NULL || PyList_Append(stamps, stamp) != 0) {
                Py_XDECREF(stamp);
                goto done;
            }
            Py_DECREF(stamp);
        }
    }
    if (c.p != c.end) {
        fail("CORRUPT_MESSAGE", "record batch says %zd records but holds more bytes (%zd left)",
             count, (Py_ssize_t)(c.end - c.p));
        goto done;
    }
    result = Py_BuildValue("(LLnOOO)", (long long)min_ts, (long long)max_ts, max_delta, keyless,
                           stamps, parents);
done:
    Py_XDECREF(keyless);
    Py_XDECREF(stamps);
    Py_XDECREF(parents);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS, "Validate and summarise the records of a v2 batch."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_record_walk", "The record walk of stored_batch.check.", -1, methods,
};

PyMODINIT_FUNC PyInit__record_walk(void) { return PyModule_Create(&module); }
