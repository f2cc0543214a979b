// Command franzclient drives the franz-go Kafka client (github.com/twmb/franz-go/pkg/kgo)
// for Skiff's Python test-suite. It mirrors the Java tool in tests/java (skiff.ClientTool):
// the same subcommands, flags and JSON-lines formats, with base64 keys, values and header
// values and JSON null for null.
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

const usage = `usage: franzclient <command> [--name value ...]

commands:
  produce  --bootstrap H:P --topic T --input FILE --output FILE
           [--compression none|gzip|snappy|lz4|zstd] [--acks all|1|0]
           [--idempotence true|false] [--linger-ms N]
      input: JSON lines {"partition": int|absent, "key": b64|null, "value": b64|null,
             "headers": [[name, b64|null], ...], "timestamp": long|null}
      output: one JSON line per input record: {"partition", "offset", "timestamp"}
  consume  --bootstrap H:P --topic T --partition P --offset O|earliest|latest --count N
           --output FILE [--timeout-ms 60000] [--isolation read_uncommitted|read_committed]
      output: JSON lines {"partition", "offset", "timestamp", "timestamp_type",
              "key", "value", "headers"}; exits 1 on timeout (partial output is written)
  offsets  --bootstrap H:P --topic T --partition P
           --spec earliest|latest|max-timestamp|<epoch-ms> [--timeout-ms 60000]
           [--isolation read_uncommitted|read_committed]
      prints {"offset": o, "timestamp": t, "leader_epoch": e|null} to stdout
  seek-commit --bootstrap H:P --topic T --partition P --group G --offset O --count N
           --output FILE [--timeout-ms 60000]
      a group member (no auto commit) starts at O where G has no commit, polls N records
      of P, commits its position (the uncommitted head) and leaves; a second member of G
      then resumes at the committed offset. Output: the N records as consume writes
      them; prints {"position", "committed", "resumed_at"} to stdout (committed: what
      the second member fetched from the broker on joining)
  transact --bootstrap H:P --source T --sink T --group G --txn-id ID --count N
           [--abort-every K] [--timeout-ms 120000]
      a consume-transform-produce loop in a GroupTransactSession (read_committed): each
      round copies the (up to 10) records it polled from source to sink with "!" appended, and
      commits them with the group's offsets in one transaction; every K-th round aborts
      instead (its records are polled again). Stops once N records were committed;
      prints {"committed": n, "aborted_rounds": k} to stdout

every command also accepts repeated --property key=value (extra client config; the keys
known here: client.id, linger.ms, batch.size, max.partition.fetch.bytes, fetch.max.bytes,
request.timeout.ms, security.protocol PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL, ssl.truststore.location
(PEM), sasl.mechanism PLAIN|SCRAM-SHA-256|SCRAM-SHA-512, sasl.username, sasl.password, or
sasl.mechanism OAUTHBEARER with sasl.oauthbearer.token) and --log-level
none|error|warn|info|debug (default warn, to stderr)
`

// usageError is a bad command line: exit status 2 with the usage text.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	cmd := os.Args[1]
	if cmd == "help" || cmd == "--help" || cmd == "-h" {
		fmt.Print(usage)
		os.Exit(0)
	}
	err := run(cmd, os.Args[2:])
	var ue usageError
	switch {
	case err == nil:
		os.Exit(0)
	case errors.As(err, &ue):
		fmt.Fprintf(os.Stderr, "error: %v\n%s", err, usage)
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
}

func run(cmd string, argv []string) error {
	a, err := parseArgs(argv)
	if err != nil {
		return err
	}
	switch cmd {
	case "produce":
		return produce(a)
	case "consume":
		return consume(a)
	case "offsets":
		return offsets(a)
	case "seek-commit":
		return seekCommit(a)
	case "transact":
		return transact(a)
	}
	return usagef("unknown command: %s", cmd)
}

// ---------------------------------------------------------------- transact

