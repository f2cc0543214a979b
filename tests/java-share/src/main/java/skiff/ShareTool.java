package skiff;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Kafka 4.2 share-group driver for Skiff's tests (tests/clients/java_share_client.py).
 *
 * <pre>
 * share   --bootstrap B --group G --topic T[,T2] [--prop k=v]...   JSON commands on stdin
 * produce --bootstrap B --topic T --count N [--prefix P] [--partition P]
 * admin   --bootstrap B                                             JSON operations on stdin
 * </pre>
 *
 * share: a KafkaShareConsumer in explicit acknowledgement mode. Each stdin line is one
 * command, answered by one JSON line on stdout: {"op":"poll","timeout_ms":n},
 * {"op":"ack","topic","partition","offset","type"}, {"op":"ack_all","type"},
 * {"op":"commit"}, {"op":"consume","count":n,"type":"accept","timeout_ms":n} (poll,
 * acknowledge and commit until n records or the timeout), {"op":"close"}. Failures are
 * answered as {"error": class, "message": m} and the process goes on.
 */
public final class ShareTool {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Base64.Encoder B64 = Base64.getEncoder();

  public static void main(String[] argv) throws Exception {
    Map<String, List<String>> opts = parse(argv);
    String cmd = argv.length > 0 ? argv[0] : "";
    PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    switch (cmd) {
      case "share" -> share(opts, out);
      case "produce" -> produce(opts, out);
      case "admin" -> admin(opts, out);
      default -> {
        System.err.println("usage: share|produce|admin --bootstrap B ...");
        System.exit(2);
      }
    }
  }

  private static Map<String, List<String>> parse(String[] argv) {
    Map<String, List<String>> opts = new HashMap<>();
    for (int i = 1; i + 1 < argv.length; i += 2) {
      opts.computeIfAbsent(argv[i].replaceFirst("^--", ""), k -> new ArrayList<>()).add(argv[i + 1]);
    }
    return opts;
  }

  private static String one(Map<String, List<String>> opts, String name, String dflt) {
    List<String> v = opts.get(name);
    return v == null ? dflt : v.get(v.size() - 1);
  }

  // ------------------------------------------------------------------ share consumer

  private static void share(Map<String, List<String>> opts, PrintStream out) throws Exception {
    Properties props = new Properties();
    props.put("bootstrap.servers", one(opts, "bootstrap", "127.0.0.1:9092"));
    props.put("group.id", one(opts, "group", "share"));
    props.put("share.acknowledgement.mode", "explicit");
    props.put("client.id", one(opts, "client-id", "skiff-share-tool"));
    for (String kv : opts.getOrDefault("prop", List.of())) {
      int eq = kv.indexOf('=');
      props.put(kv.substring(0, eq), kv.substring(eq + 1));
    }
    List<String> topics = List.of(one(opts, "topic", "").split(","));
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    try (KafkaShareConsumer<byte[], byte[]> consumer =
        new KafkaShareConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
      consumer.subscribe(topics);
      List<ConsumerRecord<byte[], byte[]>> last = new ArrayList<>();
      out.println("{\"ready\":true}");
      String line;
      while ((line = in.readLine()) != null) {
        if (line.isBlank()) continue;
        JsonNode c = JSON.readTree(line);
        String op = c.path("op").asText();
        ObjectNode reply = JSON.createObjectNode();
        try {
          switch (op) {
            case "poll" -> {
              ConsumerRecords<byte[], byte[]> recs =
                  consumer.poll(Duration.ofMillis(c.path("timeout_ms").asLong(1000)));
              last.clear();
              ArrayNode arr = reply.putArray("records");
              for (ConsumerRecord<byte[], byte[]> r : recs) {
                last.add(r);
                arr.add(record(r));
              }
              Optional<Integer> lock = consumer.acquisitionLockTimeoutMs();
              reply.put("lock_timeout_ms", lock.orElse(-1));
            }
            case "ack" -> {
              // acknowledge(topic, partition, offset, type) is for records that failed
              // deserialization; delivered records are acknowledged as ConsumerRecords.
              String topic = c.path("topic").asText();
              int partition = c.path("partition").asInt();
              long offset = c.path("offset").asLong();
              ConsumerRecord<byte[], byte[]> found = null;
              for (ConsumerRecord<byte[], byte[]> r : last) {
                if (r.topic().equals(topic) && r.partition() == partition && r.offset() == offset) {
                  found = r;
                }
              }
              if (found == null) {
                throw new IllegalArgumentException("no such record in the last poll");
              }
              consumer.acknowledge(found, type(c.path("type").asText("accept")));
              reply.put("ok", true);
            }
            case "ack_all" -> {
              AcknowledgeType t = type(c.path("type").asText("accept"));
              for (ConsumerRecord<byte[], byte[]> r : last) consumer.acknowledge(r, t);
              reply.put("ok", true);
            }
            case "commit" -> commitInto(consumer.commitSync(Duration.ofSeconds(30)), reply);
            case "consume" -> consumeInto(consumer, c, reply);
            case "close" -> {
              consumer.close(Duration.ofSeconds(30));
              reply.put("ok", true);
              out.println(reply);
              return;
            }
            default -> throw new IllegalArgumentException("unknown op " + op);
          }
        } catch (Exception e) {
          reply.removeAll();
          reply.put("error", e.getClass().getName());
          reply.put("message", String.valueOf(e.getMessage()));
        }
        out.println(reply);
      }
    }
  }

