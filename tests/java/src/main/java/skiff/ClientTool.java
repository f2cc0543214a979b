package skiff;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.InvalidOffsetException;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Small CLI that drives the real Apache Kafka Java client, for Skiff's Python test-suite.
 * Records are exchanged as JSON lines with base64-encoded keys, values and header values.
 */
public final class ClientTool {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Base64.Encoder B64E = Base64.getEncoder();
  private static final Base64.Decoder B64D = Base64.getDecoder();

  private static final String USAGE = String.join("\n",
      "usage: java -jar skiff-client-tool.jar <command> [--name value ...]",
      "",
      "commands:",
      "  produce  --bootstrap H:P --topic T --input FILE --output FILE",
      "           [--compression none|gzip|snappy|lz4|zstd] [--acks all|1|0]",
      "           [--idempotence true|false] [--linger-ms N]",
      "      input: JSON lines {\"partition\": int|absent, \"key\": b64|null, \"value\": b64|null,",
      "             \"headers\": [[name, b64|null], ...], \"timestamp\": long|null}",
      "      output: one JSON line per input record: {\"partition\", \"offset\", \"timestamp\"}",
      "  consume  --bootstrap H:P --topic T --partition P --offset O|earliest|latest --count N",
      "           --output FILE [--timeout-ms 60000] [--isolation read_uncommitted|read_committed]",
      "      output: JSON lines {\"partition\", \"offset\", \"timestamp\", \"timestamp_type\",",
      "              \"key\", \"value\", \"headers\"}; exits 1 on timeout (partial output is written)",
      "  offsets  --bootstrap H:P --topic T --partition P",
      "           --spec earliest|latest|max-timestamp|<epoch-ms> [--timeout-ms 60000]",
      "           [--isolation read_uncommitted|read_committed]",
      "      prints {\"offset\": o, \"timestamp\": t, \"leader_epoch\": e|null} to stdout",
      "  seek-commit --bootstrap H:P --topic T --partition P --group G --offset O --count N",
      "           --output FILE [--timeout-ms 60000]",
      "      a consumer of group G (assign, seek O, max.poll.records=1, no auto commit) reads",
      "      N records, commits its position and reads the committed offset back; a second",
      "      one of G assigned without a seek resumes there. Output: the N records as",
      "      consume writes them; prints {\"position\", \"committed\", \"resumed_at\"}",
      "  group-consume --bootstrap H:P --group G --topic T [--instance-id ID]",
      "           [--assignor range|roundrobin|cooperative-sticky] [--session-timeout-ms N]",
      "           [--heartbeat-interval-ms N] [--client-id X] [--max-records N]",
      "           [--record-delay-ms N]",
      "      a consumer-group member (auto.offset.reset=earliest, no auto commit) until",
      "      SIGTERM; JSON lines on stdout as tests/clients/group_member.py prints them:",
      "      assigned (whole assignment after each change), record, committed (after each",
      "      batch's commitSync), commit_failed, closed",
      "",
      "  admin    --bootstrap H:P --input FILE --output FILE",
      "      Java AdminClient operations, one JSON line each (see AdminOps.java)",
      "  delete-records --bootstrap H:P --topic T --partition P --offset O (LogAdmin.java)",
      "  log-dirs --bootstrap H:P (LogAdmin.java)",
      "",
      "every command also accepts repeated --property key=value (extra client config)",
      "");

  /** A user-facing error: printed without a stack trace, exit status 1. */
  static final class ToolError extends Exception {
    ToolError(String message) {
      super(message);
    }
  }

  public static void main(String[] argv) {
    if (argv.length == 0) {
      System.err.print(USAGE);
      System.exit(2);
    }
    String cmd = argv[0];
    if (cmd.equals("help") || cmd.equals("--help") || cmd.equals("-h")) {
      System.out.print(USAGE);
      System.exit(0);
    }
    int status;
    try {
      Args args = Args.parse(argv);
      switch (cmd) {
        case "produce" -> produce(args);
        case "consume" -> consume(args);
        case "offsets" -> offsets(args);
        case "seek-commit" -> seekCommit(args);
        case "group-consume" -> GroupConsume.run(args);
        case "lag" -> lag(args);
        case "admin" -> AdminOps.run(args);
        case "delete-records" -> LogAdmin.deleteRecords(args);
        case "log-dirs" -> LogAdmin.logDirs(args);
        default -> throw new IllegalArgumentException("unknown command: " + cmd);
      }
      status = 0;
    } catch (IllegalArgumentException e) {
      System.err.println("error: " + e.getMessage());
      System.err.print(USAGE);
      status = 2;
    } catch (ToolError e) {
      System.err.println("error: " + e.getMessage());
      status = 1;
    } catch (Exception e) {
      System.err.println("error: " + describe(e));
      e.printStackTrace(System.err);
      status = 1;
    }
    System.out.flush();
    System.exit(status);
  }