func transact(a *args) error {
	source, sink := a.need("source"), a.need("sink")
	group, txnID := a.need("group"), a.need("txn-id")
	count := a.getInt("count")
	abortEvery := 0
	if a.has("abort-every") {
		abortEvery = a.getInt("abort-every")
	}
	timeout := time.Duration(a.getIntDefault("timeout-ms", 120000)) * time.Millisecond
	opts := append(a.clientOpts(),
		kgo.TransactionalID(txnID),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(source),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if a.err != nil {
		return a.err
	}
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return err
	}
	defer sess.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	committed, rounds, aborted := 0, 0, 0
	for committed < count {
		fetches := sess.PollRecords(ctx, 10)
		if ctx.Err() != nil {
			return fmt.Errorf("timed out with %d of %d records committed", committed, count)
		}
		if errs := fetches.Errors(); len(errs) > 0 {
			return fmt.Errorf("fetch: %v", errs[0].Err)
		}
		records := fetches.Records()
		if len(records) == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		for _, r := range records {
			out := &kgo.Record{Topic: sink, Key: r.Key, Value: append(append([]byte{}, r.Value...), '!')}
			sess.Produce(ctx, out, func(_ *kgo.Record, err error) {
				if err != nil && !errors.Is(err, kgo.ErrAborting) {
					fmt.Fprintf(os.Stderr, "produce: %v\n", err)
				}
			})
		}
		rounds++
		abort := abortEvery > 0 && rounds%abortEvery == 0
		how := kgo.TryCommit
		if abort {
			how = kgo.TryAbort
		}
		done, err := sess.End(ctx, how)
		if err != nil {
			return fmt.Errorf("end: %w", err)
		}
		if abort {
			aborted++
		} else if done {
			committed += len(records)
		}
	}
	out, _ := json.Marshal(map[string]int{"committed": committed, "aborted_rounds": aborted})
	fmt.Println(string(out))
	return nil
}

// ---------------------------------------------------------------- produce

type inRecord struct {
	Partition *int32       `json:"partition"`
	Key       *string      `json:"key"`
	Value     *string      `json:"value"`
	Headers   [][2]*string `json:"headers"`
	Timestamp *int64       `json:"timestamp"`
}

type produceResult struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
	Timestamp int64 `json:"timestamp"`
}

// explicitKey marks, in a record's Context, a record whose input named its partition.
type explicitKey struct{}

// explicitPartitioner sends a record that named its partition there (as ManualPartitioner
// does) and leaves any other record to kgo's sticky key partitioner (murmur2 of the key, as
// Kafka's default partitioner; sticky for records without a key).
type explicitPartitioner struct{}

func (explicitPartitioner) ForTopic(topic string) kgo.TopicPartitioner {
	return &explicitTopicPartitioner{inner: kgo.StickyKeyPartitioner(nil).ForTopic(topic)}
}

type explicitTopicPartitioner struct{ inner kgo.TopicPartitioner }

func named(r *kgo.Record) bool {
	return r.Context != nil && r.Context.Value(explicitKey{}) != nil
}

func (p *explicitTopicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	return named(r) || p.inner.RequiresConsistency(r)
}

func (p *explicitTopicPartitioner) Partition(r *kgo.Record, n int) int {
	if named(r) {
		return int(r.Partition)
	}
	return p.inner.Partition(r, n)
}

func (p *explicitTopicPartitioner) OnNewBatch() {
	if nb, ok := p.inner.(kgo.TopicPartitionerOnNewBatch); ok {
		nb.OnNewBatch()
	}
}