  private static AcknowledgeType type(String name) {
    return AcknowledgeType.valueOf(name.toUpperCase());
  }

  private static ObjectNode record(ConsumerRecord<byte[], byte[]> r) {
    ObjectNode o = JSON.createObjectNode();
    o.put("topic", r.topic());
    o.put("partition", r.partition());
    o.put("offset", r.offset());
    o.put("delivery_count", r.deliveryCount().map(Short::intValue).orElse(-1));
    o.put("timestamp", r.timestamp());
    if (r.key() == null) o.putNull("key");
    else o.put("key", B64.encodeToString(r.key()));
    if (r.value() == null) o.putNull("value");
    else o.put("value", B64.encodeToString(r.value()));
    ArrayNode hs = o.putArray("headers");
    r.headers().forEach(h -> {
      ArrayNode pair = hs.addArray();
      pair.add(h.key());
      if (h.value() == null) pair.addNull();
      else pair.add(B64.encodeToString(h.value()));
    });
    return o;
  }

  private static void commitInto(
      Map<TopicIdPartition, Optional<KafkaException>> result, ObjectNode reply) {
    ObjectNode res = reply.putObject("results");
    for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : result.entrySet()) {
      String key = e.getKey().topic() + "-" + e.getKey().partition();
      if (e.getValue().isPresent()) {
        KafkaException ex = e.getValue().get();
        res.put(key, ex.getClass().getSimpleName() + ": " + ex.getMessage());
      } else {
        res.putNull(key);
      }
    }
  }

  /** Poll, acknowledge every record with one type and commit, until count records. */
  private static void consumeInto(
      KafkaShareConsumer<byte[], byte[]> consumer, JsonNode c, ObjectNode reply) {
    int want = c.path("count").asInt();
    AcknowledgeType t = type(c.path("type").asText("accept"));
    long deadline = System.currentTimeMillis() + c.path("timeout_ms").asLong(60000);
    boolean keep = c.path("records").asBoolean(true);
    ArrayNode arr = reply.putArray("records");
    int got = 0;
    ObjectNode errors = reply.putObject("commit_errors");
    while (got < want && System.currentTimeMillis() < deadline) {
      ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(500));
      for (ConsumerRecord<byte[], byte[]> r : recs) {
        consumer.acknowledge(r, t);
        if (keep) arr.add(record(r));
        got++;
      }
      if (!recs.isEmpty()) {
        for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e :
            consumer.commitSync(Duration.ofSeconds(30)).entrySet()) {
          e.getValue().ifPresent(ex -> errors.put(
              e.getKey().topic() + "-" + e.getKey().partition(),
              ex.getClass().getSimpleName() + ": " + ex.getMessage()));
        }
      }
    }
    reply.put("count", got);
  }

  // ------------------------------------------------------------------ producer

  private static void produce(Map<String, List<String>> opts, PrintStream out) throws Exception {
    Properties props = new Properties();
    props.put("bootstrap.servers", one(opts, "bootstrap", "127.0.0.1:9092"));
    props.put("linger.ms", "5");
    String topic = one(opts, "topic", "");
    int count = Integer.parseInt(one(opts, "count", "1"));
    String prefix = one(opts, "prefix", "r");
    String partition = one(opts, "partition", null);
    List<Future<RecordMetadata>> sent = new ArrayList<>();
    try (KafkaProducer<byte[], byte[]> producer =
        new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer())) {
      for (int i = 0; i < count; i++) {
        byte[] value = (prefix + "-" + i).getBytes(StandardCharsets.UTF_8);
        Integer p = partition == null ? null : Integer.valueOf(partition);
        sent.add(producer.send(new ProducerRecord<>(topic, p, null, value)));
      }
      producer.flush();
      ArrayNode arr = JSON.createArrayNode();
      for (Future<RecordMetadata> f : sent) {
        RecordMetadata m = f.get();
        arr.add(JSON.createObjectNode().put("partition", m.partition()).put("offset", m.offset()));
      }
      out.println(JSON.createObjectNode().set("sent", arr));
    }
  }

  // ------------------------------------------------------------------ admin

  private static void admin(Map<String, List<String>> opts, PrintStream out) throws Exception {
    Properties props = new Properties();
    props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, one(opts, "bootstrap", "127.0.0.1:9092"));
    props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    try (Admin admin = Admin.create(props)) {
      String line;
      while ((line = in.readLine()) != null) {
        if (line.isBlank()) continue;
        JsonNode c = JSON.readTree(line);
        ObjectNode reply = JSON.createObjectNode();
        reply.put("op", c.path("op").asText());
        try {
          adminOp(admin, c, reply);
        } catch (Exception e) {
          Throwable cause = e.getCause() != null ? e.getCause() : e;
          reply.put("error", cause.getClass().getSimpleName());
          reply.put("message", String.valueOf(cause.getMessage()));
        }
        out.println(reply);
      }
    }
  }

  private static void adminOp(Admin admin, JsonNode c, ObjectNode reply) throws Exception {
    String group = c.path("group").asText();
    switch (c.path("op").asText()) {
      case "describe" -> {
        ShareGroupDescription d = admin.describeShareGroups(List.of(group)).all().get().get(group);
        reply.put("group", d.groupId());
        reply.put("state", d.groupState().toString());
        reply.put("coordinator", d.coordinator() == null ? -1 : d.coordinator().id());
        reply.put("group_epoch", d.groupEpoch());
        ArrayNode members = reply.putArray("members");
        for (ShareMemberDescription m : d.members()) {
          ObjectNode mo = members.addObject();
          mo.put("member_id", m.consumerId());
          mo.put("client_id", m.clientId());
          mo.put("member_epoch", m.memberEpoch());
          ArrayNode parts = mo.putArray("assignment");
          for (TopicPartition tp : m.assignment().topicPartitions()) {
            parts.add(tp.topic() + "-" + tp.partition());
          }
        }
      }
      case "offsets" -> {
        Map<TopicPartition, SharePartitionOffsetInfo> offsets = admin
            .listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec()))
            .partitionsToOffsetInfo(group)
            .get();
        ObjectNode res = reply.putObject("offsets");
        for (Map.Entry<TopicPartition, SharePartitionOffsetInfo> e : offsets.entrySet()) {
          ObjectNode o = res.putObject(e.getKey().topic() + "-" + e.getKey().partition());
          if (e.getValue() == null) continue;
          o.put("start_offset", e.getValue().startOffset());
          o.put("lag", e.getValue().lag().orElse(-1L));
        }
      }
      case "alter_offsets" -> {
        Map<TopicPartition, Long> want = new HashMap<>();
        JsonNode offsets = c.path("offsets");
        offsets.fieldNames().forEachRemaining(k -> {
          int dash = k.lastIndexOf('-');
          want.put(new TopicPartition(k.substring(0, dash), Integer.parseInt(k.substring(dash + 1))),
              offsets.path(k).asLong());
        });
        admin.alterShareGroupOffsets(group, want).all().get();
        reply.put("ok", true);
      }
      case "set_config" -> {
        ConfigResource res = new ConfigResource(ConfigResource.Type.GROUP, group);
        List<AlterConfigOp> ops = new ArrayList<>();
        JsonNode configs = c.path("configs");
        configs.fieldNames().forEachRemaining(k -> ops.add(new AlterConfigOp(
            new ConfigEntry(k, configs.path(k).asText()), AlterConfigOp.OpType.SET)));
        admin.incrementalAlterConfigs(Map.of(res, ops)).all().get();
        reply.put("ok", true);
      }
      case "delete_offsets" -> {
        Set<String> topics = new HashSet<>();
        c.path("topics").forEach(t -> topics.add(t.asText()));
        admin.deleteShareGroupOffsets(group, topics).all().get();
        reply.put("ok", true);
      }
      case "delete" -> {
        admin.deleteShareGroups(List.of(group)).all().get();
        reply.put("ok", true);
      }
      case "list" -> {
        ArrayNode arr = reply.putArray("groups");
        for (GroupListing g : admin.listGroups(ListGroupsOptions.forShareGroups()).all().get()) {
          arr.add(JSON.createObjectNode()
              .put("group", g.groupId())
              .put("type", g.type().map(Object::toString).orElse(""))
              .put("state", g.groupState().map(Object::toString).orElse("")));
        }
      }
      default -> throw new IllegalArgumentException("unknown admin op " + c.path("op").asText());
    }
  }
}
