package skiff;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DeletedRecords;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;

/**
 * AdminClient calls on a partition's log, for the retention tests.
 *
 * <p>{@code delete-records --bootstrap H:P --topic T --partition P --offset O}: prints
 * {"low_watermark": n} or {"error": exception class, "message": text}.
 *
 * <p>{@code log-dirs --bootstrap H:P}: describeLogDirs on every broker; prints {"brokers":
 * {id: {dir: {"error", "total_bytes", "usable_bytes", "replicas": {"topic-p": {"size",
 * "offset_lag", "is_future"}}}}}}.
 */
final class LogAdmin {
  private static final ObjectMapper JSON = new ObjectMapper();

  private LogAdmin() {}

  static void deleteRecords(ClientTool.Args a) throws Exception {
    Properties p = a.clientProps();
    a.applyProperties(p);
    TopicPartition tp = new TopicPartition(a.get("topic"), a.getInt("partition"));
    long offset = Long.parseLong(a.get("offset"));
    long timeoutMs = Long.parseLong(a.get("timeout-ms", "60000"));
    ObjectNode out = JSON.createObjectNode();
    try (Admin admin = Admin.create(p)) {
      DeletedRecords deleted = admin.deleteRecords(
          Map.of(tp, RecordsToDelete.beforeOffset(offset))).lowWatermarks().get(tp)
          .get(timeoutMs, TimeUnit.MILLISECONDS);
      out.put("low_watermark", deleted.lowWatermark());
    } catch (ExecutionException e) {
      out.put("error", e.getCause().getClass().getName());
      out.put("message", e.getCause().getMessage());
    }
    System.out.println(JSON.writeValueAsString(out));
  }

  static void logDirs(ClientTool.Args a) throws Exception {
    Properties p = a.clientProps();
    a.applyProperties(p);
    long timeoutMs = Long.parseLong(a.get("timeout-ms", "60000"));
    ObjectNode out = JSON.createObjectNode();
    ObjectNode brokers = out.putObject("brokers");
    try (Admin admin = Admin.create(p)) {
      List<Integer> ids = new ArrayList<>();
      for (Node n : admin.describeCluster().nodes().get(timeoutMs, TimeUnit.MILLISECONDS)) {
        ids.add(n.id());
      }
      Map<Integer, Map<String, LogDirDescription>> dirs =
          admin.describeLogDirs(ids).allDescriptions().get(timeoutMs, TimeUnit.MILLISECONDS);
      for (Map.Entry<Integer, Map<String, LogDirDescription>> b : new TreeMap<>(dirs).entrySet()) {
        ObjectNode broker = brokers.putObject(String.valueOf(b.getKey()));
        for (Map.Entry<String, LogDirDescription> d : b.getValue().entrySet()) {
          LogDirDescription desc = d.getValue();
          ObjectNode dir = broker.putObject(d.getKey());
          dir.put("error", desc.error() == null ? null : desc.error().getClass().getName());
          dir.put("total_bytes", desc.totalBytes().isPresent() ? desc.totalBytes().getAsLong() : -1);
          dir.put("usable_bytes",
              desc.usableBytes().isPresent() ? desc.usableBytes().getAsLong() : -1);
          ObjectNode replicas = dir.putObject("replicas");
          for (Map.Entry<TopicPartition, ReplicaInfo> r : desc.replicaInfos().entrySet()) {
            replicas.putObject(r.getKey().toString())
                .put("size", r.getValue().size())
                .put("offset_lag", r.getValue().offsetLag())
                .put("is_future", r.getValue().isFuture());
          }
        }
      }
    } finally {
      System.out.flush();
    }
    System.out.println(JSON.writeValueAsString(out));
  }
}