func produce(a *args) error {
	opts := a.clientOpts()
	codec := a.compression()
	// As the Java producer (kgo's default is not to): Metadata v4+ with
	// allow_auto_topic_creation, so a new topic is created on first produce.
	opts = append(opts, kgo.ProducerBatchCompression(codec), kgo.AllowAutoTopicCreation())
	acks := a.get("acks", "all")
	switch acks {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()))
	default:
		a.fail(usagef("--acks wants all, 1 or 0, got %q", acks))
	}
	idempotence := a.get("idempotence", "")
	switch {
	case idempotence == "false":
		opts = append(opts, kgo.DisableIdempotentWrite())
	case idempotence == "" && acks != "all" && acks != "-1":
		// As the Java client: idempotence is on by default only where acks allow it.
		opts = append(opts, kgo.DisableIdempotentWrite())
	case idempotence != "" && idempotence != "true":
		a.fail(usagef("--idempotence wants true or false, got %q", idempotence))
	}
	if a.has("linger-ms") {
		opts = append(opts, kgo.ProducerLinger(time.Duration(a.getInt("linger-ms"))*time.Millisecond))
	}
	input, output, topic := a.need("input"), a.need("output"), a.need("topic")
	if a.err != nil {
		return a.err
	}

	records, explicit, err := readInput(input, topic)
	if err != nil {
		return err
	}
	if explicit {
		opts = append(opts, kgo.RecordPartitioner(explicitPartitioner{}))
	}
	opts, err = a.applyProperties(opts)
	if err != nil {
		return err
	}
	// Room for every record, so Produce never blocks on the buffer.
	opts = append(opts, kgo.MaxBufferedRecords(max(len(records), 1)))

	client, err := kgo.NewClient(opts...)
	if err != nil {
		return usagef("bad client config: %v", err)
	}
	defer client.Close()

	errs := make([]error, len(records))
	ctx := context.Background()
	for i, r := range records {
		client.Produce(ctx, r, func(_ *kgo.Record, err error) { errs[i] = err })
	}
	if err := client.Flush(ctx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	var failures []string
	for i, err := range errs {
		if err != nil {
			failures = append(failures, fmt.Sprintf("record #%d: %v", i, err))
		}
	}
	if len(failures) > 0 {
		shown := failures[:min(20, len(failures))]
		return fmt.Errorf("%d of %d sends failed:\n  %s", len(failures), len(records),
			strings.Join(shown, "\n  "))
	}
	return writeLines(output, len(records), func(i int) any {
		r := records[i]
		offset := r.Offset
		if acks == "0" {
			offset = -1 // nothing tells the client the offset
		}
		return produceResult{r.Partition, offset, r.Timestamp.UnixMilli()}
	})
}

// compression gives the codec of --compression (default none).
func (a *args) compression() kgo.CompressionCodec {
	switch name := a.get("compression", "none"); name {
	case "none":
		return kgo.NoCompression()
	case "gzip":
		return kgo.GzipCompression()
	case "snappy":
		return kgo.SnappyCompression()
	case "lz4":
		return kgo.Lz4Compression()
	case "zstd":
		return kgo.ZstdCompression()
	default:
		a.fail(usagef("--compression wants none, gzip, snappy, lz4 or zstd, got %q", name))
		return kgo.CompressionCodec{}
	}
}

// readInput reads the JSON-lines input; explicit tells whether any record names a partition.
func readInput(path, topic string) ([]*kgo.Record, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	var records []*kgo.Record
	explicit := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	for lineNo := 1; sc.Scan(); lineNo++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var in inRecord
		if err := json.Unmarshal([]byte(line), &in); err != nil {
			return nil, false, usagef("input line %d: %v", lineNo, err)
		}
		r := &kgo.Record{Topic: topic}
		if r.Key, err = unb64(in.Key); err != nil {
			return nil, false, usagef("input line %d key: %v", lineNo, err)
		}
		if r.Value, err = unb64(in.Value); err != nil {
			return nil, false, usagef("input line %d value: %v", lineNo, err)
		}
		for j, h := range in.Headers {
			if h[0] == nil {
				return nil, false, usagef("input line %d header #%d has no name", lineNo, j)
			}
			v, err := unb64(h[1])
			if err != nil {
				return nil, false, usagef("input line %d header #%d: %v", lineNo, j, err)
			}
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: *h[0], Value: v})
		}
		if in.Timestamp != nil {
			r.Timestamp = time.UnixMilli(*in.Timestamp)
		}
		if in.Partition != nil {
			r.Partition = *in.Partition
			r.Context = context.WithValue(context.Background(), explicitKey{}, true)
			explicit = true
		}
		records = append(records, r)
	}
	if err := sc.Err(); err != nil {
		return nil, false, err
	}
	return records, explicit, nil
}

// ---------------------------------------------------------------- consume

type outRecord struct {
	Partition     int32        `json:"partition"`
	Offset        int64        `json:"offset"`
	Timestamp     int64        `json:"timestamp"`
	TimestampType int8         `json:"timestamp_type"`
	Key           *string      `json:"key"`
	Value         *string      `json:"value"`
	Headers       [][2]*string `json:"headers"`
}

