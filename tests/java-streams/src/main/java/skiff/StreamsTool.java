package skiff;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Produced;

/**
 * Kafka transactions from Java against Skiff (tests/test_transactions_java.py).
 *
 * <pre>
 * txn BOOTSTRAP TOPIC TXN_ID       commit, abort, commit; then print what read_committed and
 *                                  read_uncommitted consumers read ("committed"/"uncommitted"
 *                                  OFFSET VALUE lines) and whether a second instance fences
 *                                  the first ("fenced CLASS")
 * wordcount BOOTSTRAP APP IN OUT STATE_DIR [GROUP_PROTOCOL [GUARANTEE]]
 *                                  a Kafka Streams word count (exactly_once_v2 unless GUARANTEE
 *                                  says otherwise; group.protocol classic unless "streams",
 *                                  KIP-1071), until killed; prints each state it reaches
 *                                  ("RUNNING", ...)
 * </pre>
 */
public final class StreamsTool {
  private StreamsTool() {}

  public static void main(String[] args) throws Exception {
    switch (args[0]) {
      case "txn" -> txn(args[1], args[2], args[3]);
      case "wordcount" -> wordcount(args[1], args[2], args[3], args[4], args[5],
          args.length > 6 ? args[6] : "classic", args.length > 7 ? args[7] : StreamsConfig.EXACTLY_ONCE_V2);
      default -> {
        System.err.println("usage: txn BOOTSTRAP TOPIC TXN_ID | wordcount BOOTSTRAP APP IN OUT STATE_DIR");
        System.exit(2);
      }
    }
  }

  static KafkaProducer<String, String> producer(String bootstrap, String txnId) {
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    KafkaProducer<String, String> producer = new KafkaProducer<>(p);
    producer.initTransactions();
    return producer;
  }

  static void txn(String bootstrap, String topic, String txnId) throws Exception {
    try (KafkaProducer<String, String> producer = producer(bootstrap, txnId)) {
      producer.beginTransaction();
      for (int i = 0; i < 3; i++) producer.send(new ProducerRecord<>(topic, 0, null, "c" + i));
      producer.commitTransaction();
      producer.beginTransaction();
      for (int i = 0; i < 2; i++) producer.send(new ProducerRecord<>(topic, 0, null, "a" + i));
      producer.flush();
      producer.abortTransaction();
      producer.beginTransaction();
      producer.send(new ProducerRecord<>(topic, 0, null, "c3"));
      producer.commitTransaction();
      // A zombie: its open transaction is aborted when a new instance starts.
      producer.beginTransaction();
      producer.send(new ProducerRecord<>(topic, 0, null, "zombie")).get();
      try (KafkaProducer<String, String> fresh = producer(bootstrap, txnId)) {
        fresh.beginTransaction();
        fresh.send(new ProducerRecord<>(topic, 0, null, "fresh"));
        fresh.commitTransaction();
      }
      try {
        producer.send(new ProducerRecord<>(topic, 0, null, "late"));
        producer.commitTransaction();
        System.out.println("not fenced");
      } catch (KafkaException e) {
        System.out.println("fenced " + e.getClass().getSimpleName());
      }
    }
    read(bootstrap, topic, "read_committed", "committed");
    read(bootstrap, topic, "read_uncommitted", "uncommitted");
  }

  static void read(String bootstrap, String topic, String isolation, String tag) {
    Properties c = new Properties();
    c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
    c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    TopicPartition tp = new TopicPartition(topic, 0);
    try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
      consumer.assign(List.of(tp));
      consumer.seekToBeginning(List.of(tp));
      long end = consumer.endOffsets(List.of(tp)).get(tp);
      System.out.println(tag + "-end " + end);
      long deadline = System.currentTimeMillis() + 30_000;
      List<String> lines = new ArrayList<>();
      while (consumer.position(tp) < end && System.currentTimeMillis() < deadline) {
        for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
          lines.add(tag + " " + r.offset() + " " + r.value());
        }
      }
      lines.forEach(System.out::println);
      System.out.println(tag + "-position " + consumer.position(tp));
    }
  }

  static void wordcount(
      String bootstrap, String app, String in, String out, String stateDir, String protocol,
      String guarantee) throws InterruptedException {
    Properties p = new Properties();
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, app);
    p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, guarantee);
    p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, protocol);
    p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
    // Every input record makes one output record: exactly-once shows as counts 1..n.
    p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
    p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
    if (protocol.equals("classic")) {
      // KIP-1071 groups take both from the broker's group configs.
      p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
      p.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1000);
    }
    p.put(StreamsConfig.producerPrefix(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG), 5000);
    StreamsBuilder builder = new StreamsBuilder();
    builder.stream(in, Consumed.with(Serdes.String(), Serdes.String()))
        .map((k, v) -> KeyValue.pair(v, v))
        .groupByKey(Grouped.with(Serdes.String(), Serdes.String()))
        .count()
        .toStream()
        .to(out, Produced.with(Serdes.String(), Serdes.Long()));
    KafkaStreams streams = new KafkaStreams(builder.build(), p);
    streams.setStateListener((now, before) -> {
      System.out.println(now);
      System.out.flush();
    });
    streams.setUncaughtExceptionHandler(e -> {
      System.out.println("uncaught " + e);
      System.out.flush();
      return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
    });
    CountDownLatch done = new CountDownLatch(1);
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      streams.close(Duration.ofSeconds(10));
      done.countDown();
    }));
    streams.start();
    done.await();
  }
}
