package skiff;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.AlterConfigsOptions;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreatePartitionsOptions;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.config.ConfigResource;

/**
 * The `admin` command: runs a list of Java AdminClient operations (JSON lines in --input)
 * and writes one JSON line per operation to --output: {"op", "ok": true, ...} or
 * {"op", "error": "<exception class>", "message": "..."}.
 *
 * <p>Operations: {"op": "create", "name", "partitions", "replication", "configs": {..},
 * "validate_only"}, {"op": "grow", "name", "count", "validate_only"}, {"op": "delete",
 * "name"}, {"op": "describe_topic", "name"}, {"op": "describe_configs", "type":
 * "topic"|"broker", "name"} (returns every config with value, source, read_only, synonyms),
 * {"op": "alter", "name", "ops": [[config, "SET"|"DELETE"|"APPEND"|"SUBTRACT", value]],
 * "validate_only"}, {"op": "cluster"}.
 */
final class AdminOps {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final long TIMEOUT_S = 60;

  private AdminOps() {}

  static void run(ClientTool.Args a) throws Exception {
    Properties p = a.clientProps();
    a.applyProperties(p);
    List<JsonNode> ops = new ArrayList<>();
    for (String line : Files.readAllLines(Path.of(a.get("input")), StandardCharsets.UTF_8)) {
      if (!line.isBlank()) {
        ops.add(JSON.readTree(line));
      }
    }
    try (Admin admin = Admin.create(p);
        BufferedWriter out = Files.newBufferedWriter(Path.of(a.get("output")))) {
      for (JsonNode op : ops) {
        ObjectNode result = JSON.createObjectNode();
        result.put("op", op.get("op").asText());
        try {
          apply(admin, op, result);
          result.put("ok", true);
        } catch (ExecutionException e) {
          Throwable cause = e.getCause() == null ? e : e.getCause();
          result.put("error", cause.getClass().getSimpleName());
          result.put("message", cause.getMessage());
        }
        out.write(JSON.writeValueAsString(result));
        out.newLine();
        out.flush();
      }
    }
  }

  private static <T> T get(KafkaFuture<T> f) throws Exception {
    return f.get(TIMEOUT_S, TimeUnit.SECONDS);
  }

  private static void apply(Admin admin, JsonNode op, ObjectNode result) throws Exception {
    String name = op.path("name").asText();
    boolean validateOnly = op.path("validate_only").asBoolean(false);
    switch (op.get("op").asText()) {
      case "create" -> {
        Map<String, String> configs = new HashMap<>();
        op.path("configs").fields().forEachRemaining(e -> configs.put(e.getKey(), e.getValue().asText()));
        NewTopic topic = new NewTopic(name, op.path("partitions").asInt(1),
            (short) op.path("replication").asInt(1)).configs(configs);
        get(admin.createTopics(List.of(topic), new CreateTopicsOptions().validateOnly(validateOnly))
            .all());
      }
      case "grow" -> get(admin.createPartitions(
          Map.of(name, NewPartitions.increaseTo(op.get("count").asInt())),
          new CreatePartitionsOptions().validateOnly(validateOnly)).all());
      case "delete" -> get(admin.deleteTopics(List.of(name)).all());
      case "describe_topic" -> {
        TopicDescription d = get(admin.describeTopics(List.of(name)).allTopicNames()).get(name);
        result.put("partitions", d.partitions().size());
        result.put("replicas", d.partitions().get(0).replicas().size());
      }
      case "describe_configs" -> {
        ConfigResource.Type type = op.path("type").asText("topic").equals("broker")
            ? ConfigResource.Type.BROKER : ConfigResource.Type.TOPIC;
        ConfigResource resource = new ConfigResource(type, name);
        Config config = get(admin.describeConfigs(List.of(resource),
            new DescribeConfigsOptions().includeSynonyms(true).includeDocumentation(true))
            .all()).get(resource);
        ObjectNode entries = result.putObject("configs");
        TreeMap<String, ConfigEntry> sorted = new TreeMap<>();
        for (ConfigEntry e : config.entries()) {
          sorted.put(e.name(), e);
        }
        for (ConfigEntry e : sorted.values()) {
          ObjectNode entry = entries.putObject(e.name());
          entry.put("value", e.value());
          entry.put("source", e.source().name());
          entry.put("read_only", e.isReadOnly());
          entry.put("type", e.type().name());
          entry.put("has_documentation", e.documentation() != null && !e.documentation().isEmpty());
          ArrayNode synonyms = entry.putArray("synonyms");
          for (ConfigEntry.ConfigSynonym s : e.synonyms()) {
            synonyms.add(s.source().name() + ":" + s.name() + "=" + s.value());
          }
        }
      }
      case "alter" -> {
        Collection<AlterConfigOp> changes = new ArrayList<>();
        for (JsonNode c : op.get("ops")) {
          changes.add(new AlterConfigOp(new ConfigEntry(c.get(0).asText(),
              c.get(2).isNull() ? null : c.get(2).asText()),
              AlterConfigOp.OpType.valueOf(c.get(1).asText())));
        }
        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, name);
        get(admin.incrementalAlterConfigs(Map.of(resource, changes),
            new AlterConfigsOptions().validateOnly(validateOnly)).all());
      }
      case "cluster" -> {
        DescribeClusterResult c = admin.describeCluster();
        Collection<Node> nodes = get(c.nodes());
        result.put("nodes", nodes.size());
        result.put("controller_is_a_node", nodes.contains(get(c.controller())));
        result.put("has_cluster_id", get(c.clusterId()) != null);
      }
      default -> throw new IllegalArgumentException("unknown admin op: " + op.get("op"));
    }
  }
}