func consume(a *args) error {
	opts := a.clientOpts()
	topic := a.need("topic")
	partition := a.getInt("partition")
	offsetArg := a.need("offset")
	count := a.getInt("count")
	output := a.need("output")
	timeoutMs := a.getIntDefault("timeout-ms", 60000)
	isolation, _ := a.isolation()
	if a.err != nil {
		return a.err
	}
	var start kgo.Offset
	switch offsetArg {
	case "earliest":
		start = kgo.NewOffset().AtStart()
	case "latest":
		start = kgo.NewOffset().AtEnd()
	default:
		at, err := strconv.ParseInt(offsetArg, 10, 64)
		if err != nil {
			return usagef("--offset wants a number, earliest or latest, got %q", offsetArg)
		}
		start = kgo.NewOffset().At(at)
	}
	opts = append(opts,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {int32(partition): start}}),
		// An out-of-range --offset is an error, not a reset (auto.offset.reset=none).
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.FetchIsolationLevel(isolation),
	)
	opts, err := a.applyProperties(opts)
	if err != nil {
		return err
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return usagef("bad client config: %v", err)
	}
	defer client.Close()

	var got []*kgo.Record
	var failure error
	deadline := time.Now().Add(time.Duration(timeoutMs) * time.Millisecond)
	for len(got) < count && failure == nil {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		ctx, cancel := context.WithTimeout(context.Background(), min(left, time.Second))
		fetches := client.PollRecords(ctx, count-len(got))
		cancel()
		for _, fe := range fetches.Errors() {
			if errors.Is(fe.Err, context.DeadlineExceeded) || errors.Is(fe.Err, context.Canceled) {
				continue
			}
			failure = fmt.Errorf("fetch %s[%d]: %w", fe.Topic, fe.Partition, fe.Err)
			break
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if len(got) < count {
				got = append(got, r)
			}
		})
	}
	if err := writeLines(output, len(got), func(i int) any { return toOutRecord(got[i]) }); err != nil {
		return err
	}
	if failure != nil {
		return fmt.Errorf("after %d of %d records: %v", len(got), count, failure)
	}
	if len(got) < count {
		return fmt.Errorf("timed out after %d ms: got %d of %d records from %s-%d starting at offset %s",
			timeoutMs, len(got), count, topic, partition, offsetArg)
	}
	return nil
}

func toOutRecord(r *kgo.Record) outRecord {
	headers := make([][2]*string, 0, len(r.Headers))
	for _, h := range r.Headers {
		name := h.Key
		headers = append(headers, [2]*string{&name, b64(h.Value)})
	}
	return outRecord{
		Partition:     r.Partition,
		Offset:        r.Offset,
		Timestamp:     r.Timestamp.UnixMilli(),
		TimestampType: r.Attrs.TimestampType(),
		Key:           b64(r.Key),
		Value:         b64(r.Value),
		Headers:       headers,
	}
}

// ---------------------------------------------------------------- seek-commit

type seekCommitResult struct {
	Position  int64 `json:"position"`
	Committed int64 `json:"committed"`
	ResumedAt int64 `json:"resumed_at"`
}