  // ---------------------------------------------------------------- produce

  static void produce(Args a) throws Exception {
    Properties p = a.clientProps();
    p.put("key.serializer", ByteArraySerializer.class.getName());
    p.put("value.serializer", ByteArraySerializer.class.getName());
    p.put("compression.type", a.get("compression", "none"));
    p.put("acks", a.get("acks", "all"));
    if (a.has("idempotence")) {
      p.put("enable.idempotence", a.get("idempotence"));
    }
    if (a.has("linger-ms")) {
      p.put("linger.ms", a.get("linger-ms"));
    }
    a.applyProperties(p);
    String topic = a.get("topic");

    List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
    int lineNo = 0;
    for (String line : Files.readAllLines(Path.of(a.get("input")), StandardCharsets.UTF_8)) {
      lineNo++;
      if (!line.isBlank()) {
        records.add(toProducerRecord(topic, JSON.readTree(line), lineNo));
      }
    }

    List<RecordMetadata> results = new ArrayList<>();
    List<String> failures = new ArrayList<>();
    KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
    try {
      List<Future<RecordMetadata>> futures = new ArrayList<>();
      for (ProducerRecord<byte[], byte[]> r : records) {
        futures.add(producer.send(r));
      }
      producer.flush();
      for (int i = 0; i < futures.size(); i++) {
        try {
          results.add(futures.get(i).get());
        } catch (ExecutionException e) {
          failures.add("record #" + i + ": " + describe(e.getCause()));
        }
      }
    } finally {
      producer.close(Duration.ofSeconds(10));
    }
    if (!failures.isEmpty()) {
      throw new ToolError(failures.size() + " of " + records.size() + " sends failed:\n  "
          + String.join("\n  ", failures.subList(0, Math.min(20, failures.size()))));
    }
    try (BufferedWriter out = Files.newBufferedWriter(Path.of(a.get("output")))) {
      for (RecordMetadata m : results) {
        ObjectNode n = JSON.createObjectNode();
        n.put("partition", m.partition());
        n.put("offset", m.hasOffset() ? m.offset() : -1L);
        n.put("timestamp", m.hasTimestamp() ? m.timestamp() : -1L);
        out.write(JSON.writeValueAsString(n));
        out.write('\n');
      }
    }
  }

  static ProducerRecord<byte[], byte[]> toProducerRecord(String topic, JsonNode n, int lineNo) {
    if (!n.isObject()) {
      throw new IllegalArgumentException("input line " + lineNo + " is not a JSON object");
    }
    Integer partition = isNull(n.get("partition")) ? null : n.get("partition").asInt();
    Long timestamp = isNull(n.get("timestamp")) ? null : n.get("timestamp").asLong();
    List<Header> headers = new ArrayList<>();
    JsonNode hs = n.get("headers");
    if (!isNull(hs)) {
      for (JsonNode h : hs) {
        headers.add(new RecordHeader(h.get(0).asText(), b64(h.get(1))));
      }
    }
    return new ProducerRecord<>(
        topic, partition, timestamp, b64(n.get("key")), b64(n.get("value")), headers);
  }

  // ---------------------------------------------------------------- consume