// seekCommit checks a group consumer's position and commit from an exact offset, e.g.
// one inside a stored batch: kgo drops the records before it, the uncommitted head after
// n records is offset + n, that is committed, and the next member resumes there.
func seekCommit(a *args) error {
	opts := a.clientOpts()
	topic := a.need("topic")
	partition := int32(a.getInt("partition"))
	group := a.need("group")
	start := int64(a.getInt("offset"))
	count := a.getInt("count")
	output := a.need("output")
	timeoutMs := a.getIntDefault("timeout-ms", 60000)
	if a.err != nil {
		return a.err
	}
	opts = append(opts, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit())
	opts, err := a.applyProperties(opts)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(timeoutMs)*time.Millisecond)
	defer cancel()

	// Where the group has no commit, start exactly at --offset; out of range is fatal.
	first, err := kgo.NewClient(append(opts,
		kgo.ConsumeStartOffset(kgo.NewOffset().At(start)),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()))...)
	if err != nil {
		return usagef("bad client config: %v", err)
	}
	got, err := pollPartition(ctx, first, topic, partition, count)
	var out seekCommitResult
	if err == nil {
		out.Position = first.UncommittedOffsets()[topic][partition].Offset
		err = first.CommitUncommittedOffsets(ctx)
	}
	first.Close() // leaves the group
	if werr := writeLines(output, len(got), func(i int) any { return toOutRecord(got[i]) }); werr != nil {
		return werr
	}
	if err != nil {
		return fmt.Errorf("after %d of %d records: %w", len(got), count, err)
	}

	// The group's commit, and nothing else, decides where this member starts.
	resumed, err := kgo.NewClient(append(opts, kgo.ConsumeStartOffset(kgo.NewOffset().AtCommitted()))...)
	if err != nil {
		return usagef("bad client config: %v", err)
	}
	defer resumed.Close()
	next, err := pollPartition(ctx, resumed, topic, partition, 1)
	if err != nil {
		return fmt.Errorf("resuming group %s: %w", group, err)
	}
	out.ResumedAt = next[0].Offset
	out.Committed = resumed.CommittedOffsets()[topic][partition].Offset
	line, err := json.Marshal(out)
	if err != nil {
		return err
	}
	fmt.Println(string(line))
	return nil
}

// pollPartition polls until it has n records of the partition (one poll never returns
// more than it still needs, so the uncommitted head is right after the last of them).
func pollPartition(ctx context.Context, cl *kgo.Client, topic string, partition int32, n int) ([]*kgo.Record, error) {
	var got []*kgo.Record
	for len(got) < n {
		fetches := cl.PollRecords(ctx, n-len(got))
		if ctx.Err() != nil {
			return got, fmt.Errorf("timed out with %d of %d records", len(got), n)
		}
		for _, fe := range fetches.Errors() {
			return got, fmt.Errorf("fetch %s[%d]: %w", fe.Topic, fe.Partition, fe.Err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Topic == topic && r.Partition == partition {
				got = append(got, r)
			}
		})
	}
	return got, nil
}

// ---------------------------------------------------------------- offsets

type offsetsResult struct {
	Offset      int64  `json:"offset"`
	Timestamp   int64  `json:"timestamp"`
	LeaderEpoch *int32 `json:"leader_epoch"`
}

// offsets sends a raw ListOffsets request (kgo picks the version and routes it to the
// partition leader) and prints the broker's answer as it is: offset -1 and timestamp -1
// when no record has a timestamp >= the one asked for.
func offsets(a *args) error {
	opts := a.clientOpts()
	topic := a.need("topic")
	partition := a.getInt("partition")
	specArg := a.need("spec")
	timeoutMs := a.getIntDefault("timeout-ms", 60000)
	_, isolation := a.isolation()
	if a.err != nil {
		return a.err
	}
	var ts int64
	var err error
	switch specArg {
	case "earliest":
		ts = -2
	case "latest":
		ts = -1
	case "max-timestamp":
		ts = -3
	default:
		if ts, err = strconv.ParseInt(specArg, 10, 64); err != nil || ts < 0 {
			return usagef("--spec wants earliest, latest, max-timestamp or epoch ms, got %q", specArg)
		}
	}
	opts, err = a.applyProperties(opts)
	if err != nil {
		return err
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return usagef("bad client config: %v", err)
	}
	defer client.Close()

	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	req.IsolationLevel = isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = int32(partition)
	rp.Timestamp = ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)

	what := fmt.Sprintf("ListOffsets(%s-%d, %s)", topic, partition, specArg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(timeoutMs)*time.Millisecond)
	defer cancel()
	for {
		resp, err := req.RequestWith(ctx, client)
		if err != nil {
			return fmt.Errorf("%s failed: %w", what, err)
		}
		p, err := findPartition(resp, topic, int32(partition))
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			if !kerr.IsRetriable(err) {
				return fmt.Errorf("%s failed: %w", what, err)
			}
			select { // as the Java admin client: retry retriable errors until the timeout
			case <-ctx.Done():
				return fmt.Errorf("%s timed out; last error %w", what, err)
			case <-time.After(100 * time.Millisecond):
				continue
			}
		}
		out := offsetsResult{Offset: p.Offset, Timestamp: p.Timestamp}
		if resp.Version == 0 && len(p.OldStyleOffsets) > 0 {
			out.Offset = p.OldStyleOffsets[0]
		}
		if p.LeaderEpoch >= 0 {
			epoch := p.LeaderEpoch
			out.LeaderEpoch = &epoch
		}
		line, err := json.Marshal(out)
		if err != nil {
			return err
		}
		fmt.Println(string(line))
		return nil
	}
}

func findPartition(resp *kmsg.ListOffsetsResponse, topic string, partition int32) (*kmsg.ListOffsetsResponseTopicPartition, error) {
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.Topic != topic {
			continue
		}
		for j := range t.Partitions {
			if t.Partitions[j].Partition == partition {
				return &t.Partitions[j], nil
			}
		}
	}
	return nil, fmt.Errorf("the response does not include %s-%d", topic, partition)
}

// isolation gives the kgo option value and the wire value (0 or 1) of --isolation
// (default read_uncommitted).
func (a *args) isolation() (kgo.IsolationLevel, int8) {
	switch name := a.get("isolation", "read_uncommitted"); name {
	case "read_uncommitted":
		return kgo.ReadUncommitted(), 0
	case "read_committed":
		return kgo.ReadCommitted(), 1
	default:
		a.fail(usagef("--isolation wants read_uncommitted or read_committed, got %q", name))
		return kgo.IsolationLevel{}, 0
	}
}

// ---------------------------------------------------------------- helpers

func b64(b []byte) *string {
	if b == nil {
		return nil
	}
	s := base64.StdEncoding.EncodeToString(b)
	return &s
}

// unb64 decodes a base64 JSON string; null stays nil and "" is an empty, non-nil slice.
func unb64(s *string) ([]byte, error) {
	if s == nil {
		return nil, nil
	}
	b, err := base64.StdEncoding.DecodeString(*s)
	if b == nil {
		b = []byte{}
	}
	return b, err
}

func writeLines(path string, n int, item func(int) any) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for i := 0; i < n; i++ {
		if err := enc.Encode(item(i)); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// args holds "--name value" pairs; --property key=value may repeat. Its getters record
// the first bad or missing flag in err and return zero values, so a command reads all its
// flags and then checks err once.
type args struct {
	values     map[string]string
	properties []string
	err        error
}

func parseArgs(argv []string) (*args, error) {
	a := &args{values: map[string]string{}}
	for i := 0; i < len(argv); i += 2 {
		name := argv[i]
		if !strings.HasPrefix(name, "--") || i+1 >= len(argv) {
			return nil, usagef("expected '--name value', got: %s", name)
		}
		if name == "--property" {
			a.properties = append(a.properties, argv[i+1])
		} else {
			a.values[name[2:]] = argv[i+1]
		}
	}
	return a, nil
}

func (a *args) has(name string) bool { _, ok := a.values[name]; return ok }

func (a *args) get(name, dflt string) string {
	if v, ok := a.values[name]; ok {
		return v
	}
	return dflt
}

// fail records err unless an earlier error is already recorded.
func (a *args) fail(err error) {
	if a.err == nil {
		a.err = err
	}
}

func (a *args) need(name string) string {
	v, ok := a.values[name]
	if !ok {
		a.fail(usagef("missing required --%s", name))
	}
	return v
}

func (a *args) getInt(name string) int {
	v, ok := a.values[name]
	if !ok {
		a.fail(usagef("missing required --%s", name))
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		a.fail(usagef("--%s wants an integer, got %q", name, v))
		return 0
	}
	return n
}

func (a *args) getIntDefault(name string, dflt int) int {
	if !a.has(name) {
		return dflt
	}
	return a.getInt(name)
}

func (a *args) clientOpts() []kgo.Opt {
	bootstrap := a.need("bootstrap")
	level := kgo.LogLevelWarn
	switch l := a.get("log-level", "warn"); l {
	case "none":
		level = kgo.LogLevelNone
	case "error":
		level = kgo.LogLevelError
	case "warn":
	case "info":
		level = kgo.LogLevelInfo
	case "debug":
		level = kgo.LogLevelDebug
	default:
		a.fail(usagef("--log-level wants none, error, warn, info or debug, got %q", l))
		return nil
	}
	return []kgo.Opt{
		kgo.SeedBrokers(strings.Split(bootstrap, ",")...),
		kgo.ClientID("skiff-franzclient"),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, level, nil)),
	}
}