  static void consume(Args a) throws Exception {
    Properties p = a.clientProps();
    p.put("key.deserializer", ByteArrayDeserializer.class.getName());
    p.put("value.deserializer", ByteArrayDeserializer.class.getName());
    p.put("enable.auto.commit", "false");
    p.put("auto.offset.reset", "none"); // an out-of-range --offset is an error, not a reset
    p.put("isolation.level", a.get("isolation", "read_uncommitted"));
    a.applyProperties(p);
    TopicPartition tp = new TopicPartition(a.get("topic"), a.getInt("partition"));
    String offset = a.get("offset");
    long count = Long.parseLong(a.get("count"));
    long timeoutMs = Long.parseLong(a.get("timeout-ms", "60000"));

    List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
    String failure = null;
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
    KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p);
    try {
      consumer.assign(List.of(tp));
      switch (offset) {
        case "earliest" -> consumer.seekToBeginning(List.of(tp));
        case "latest" -> consumer.seekToEnd(List.of(tp));
        default -> consumer.seek(tp, Long.parseLong(offset));
      }
      while (got.size() < count) {
        long leftMs = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
        if (leftMs <= 0) {
          break;
        }
        for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(
            Math.min(leftMs, 1000)))) {
          if (got.size() < count) {
            got.add(r);
          }
        }
      }
    } catch (InvalidOffsetException e) { // e.g. --offset beyond the log end
      failure = describe(e);
    } finally {
      consumer.close(Duration.ofSeconds(5));
    }
    writeRecords(a.get("output"), got);
    if (failure != null) {
      throw new ToolError("after " + got.size() + " of " + count + " records: " + failure);
    }
    if (got.size() < count) {
      throw new ToolError("timed out after " + timeoutMs + " ms: got " + got.size() + " of "
          + count + " records from " + tp + " starting at offset " + offset);
    }
  }

  static void writeRecords(String path, List<ConsumerRecord<byte[], byte[]>> records)
      throws Exception {
    try (BufferedWriter out = Files.newBufferedWriter(Path.of(path))) {
      for (ConsumerRecord<byte[], byte[]> r : records) {
        ObjectNode n = JSON.createObjectNode();
        n.put("partition", r.partition());
        n.put("offset", r.offset());
        n.put("timestamp", r.timestamp());
        n.put("timestamp_type", r.timestampType().id);
        putB64(n, "key", r.key());
        putB64(n, "value", r.value());
        ArrayNode hs = n.putArray("headers");
        for (Header h : r.headers()) {
          ArrayNode pair = hs.addArray();
          pair.add(h.key());
          if (h.value() == null) {
            pair.addNull();
          } else {
            pair.add(B64E.encodeToString(h.value()));
          }
        }
        out.write(JSON.writeValueAsString(n));
        out.write('\n');
      }
    }
  }

  // ---------------------------------------------------------------- seek-commit

  /**
   * A group consumer's position and commit from an exact offset, e.g. one inside a stored
   * batch: the client drops the records before it, its position after N records is O + N
   * (one record per poll), that is committed, and a consumer of the group resumes there.
   */
  static void seekCommit(Args a) throws Exception {
    Properties p = a.clientProps();
    p.put("key.deserializer", ByteArrayDeserializer.class.getName());
    p.put("value.deserializer", ByteArrayDeserializer.class.getName());
    p.put("group.id", a.get("group"));
    p.put("enable.auto.commit", "false");
    p.put("auto.offset.reset", "none"); // the resumed consumer starts at the commit or fails
    p.put("max.poll.records", "1");
    a.applyProperties(p);
    TopicPartition tp = new TopicPartition(a.get("topic"), a.getInt("partition"));
    long start = Long.parseLong(a.get("offset"));
    int count = a.getInt("count");
    long timeoutMs = Long.parseLong(a.get("timeout-ms", "60000"));
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);

    List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
    long position;
    long committed;
    KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p);
    try {
      consumer.assign(List.of(tp));
      consumer.seek(tp, start);
      pollInto(consumer, got, count, deadline);
      writeRecords(a.get("output"), got);
      if (got.size() < count) {
        throw new ToolError("timed out after " + timeoutMs + " ms: got " + got.size() + " of "
            + count + " records from " + tp + " starting at offset " + start);
      }
      position = consumer.position(tp);
      consumer.commitSync(Map.of(tp, new OffsetAndMetadata(position)));
      OffsetAndMetadata back = consumer.committed(Set.of(tp)).get(tp);
      committed = back == null ? -1L : back.offset();
    } finally {
      consumer.close(Duration.ofSeconds(5));
    }
    List<ConsumerRecord<byte[], byte[]>> next = new ArrayList<>();
    KafkaConsumer<byte[], byte[]> resumed = new KafkaConsumer<>(p);
    try {
      resumed.assign(List.of(tp)); // no seek: the group's committed offset decides
      pollInto(resumed, next, 1, deadline);
    } finally {
      resumed.close(Duration.ofSeconds(5));
    }
    if (next.isEmpty()) {
      throw new ToolError("the resumed consumer of group " + a.get("group") + " got nothing");
    }
    ObjectNode n = JSON.createObjectNode();
    n.put("position", position);
    n.put("committed", committed);
    n.put("resumed_at", next.get(0).offset());
    System.out.println(JSON.writeValueAsString(n));
  }

  static void pollInto(KafkaConsumer<byte[], byte[]> consumer,
      List<ConsumerRecord<byte[], byte[]>> got, int count, long deadline) {
    while (got.size() < count) {
      long leftMs = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
      if (leftMs <= 0) {
        return;
      }
      for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(
          Math.min(leftMs, 1000)))) {
        got.add(r);
      }
    }
  }

  // ---------------------------------------------------------------- offsets

  static void offsets(Args a) throws Exception {
    Properties p = a.clientProps();
    a.applyProperties(p);
    TopicPartition tp = new TopicPartition(a.get("topic"), a.getInt("partition"));
    String specArg = a.get("spec");
    OffsetSpec spec = switch (specArg) {
      case "earliest" -> OffsetSpec.earliest();
      case "latest" -> OffsetSpec.latest();
      case "max-timestamp" -> OffsetSpec.maxTimestamp();
      default -> OffsetSpec.forTimestamp(Long.parseLong(specArg));
    };
    IsolationLevel isolation = IsolationLevel.valueOf(
        a.get("isolation", "read_uncommitted").toUpperCase(Locale.ROOT));
    long timeoutMs = Long.parseLong(a.get("timeout-ms", "60000"));
    ListOffsetsOptions options = new ListOffsetsOptions(isolation);
    options.timeoutMs((int) timeoutMs);
    ListOffsetsResultInfo info;
    Admin admin = Admin.create(p);
    try {
      info = admin.listOffsets(Map.of(tp, spec), options)
          .partitionResult(tp).get(timeoutMs + 5000, TimeUnit.MILLISECONDS);
    } catch (ExecutionException e) {
      throw new ToolError("listOffsets(" + tp + ", " + specArg + ") failed: "
          + describe(e.getCause()));
    } catch (TimeoutException e) {
      throw new ToolError("listOffsets(" + tp + ", " + specArg + ") timed out");
    } finally {
      admin.close(Duration.ZERO); // nothing may still be pending that we care about
    }
    ObjectNode n = JSON.createObjectNode();
    n.put("offset", info.offset()); // -1 when no record has timestamp >= the one asked for
    n.put("timestamp", info.timestamp());
    if (info.leaderEpoch().isPresent()) {
      n.put("leader_epoch", info.leaderEpoch().get());
    } else {
      n.putNull("leader_epoch");
    }
    System.out.println(JSON.writeValueAsString(n));
  }

  // ---------------------------------------------------------------- group-consume

  /**
   * A consumer-group member for the group tests: same flags and JSON lines as
   * tests/clients/group_member.py. SIGTERM runs a shutdown hook that wakes the consumer up;
   * the main loop then finishes the batch in hand (and its commit), closes the consumer
   * (LeaveGroup unless static) and the hook ends the JVM with status 0.
   */
  static final class GroupConsume {
    private static final Object OUT_LOCK = new Object();
    private static volatile boolean stopping = false;

    static void emit(ObjectNode n) {
      synchronized (OUT_LOCK) {
        try {
          System.out.println(JSON.writeValueAsString(n));
        } catch (Exception e) {
          throw new IllegalStateException(e);
        }
        System.out.flush();
      }
    }

    static ObjectNode event(String name) {
      ObjectNode n = JSON.createObjectNode();
      n.put("event", name);
      return n;
    }

    /** The current assignment from the listener's calls; each change is printed whole. */
    static final class Listener implements ConsumerRebalanceListener {
      final String topic;
      final boolean incremental;
      final Set<Integer> partitions = new TreeSet<>();
      boolean announced = false;

      Listener(String topic, boolean incremental) {
        this.topic = topic;
        this.incremental = incremental;
      }

      void change(String via, Collection<TopicPartition> tps, boolean add) {
        Set<Integer> before = new TreeSet<>(partitions);
        if (add && !incremental) {
          partitions.clear(); // eager: an assignment is the whole new one
        }
        for (TopicPartition tp : tps) {
          if (tp.topic().equals(topic)) {
            if (add) {
              partitions.add(tp.partition());
            } else {
              partitions.remove(tp.partition());
            }
          }
        }
        if (announced && before.equals(partitions)) {
          return; // e.g. a cooperative round that moved nothing of ours
        }
        announced = true;
        ObjectNode n = event("assigned");
        ArrayNode list = n.putArray("partitions");
        for (int p : partitions) {
          list.addArray().add(topic).add(p);
        }
        n.put("via", via);
        emit(n);
      }

      @Override
      public void onPartitionsAssigned(Collection<TopicPartition> tps) {
        change("assign", tps, true);
      }

      @Override
      public void onPartitionsRevoked(Collection<TopicPartition> tps) {
        change("revoke", tps, false);
      }

      @Override
      public void onPartitionsLost(Collection<TopicPartition> tps) {
        change("lost", tps, false);
      }
    }

    static void run(Args a) throws Exception {
      Properties p = a.clientProps();
      p.put("key.deserializer", ByteArrayDeserializer.class.getName());
      p.put("value.deserializer", ByteArrayDeserializer.class.getName());
      p.put("group.id", a.get("group"));
      p.put("enable.auto.commit", "false");
      p.put("auto.offset.reset", "earliest");
      p.put("client.id", a.get("client-id", "group-member-java"));
      String assignor = a.get("assignor", "range");
      p.put("partition.assignment.strategy", switch (assignor) {
        case "range" -> RangeAssignor.class.getName();
        case "roundrobin" -> RoundRobinAssignor.class.getName();
        case "cooperative-sticky" -> CooperativeStickyAssignor.class.getName();
        default -> throw new IllegalArgumentException("unknown --assignor " + assignor);
      });
      if (a.has("instance-id")) {
        p.put("group.instance.id", a.get("instance-id"));
      }
      if (a.has("session-timeout-ms")) {
        p.put("session.timeout.ms", a.get("session-timeout-ms"));
      }
      if (a.has("heartbeat-interval-ms")) {
        p.put("heartbeat.interval.ms", a.get("heartbeat-interval-ms"));
      }
      p.put("max.poll.records", a.get("max-records", "500"));
      long delayMs = Long.parseLong(a.get("record-delay-ms", "0"));
      a.applyProperties(p);
      String topic = a.get("topic");

      KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p);
      CountDownLatch closed = new CountDownLatch(1);
      Runtime.getRuntime().addShutdownHook(new Thread(() -> {
        stopping = true;
        consumer.wakeup();
        try {
          closed.await(30, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
        System.out.flush();
        Runtime.getRuntime().halt(0); // a SIGTERM'd JVM would otherwise exit with 143
      }, "sigterm"));

      Listener listener = new Listener(topic, assignor.equals("cooperative-sticky"));
      try {
        consumer.subscribe(List.of(topic), listener);
        while (!stopping) {
          ConsumerRecords<byte[], byte[]> records;
          try {
            records = consumer.poll(Duration.ofMillis(200));
          } catch (WakeupException e) {
            break;
          }
          Map<TopicPartition, OffsetAndMetadata> commit = new TreeMap<>(
              Comparator.comparingInt(TopicPartition::partition));
          for (ConsumerRecord<byte[], byte[]> r : records) {
            // A partition revoked while its records were fetched is not ours to commit.
            if (!listener.partitions.contains(r.partition())) {
              continue;
            }
            if (delayMs > 0) {
              Thread.sleep(delayMs);
            }
            ObjectNode n = event("record");
            n.put("partition", r.partition());
            n.put("offset", r.offset());
            emit(n);
            commit.put(new TopicPartition(r.topic(), r.partition()),
                new OffsetAndMetadata(r.offset() + 1));
          }
          if (!commit.isEmpty()) {
            commitBatch(consumer, commit);
          }
        }
      } finally {
        consumer.close(Duration.ofSeconds(10)); // LeaveGroup (unless static)
        emit(event("closed"));
        closed.countDown();
      }
    }

    static void commitBatch(
        KafkaConsumer<byte[], byte[]> consumer, Map<TopicPartition, OffsetAndMetadata> commit) {
      for (int attempt = 0; ; attempt++) {
        try {
          consumer.commitSync(commit);
          ObjectNode n = event("committed");
          ArrayNode list = n.putArray("offsets");
          for (Map.Entry<TopicPartition, OffsetAndMetadata> e : commit.entrySet()) {
            list.addArray().add(e.getKey().partition()).add(e.getValue().offset());
          }
          emit(n);
          return;
        } catch (WakeupException e) {
          // SIGTERM's wakeup interrupted the commit, which may not have been sent: once more.
          if (attempt > 0) {
            emit(event("commit_failed").put("error", describe(e)));
            return;
          }
        } catch (KafkaException e) {
          emit(event("commit_failed").put("error", describe(e)));
          return;
        }
      }
    }
  }

  // ---------------------------------------------------------------- lag

  /**
   * {@code lag --bootstrap H:P --group G [--timeout-ms 60000]}: a group's lag as Kafka's
   * AdminClient sees it (listConsumerGroupOffsets, then listOffsets latest). Prints
   * {"partitions": [{"topic", "partition", "committed", "end", "lag"}], "total": N}.
   */
  static void lag(Args a) throws Exception {
    Properties p = a.clientProps();
    a.applyProperties(p);
    String group = a.get("group");
    long timeoutMs = Long.parseLong(a.get("timeout-ms", "60000"));
    Admin admin = Admin.create(p);
    Map<TopicPartition, OffsetAndMetadata> committed;
    Map<TopicPartition, ListOffsetsResultInfo> ends;
    try {
      committed = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()
          .get(timeoutMs, TimeUnit.MILLISECONDS);
      Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
      for (TopicPartition tp : committed.keySet()) {
        latest.put(tp, OffsetSpec.latest());
      }
      ends = admin.listOffsets(latest).all().get(timeoutMs, TimeUnit.MILLISECONDS);
    } catch (ExecutionException e) {
      throw new ToolError("lag of group " + group + " failed: " + describe(e.getCause()));
    } finally {
      admin.close(Duration.ZERO);
    }
    Map<String, TopicPartition> sorted = new TreeMap<>();
    for (TopicPartition tp : committed.keySet()) {
      sorted.put(String.format("%s/%010d", tp.topic(), tp.partition()), tp);
    }
    ObjectNode out = JSON.createObjectNode();
    ArrayNode rows = out.putArray("partitions");
    long total = 0;
    for (TopicPartition tp : sorted.values()) {
      long offset = committed.get(tp).offset();
      long end = ends.get(tp).offset();
      total += end - offset;
      rows.addObject().put("topic", tp.topic()).put("partition", tp.partition())
          .put("committed", offset).put("end", end).put("lag", end - offset);
    }
    out.put("total", total);
    System.out.println(JSON.writeValueAsString(out));
  }

  // ---------------------------------------------------------------- helpers

  static boolean isNull(JsonNode n) {
    return n == null || n.isNull() || n.isMissingNode();
  }

  static byte[] b64(JsonNode n) {
    return isNull(n) ? null : B64D.decode(n.asText());
  }

  static void putB64(ObjectNode n, String field, byte[] bytes) {
    if (bytes == null) {
      n.putNull(field);
    } else {
      n.put(field, B64E.encodeToString(bytes));
    }
  }

  static String describe(Throwable t) {
    return t.getClass().getName() + ": " + t.getMessage();
  }

  /** {@code --name value} arguments; {@code --property k=v} may repeat. */
  static final class Args {
    final Map<String, String> values = new HashMap<>();
    final List<String> properties = new ArrayList<>();

    static Args parse(String[] argv) {
      Args a = new Args();
      for (int i = 1; i < argv.length; i += 2) {
        String name = argv[i];
        if (!name.startsWith("--") || i + 1 >= argv.length) {
          throw new IllegalArgumentException("expected '--name value', got: " + name);
        }
        if (name.equals("--property")) {
          a.properties.add(argv[i + 1]);
        } else {
          a.values.put(name.substring(2), argv[i + 1]);
        }
      }
      return a;
    }

    boolean has(String name) {
      return values.containsKey(name);
    }

    String get(String name) {
      String v = values.get(name);
      if (v == null) {
        throw new IllegalArgumentException("missing required --" + name);
      }
      return v;
    }

    String get(String name, String dflt) {
      return values.getOrDefault(name, dflt);
    }

    int getInt(String name) {
      return Integer.parseInt(get(name));
    }

    Properties clientProps() {
      Properties p = new Properties();
      p.put("bootstrap.servers", get("bootstrap"));
      p.put("client.id", "skiff-client-tool");
      return p;
    }

    void applyProperties(Properties p) {
      for (String kv : properties) {
        int eq = kv.indexOf('=');
        if (eq <= 0) {
          throw new IllegalArgumentException("--property wants key=value, got: " + kv);
        }
        p.put(kv.substring(0, eq), kv.substring(eq + 1));
      }
    }
  }
}