// tlsOpts: security.protocol=SSL dials TLS, trusting the PEM CA bundle at
// ssl.truststore.location (ssl.truststore.type PEM), as the Java client's configs say.
func (a *args) tlsOpts() ([]kgo.Opt, error) {
	props := map[string]string{}
	for _, kv := range a.properties {
		if k, v, ok := strings.Cut(kv, "="); ok {
			props[k] = v
		}
	}
	switch props["security.protocol"] {
	case "", "PLAINTEXT", "SASL_PLAINTEXT":
		return nil, nil
	case "SSL", "SASL_SSL":
	default:
		return nil, usagef("--property security.protocol %s: franzclient knows PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL", props["security.protocol"])
	}
	config := &tls.Config{MinVersion: tls.VersionTLS12}
	if path := props["ssl.truststore.location"]; path != "" {
		pem, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usagef("no PEM certificate in %s", path)
		}
		config.RootCAs = pool
	}
	return []kgo.Opt{kgo.DialTLSConfig(config)}, nil
}

// applyProperties maps the few Java-style client configs franzclient knows to kgo options
// (appended last, so they override the tool's own choices).
func (a *args) applyProperties(opts []kgo.Opt) ([]kgo.Opt, error) {
	tlsOpts, err := a.tlsOpts()
	if err != nil {
		return nil, err
	}
	opts = append(opts, tlsOpts...)
	sasl := map[string]string{}
	for _, kv := range a.properties {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef("--property wants key=value, got: %s", kv)
		}
		if k == "client.id" {
			opts = append(opts, kgo.ClientID(v))
			continue
		}
		if k == "security.protocol" || strings.HasPrefix(k, "sasl.") {
			sasl[k] = v
			continue
		}
		if k == "ssl.truststore.location" || k == "ssl.truststore.type" {
			continue // tlsOpts
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, usagef("--property %s wants an integer, got %q", k, v)
		}
		switch k {
		case "linger.ms":
			opts = append(opts, kgo.ProducerLinger(time.Duration(n)*time.Millisecond))
		case "batch.size":
			opts = append(opts, kgo.ProducerBatchMaxBytes(int32(n)))
		case "max.partition.fetch.bytes":
			opts = append(opts, kgo.FetchMaxPartitionBytes(int32(n)))
		case "fetch.max.bytes":
			opts = append(opts, kgo.FetchMaxBytes(int32(n)))
		case "request.timeout.ms":
			opts = append(opts, kgo.RequestTimeoutOverhead(time.Duration(n)*time.Millisecond))
		default:
			return nil, usagef("--property %s is not one franzclient knows", k)
		}
	}
	return withSasl(opts, sasl)
}

// withSasl maps security.protocol=SASL_PLAINTEXT or SASL_SSL with sasl.mechanism (PLAIN,
// SCRAM-SHA-256, SCRAM-SHA-512), sasl.username and sasl.password, or OAUTHBEARER with
// sasl.oauthbearer.token, to kgo.SASL.
func withSasl(opts []kgo.Opt, conf map[string]string) ([]kgo.Opt, error) {
	protocol := conf["security.protocol"]
	if protocol != "SASL_PLAINTEXT" && protocol != "SASL_SSL" {
		return opts, nil // tlsOpts checked the protocol
	}
	user, pass := conf["sasl.username"], conf["sasl.password"]
	switch conf["sasl.mechanism"] {
	case "PLAIN":
		return append(opts, kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism())), nil
	case "SCRAM-SHA-256":
		return append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism())), nil
	case "SCRAM-SHA-512":
		return append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism())), nil
	case "OAUTHBEARER":
		token := conf["sasl.oauthbearer.token"]
		return append(opts, kgo.SASL(oauth.Auth{Token: token}.AsMechanism())), nil
	}
	return nil, usagef("--property sasl.mechanism=%s is not one franzclient knows", conf["sasl.mechanism"])
}
