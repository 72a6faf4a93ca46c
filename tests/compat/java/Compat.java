/*
 * The Java client's scenarios for tests/compat: one program, run against
 * Krabka and against Apache Kafka with the same arguments.
 *
 * Each scenario drives the real client (kafka-clients 3.x or 4.x; the file
 * compiles against both) and does two things:
 *   - it checks what it can check on its own: records read back
 *     byte-identical, offsets contiguous, committed offsets where the
 *     consumers stopped, transactions' markers invisible to read_committed;
 *     a failed check is a "FAIL scenario: reason" line and exit status 1;
 *   - it writes what the broker answered, normalised (no ids, no times) as
 *     "scenario.key<TAB>value" lines to --out, so tests/compat/test_diff.py
 *     can compare Krabka's answers with Kafka's line by line.
 *
 * Usage: java -cp CLASSPATH:. Compat --bootstrap HOST:PORT --out FILE
 *            [--scenarios a,b,c] [--prefix name-prefix]
 *
 * Every wait has a deadline and says what it waited for.
 */

import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.ExecutionException;
import java.util.function.BooleanSupplier;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class Compat {
    static final List<String> ALL = List.of(
            "produce", "errors", "configs", "admin", "classic_group", "consumer_group",
            "regex", "transactions", "eos", "features");
    static final long WAIT_MS = 60_000;
    static final long BASE_TS = 1_700_000_000_000L;

    final String bootstrap;
    final String prefix;
    final TreeMap<String, String> out = new TreeMap<>();
    final List<String> failures = new ArrayList<>();
    Admin admin;
    String scenario = "";

    Compat(String bootstrap, String prefix) {
        this.bootstrap = bootstrap;
        this.prefix = prefix;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = null, outPath = null, prefix = "compat";
        List<String> scenarios = ALL;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--bootstrap": bootstrap = args[++i]; break;
                case "--out": outPath = args[++i]; break;
                case "--prefix": prefix = args[++i]; break;
                case "--scenarios": scenarios = Arrays.asList(args[++i].split(",")); break;
                default: throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        if (bootstrap == null || outPath == null) {
            System.err.println("usage: Compat --bootstrap HOST:PORT --out FILE [--scenarios a,b] [--prefix p]");
            System.exit(2);
        }
        Compat c = new Compat(bootstrap, prefix);
        c.run(scenarios);
        try (PrintWriter w = new PrintWriter(Files.newBufferedWriter(Paths.get(outPath), StandardCharsets.UTF_8))) {
            for (Map.Entry<String, String> e : c.out.entrySet()) {
                w.println(e.getKey() + "\t" + e.getValue());
            }
            for (String f : c.failures) w.println("FAIL " + f);
        }
        for (String f : c.failures) System.err.println("FAIL " + f);
        System.exit(c.failures.isEmpty() ? 0 : 1);
    }

    void run(List<String> scenarios) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "60000");
        admin = Admin.create(p);
        try {
            for (String s : scenarios) {
                scenario = s;
                long start = System.nanoTime();
                try {
                    switch (s) {
                        case "produce": produce(); break;
                        case "errors": errors(); break;
                        case "configs": configs(); break;
                        case "admin": adminApi(); break;
                        case "classic_group": group("classic"); break;
                        case "consumer_group": group("consumer"); break;
                        case "regex": regex(); break;
                        case "transactions": transactions(); break;
                        case "eos": eos(); break;
                        case "features": features(); break;
                        default: throw new IllegalArgumentException("unknown scenario " + s);
                    }
                } catch (Throwable t) {
                    StringBuilder why = new StringBuilder(t.toString());
                    for (StackTraceElement e : t.getStackTrace()) {
                        if (e.getClassName().startsWith("Compat")) {
                            why.append(" at Compat.java:").append(e.getLineNumber());
                            break;
                        }
                    }
                    failures.add(s + ": " + why);
                    t.printStackTrace();
                }
                System.err.printf("scenario %s: %.1f s%n", s, (System.nanoTime() - start) / 1e9);
            }
        } finally {
            admin.close(Duration.ofSeconds(10));
        }
    }

    // ---- small helpers ----------------------------------------------------

    void put(String key, Object value) {
        out.put(scenario + "." + key, String.valueOf(value));
    }

    static void check(boolean ok, String what) {
        if (!ok) throw new AssertionError(what);
    }

    /**
     * {@code target.method()} (static when {@code target} is null), or null
     * when this kafka-clients version has no such method: one source
     * compiles against 3.x and 4.x.
     */
    static Object callIfPresent(Class<?> type, Object target, String method) throws Exception {
        java.lang.reflect.Method m;
        try {
            m = type.getMethod(method);
        } catch (NoSuchMethodException absent) {
            return null;
        }
        return m.invoke(target);
    }

    interface Call { Object call() throws Exception; }

    /** "ok", or the simple class name of the Kafka exception the call failed with. */
    static String outcome(Call call) {
        try {
            call.call();
            return "ok";
        } catch (Throwable t) {
            Throwable c = t;
            while ((c instanceof ExecutionException || c instanceof java.util.concurrent.CompletionException
                    || (c.getClass() == KafkaException.class && c.getCause() != null)) && c.getCause() != null) {
                c = c.getCause();
            }
            return c.getClass().getSimpleName();
        }
    }

    static void waitFor(String what, BooleanSupplier cond) throws InterruptedException {
        long deadline = System.currentTimeMillis() + WAIT_MS;
        while (!cond.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) {
                throw new AssertionError("timed out after " + WAIT_MS + " ms waiting for " + what);
            }
            Thread.sleep(100);
        }
    }

    String topic(String name) {
        return prefix + "-" + name;
    }

    void createTopic(String name, int partitions, Map<String, String> configs) throws Exception {
        NewTopic t = new NewTopic(name, partitions, (short) 1);
        if (configs != null) t.configs(configs);
        admin.createTopics(List.of(t)).all().get();
        // Kafka answers CreateTopics before every partition has a leader;
        // wait until metadata shows them all.
        waitFor("topic " + name + " with " + partitions + " led partitions", () -> {
            try {
                TopicDescription d = admin.describeTopics(List.of(name)).allTopicNames().get().get(name);
                return d.partitions().size() == partitions
                        && d.partitions().stream().allMatch(pi -> pi.leader() != null && pi.leader().id() >= 0);
            } catch (Exception e) {
                return false;
            }
        });
    }

    Properties producerProps(Map<String, String> extra) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "60000");
        if (extra != null) p.putAll(extra);
        return p;
    }

    Properties consumerProps(String group, Map<String, String> extra) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "60000");
        if (group != null) p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        if (extra != null) p.putAll(extra);
        return p;
    }

    /** One produced record, remembered to compare with what is read back. */
    static final class Rec {
        final int partition;
        final byte[] key, value;
        final long timestamp;
        final List<Header> headers;
        long offset = -1;

        Rec(int partition, byte[] key, byte[] value, long timestamp, List<Header> headers) {
            this.partition = partition;
            this.key = key;
            this.value = value;
            this.timestamp = timestamp;
            this.headers = headers;
        }
    }

    /** Deterministic records: null keys, null and empty values, headers with null values, one large value. */
    static Rec makeRecord(String tag, int i, int partition) {
        byte[] key = i % 5 == 0 ? null : (tag + "-key-" + i).getBytes(StandardCharsets.UTF_8);
        byte[] value;
        if (i % 7 == 3) {
            value = null;
        } else if (i % 11 == 4) {
            value = new byte[0];
        } else if (i == 13) {
            value = new byte[20_000];
            for (int j = 0; j < value.length; j++) value[j] = (byte) (j * 31 + i);
        } else {
            value = (tag + "-value-" + i + "-").getBytes(StandardCharsets.UTF_8);
            value = Arrays.copyOf(value, value.length + i % 40);
            for (int j = value.length - i % 40; j < value.length; j++) value[j] = (byte) (j ^ i);
        }
        List<Header> headers = new ArrayList<>();
        if (i % 3 == 0) {
            headers.add(new RecordHeader("h1", ("hv-" + i).getBytes(StandardCharsets.UTF_8)));
            headers.add(new RecordHeader("h-null", null));
            headers.add(new RecordHeader("h1", new byte[0]));
        }
        return new Rec(partition, key, value, BASE_TS + i * 1000L, headers);
    }

    static boolean sameHeaders(List<Header> a, Header[] b) {
        if (a.size() != b.length) return false;
        for (int i = 0; i < b.length; i++) {
            if (!a.get(i).key().equals(b[i].key()) || !Arrays.equals(a.get(i).value(), b[i].value())) return false;
        }
        return true;
    }

    /** Reads every partition of `tps` from the beginning up to its end offset. */
    List<ConsumerRecord<byte[], byte[]>> readAll(Collection<TopicPartition> tps, String isolation) throws Exception {
        Properties p = consumerProps(null, Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation));
        List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps);
            long deadline = System.currentTimeMillis() + WAIT_MS;
            while (true) {
                boolean done = true;
                for (TopicPartition tp : tps) if (c.position(tp) < end.get(tp)) done = false;
                if (done) break;
                check(System.currentTimeMillis() < deadline, "reading " + tps + " up to " + end + " timed out");
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) got.add(r);
            }
        }
        return got;
    }

    static String offsetsOf(List<ConsumerRecord<byte[], byte[]>> records, int partition) {
        return records.stream().filter(r -> r.partition() == partition).map(r -> Long.toString(r.offset()))
                .collect(Collectors.joining(","));
    }

    static String sorted(Collection<?> items) {
        return items.stream().map(String::valueOf).sorted().collect(Collectors.joining(","));
    }

    // ---- scenarios --------------------------------------------------------

    /** Every codec, idempotent, acks=all; read back byte for byte. */
    void produce() throws Exception {
        String t = topic("produce");
        createTopic(t, 3, null);
        List<Rec> sent = new ArrayList<>();
        int n = 0;
        for (String codec : List.of("none", "gzip", "snappy", "lz4", "zstd")) {
            Map<String, String> extra = Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec,
                    ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(extra))) {
                List<Rec> batch = new ArrayList<>();
                List<java.util.concurrent.Future<RecordMetadata>> futures = new ArrayList<>();
                for (int i = 0; i < 40; i++, n++) {
                    Rec r = makeRecord(codec, n, n % 3);
                    batch.add(r);
                    futures.add(producer.send(new ProducerRecord<>(t, r.partition, r.timestamp, r.key, r.value, r.headers)));
                }
                producer.flush();
                List<String> offsets = new ArrayList<>();
                for (int i = 0; i < batch.size(); i++) {
                    RecordMetadata md = futures.get(i).get();
                    batch.get(i).offset = md.offset();
                    check(md.partition() == batch.get(i).partition, "partition of record " + i);
                    check(md.timestamp() == batch.get(i).timestamp, "CreateTime echoed for record " + i);
                    offsets.add(md.partition() + ":" + md.offset());
                }
                put(codec + ".offsets", String.join(",", offsets));
                sent.addAll(batch);
            }
        }
        List<TopicPartition> tps = List.of(new TopicPartition(t, 0), new TopicPartition(t, 1), new TopicPartition(t, 2));
        List<ConsumerRecord<byte[], byte[]>> got = readAll(tps, "read_uncommitted");
        check(got.size() == sent.size(), "read " + got.size() + " records, sent " + sent.size());
        Map<String, Rec> byPos = new HashMap<>();
        for (Rec r : sent) byPos.put(r.partition + ":" + r.offset, r);
        for (ConsumerRecord<byte[], byte[]> r : got) {
            Rec want = byPos.get(r.partition() + ":" + r.offset());
            check(want != null, "unexpected record at " + r.partition() + ":" + r.offset());
            check(Arrays.equals(want.key, r.key()), "key at " + r.partition() + ":" + r.offset());
            check(Arrays.equals(want.value, r.value()), "value at " + r.partition() + ":" + r.offset());
            check(want.timestamp == r.timestamp() && r.timestampType() == TimestampType.CREATE_TIME,
                    "timestamp at " + r.partition() + ":" + r.offset());
            check(sameHeaders(want.headers, r.headers().toArray()), "headers at " + r.partition() + ":" + r.offset());
            check(r.leaderEpoch().isPresent(), "leader epoch at " + r.partition() + ":" + r.offset());
        }
        for (TopicPartition tp : tps) put("read.p" + tp.partition(), offsetsOf(got, tp.partition()));
        put("read.count", got.size());
    }

    /** Error codes the broker answers to requests it must refuse. */
    void errors() throws Exception {
        String small = topic("errors-small");
        createTopic(small, 1, Map.of("max.message.bytes", "1000"));
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(Map.of(
                ProducerConfig.RETRIES_CONFIG, "0", ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false")))) {
            put("produce.too_large", outcome(() -> producer.send(new ProducerRecord<>(small, 0, null, new byte[5000])).get()));
            put("produce.fits", outcome(() -> producer.send(new ProducerRecord<>(small, 0, null, new byte[100])).get()));
        }

        String compacted = topic("errors-compacted");
        createTopic(compacted, 1, Map.of("cleanup.policy", "compact"));
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(Map.of(
                ProducerConfig.RETRIES_CONFIG, "0", ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false")))) {
            put("produce.compacted_no_key", outcome(() -> producer.send(new ProducerRecord<>(compacted, 0, null, "v".getBytes())).get()));
            put("produce.compacted_key", outcome(() -> producer.send(new ProducerRecord<>(compacted, 0, "k".getBytes(), "v".getBytes())).get()));
        }

        String ts = topic("errors-ts");
        put("create.timestamp_before_max", outcome(() -> {
            createTopic(ts, 1, Map.of("message.timestamp.before.max.ms", "3600000"));
            return null;
        }));
        if (out.get(scenario + ".create.timestamp_before_max").equals("ok")) {
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(Map.of(
                    ProducerConfig.RETRIES_CONFIG, "0", ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false")))) {
                put("produce.timestamp_too_old", outcome(() -> producer.send(new ProducerRecord<>(ts, 0, BASE_TS, null, "v".getBytes())).get()));
                put("produce.timestamp_now", outcome(() -> producer.send(new ProducerRecord<>(ts, 0, System.currentTimeMillis(), null, "v".getBytes())).get()));
            }
        }

        put("create.exists", outcome(() -> admin.createTopics(List.of(new NewTopic(small, 1, (short) 1))).all().get()));
        put("create.zero_partitions", outcome(() -> admin.createTopics(List.of(new NewTopic(topic("errors-zero"), 0, (short) 1))).all().get()));
        put("create.replication_3", outcome(() -> admin.createTopics(List.of(new NewTopic(topic("errors-rf"), 1, (short) 3))).all().get()));
        put("create.bad_name", outcome(() -> admin.createTopics(List.of(new NewTopic("bad name!", 1, (short) 1))).all().get()));
        put("create.bad_config_value", outcome(() -> admin.createTopics(List.of(new NewTopic(topic("errors-bad-value"), 1, (short) 1)
                .configs(Map.of("retention.ms", "soon")))).all().get()));
        put("create.unknown_config", outcome(() -> admin.createTopics(List.of(new NewTopic(topic("errors-unknown-config"), 1, (short) 1)
                .configs(Map.of("no.such.config", "1")))).all().get()));
        put("create.validate_only", outcome(() -> admin.createTopics(List.of(new NewTopic(topic("errors-validate"), 2, (short) 1)),
                new CreateTopicsOptions().validateOnly(true)).all().get()));
        put("create.validate_only_created", admin.listTopics().names().get().contains(topic("errors-validate")));
        put("delete.unknown", outcome(() -> admin.deleteTopics(List.of(topic("errors-missing"))).all().get()));
        put("describe.unknown", outcome(() -> admin.describeTopics(List.of(topic("errors-missing"))).allTopicNames().get()));
        put("describe_configs.unknown", outcome(() -> admin.describeConfigs(List.of(
                new ConfigResource(ConfigResource.Type.TOPIC, topic("errors-missing")))).all().get()));
        put("create_partitions.fewer", outcome(() -> admin.createPartitions(Map.of(small, NewPartitions.increaseTo(1))).all().get()));
        put("delete_records.beyond_end", outcome(() -> admin.deleteRecords(Map.of(new TopicPartition(small, 0),
                RecordsToDelete.beforeOffset(1000))).all().get()));
        put("offsets.out_of_range", outcome(() -> {
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(consumerProps(null,
                    Map.of(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none")))) {
                TopicPartition tp = new TopicPartition(small, 0);
                c.assign(List.of(tp));
                c.seek(tp, 500);
                long deadline = System.currentTimeMillis() + WAIT_MS;
                while (System.currentTimeMillis() < deadline) c.poll(Duration.ofMillis(200));
                throw new AssertionError("no error for an out-of-range fetch");
            }
        }));
    }

    static final List<String> TOPIC_CONFIG_PROBE = List.of(
            "cleanup.policy", "compression.type", "delete.retention.ms", "file.delete.delay.ms", "flush.messages",
            "flush.ms", "index.interval.bytes", "max.compaction.lag.ms", "max.message.bytes",
            "message.timestamp.type", "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas",
            "preallocate", "retention.bytes", "retention.ms", "segment.bytes", "segment.index.bytes", "segment.ms",
            "segment.jitter.ms", "unclean.leader.election.enable", "local.retention.ms", "local.retention.bytes",
            "remote.storage.enable", "message.timestamp.before.max.ms", "message.timestamp.after.max.ms");

    static final List<String> BROKER_CONFIG_PROBE = List.of(
            "num.partitions", "default.replication.factor", "auto.create.topics.enable", "delete.topic.enable",
            "message.max.bytes", "compression.type", "min.insync.replicas", "log.segment.bytes", "log.retention.hours",
            "log.retention.ms", "log.retention.bytes", "log.cleanup.policy", "log.roll.hours", "log.cleaner.enable",
            "offsets.topic.num.partitions", "offsets.retention.minutes", "group.initial.rebalance.delay.ms",
            "group.min.session.timeout.ms", "group.max.session.timeout.ms", "group.consumer.session.timeout.ms",
            "group.consumer.heartbeat.interval.ms", "transaction.max.timeout.ms", "transactional.id.expiration.ms",
            "socket.request.max.bytes", "log.message.timestamp.type", "node.id");

    String describeEntry(ConfigEntry e) {
        return (e.value() == null ? "null" : e.value()) + " [" + e.source() + (e.isReadOnly() ? ",ro" : "")
                + (e.isSensitive() ? ",sensitive" : "") + "]";
    }

    Map<String, ConfigEntry> topicConfig(String t) throws Exception {
        ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, t);
        Config c = admin.describeConfigs(List.of(r)).all().get().get(r);
        Map<String, ConfigEntry> m = new TreeMap<>();
        for (ConfigEntry e : c.entries()) m.put(e.name(), e);
        return m;
    }

    /**
     * The topic's configs once {@code name} no longer reads as in {@code previous},
     * or as they read after 10 s; at once if the alter recorded under
     * {@code alterKey} failed. Kafka answers IncrementalAlterConfigs when the
     * controller has committed the change, and DescribeConfigs reads the
     * broker's copy of the metadata, which may not have caught up yet.
     */
    Map<String, ConfigEntry> topicConfigAfterChange(String t, String alterKey, String name,
            Map<String, ConfigEntry> previous) throws Exception {
        String before = valueOf(previous, name);
        Map<String, ConfigEntry> m = topicConfig(t);
        if (!"ok".equals(out.get(scenario + "." + alterKey))) return m;
        for (long until = System.currentTimeMillis() + 10_000; System.currentTimeMillis() < until; Thread.sleep(100)) {
            if (!java.util.Objects.equals(valueOf(m, name), before)) break;
            m = topicConfig(t);
        }
        return m;
    }

    static String valueOf(Map<String, ConfigEntry> configs, String name) {
        ConfigEntry e = configs.get(name);
        return e == null ? "absent" : e.value();
    }

    /** DescribeConfigs (values and sources), IncrementalAlterConfigs, CreatePartitions. */
    void configs() throws Exception {
        String t = topic("configs");
        createTopic(t, 1, Map.of("cleanup.policy", "compact", "retention.ms", "86400000", "segment.bytes", "1048576"));
        Map<String, ConfigEntry> before = topicConfig(t);
        put("topic.names", String.join(",", before.keySet()));
        for (String name : TOPIC_CONFIG_PROBE) {
            ConfigEntry e = before.get(name);
            put("topic." + name, e == null ? "absent" : describeEntry(e));
        }
        ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, t);
        put("alter.set_delete_append", outcome(() -> admin.incrementalAlterConfigs(Map.of(r, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "1000000"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("segment.bytes", ""), AlterConfigOp.OpType.DELETE),
                new AlterConfigOp(new ConfigEntry("cleanup.policy", "delete"), AlterConfigOp.OpType.APPEND)))).all().get()));
        Map<String, ConfigEntry> after = topicConfigAfterChange(t, "alter.set_delete_append", "retention.ms", before);
        for (String name : List.of("retention.ms", "segment.bytes", "cleanup.policy")) {
            put("altered." + name, describeEntry(after.get(name)));
        }
        put("alter.subtract", outcome(() -> admin.incrementalAlterConfigs(Map.of(r, List.of(
                new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.SUBTRACT)))).all().get()));
        put("subtracted.cleanup.policy", describeEntry(
                topicConfigAfterChange(t, "alter.subtract", "cleanup.policy", after).get("cleanup.policy")));
        put("alter.bad_value", outcome(() -> admin.incrementalAlterConfigs(Map.of(r, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET)))).all().get()));
        put("alter.unknown_name", outcome(() -> admin.incrementalAlterConfigs(Map.of(r, List.of(
                new AlterConfigOp(new ConfigEntry("no.such.config", "1"), AlterConfigOp.OpType.SET)))).all().get()));
        put("alter.validate_only", outcome(() -> admin.incrementalAlterConfigs(Map.of(r, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "5"), AlterConfigOp.OpType.SET))),
                new AlterConfigsOptions().validateOnly(true)).all().get()));
        put("validated.retention.ms", describeEntry(topicConfig(t).get("retention.ms")));
        put("alter.unknown_topic", outcome(() -> admin.incrementalAlterConfigs(Map.of(
                new ConfigResource(ConfigResource.Type.TOPIC, topic("configs-missing")), List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "5"), AlterConfigOp.OpType.SET)))).all().get()));

        ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, "1");
        Config bc = admin.describeConfigs(List.of(broker)).all().get().get(broker);
        Map<String, ConfigEntry> bm = new TreeMap<>();
        for (ConfigEntry e : bc.entries()) bm.put(e.name(), e);
        for (String name : BROKER_CONFIG_PROBE) {
            ConfigEntry e = bm.get(name);
            put("broker." + name, e == null ? "absent" : describeEntry(e));
        }
        put("broker.dynamic_set", outcome(() -> admin.incrementalAlterConfigs(Map.of(broker, List.of(
                new AlterConfigOp(new ConfigEntry("log.retention.ms", "7200000"), AlterConfigOp.OpType.SET)))).all().get()));
        // Kafka applies a dynamic broker config through its metadata log: give it a few seconds to show.
        String dynamic = "";
        for (long until = System.currentTimeMillis() + 10_000; System.currentTimeMillis() < until; Thread.sleep(100)) {
            dynamic = outcomeValue(() -> describeEntry(admin.describeConfigs(List.of(broker)).all().get()
                    .get(broker).get("log.retention.ms")));
            if (dynamic.startsWith("7200000")) break;
        }
        put("broker.dynamic_value", dynamic);
        put("broker.dynamic_delete", outcome(() -> admin.incrementalAlterConfigs(Map.of(broker, List.of(
                new AlterConfigOp(new ConfigEntry("log.retention.ms", ""), AlterConfigOp.OpType.DELETE)))).all().get()));
        put("broker.dynamic_readonly", outcome(() -> admin.incrementalAlterConfigs(Map.of(broker, List.of(
                new AlterConfigOp(new ConfigEntry("node.id", "7"), AlterConfigOp.OpType.SET)))).all().get()));

        put("partitions.increase", outcome(() -> admin.createPartitions(Map.of(t, NewPartitions.increaseTo(3))).all().get()));
        waitFor("3 partitions of " + t, () -> {
            try {
                return admin.describeTopics(List.of(t)).allTopicNames().get().get(t).partitions().size() == 3;
            } catch (Exception e) {
                return false;
            }
        });
        put("partitions.count", admin.describeTopics(List.of(t)).allTopicNames().get().get(t).partitions().size());
    }

    /** Metadata, ListOffsets, DeleteRecords, DescribeLogDirs, DescribeProducers, ElectLeaders, DeleteTopics. */
    void adminApi() throws Exception {
        String t = topic("admin");
        createTopic(t, 2, null);
        TopicPartition p0 = new TopicPartition(t, 0);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(Map.of(
                ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true")))) {
            for (int i = 0; i < 20; i++) {
                // Timestamps rise to offset 10, then fall, so the max timestamp is not the last record's.
                long ts = BASE_TS + (i <= 10 ? i : 20 - i) * 1000L;
                producer.send(new ProducerRecord<>(t, 0, ts, null, ("admin-" + i).getBytes()));
            }
            producer.flush();
        }
        TopicDescription d = admin.describeTopics(List.of(t)).allTopicNames().get().get(t);
        put("describe.internal", d.isInternal());
        put("describe.partitions", d.partitions().stream().map(pi -> pi.partition() + ":leader=" + pi.leader().id()
                + ":replicas=" + pi.replicas().stream().map(n -> Integer.toString(n.id())).collect(Collectors.joining("/"))
                + ":isr=" + pi.isr().stream().map(n -> Integer.toString(n.id())).collect(Collectors.joining("/")))
                .collect(Collectors.joining(",")));
        Set<String> listed = admin.listTopics().names().get();
        put("list.contains", listed.contains(t));
        put("list.internal_hidden", !listed.contains("__consumer_offsets"));
        DescribeClusterResult cluster = admin.describeCluster();
        put("cluster.nodes", cluster.nodes().get().stream().map(n -> n.id() + "@" + n.host()).collect(Collectors.joining(",")));
        put("cluster.controller", cluster.controller().get().id());

        put("offsets.earliest", admin.listOffsets(Map.of(p0, OffsetSpec.earliest())).all().get().get(p0).offset());
        put("offsets.latest", admin.listOffsets(Map.of(p0, OffsetSpec.latest())).all().get().get(p0).offset());
        ListOffsetsResult.ListOffsetsResultInfo max = admin.listOffsets(Map.of(p0, OffsetSpec.maxTimestamp())).all().get().get(p0);
        put("offsets.max_timestamp", max.offset() + "@" + (max.timestamp() - BASE_TS));
        ListOffsetsResult.ListOffsetsResultInfo at = admin.listOffsets(Map.of(p0, OffsetSpec.forTimestamp(BASE_TS + 3500))).all().get().get(p0);
        put("offsets.for_timestamp", at.offset() + "@" + (at.timestamp() - BASE_TS));
        ListOffsetsResult.ListOffsetsResultInfo future = admin.listOffsets(Map.of(p0, OffsetSpec.forTimestamp(BASE_TS * 2))).all().get().get(p0);
        put("offsets.for_future_timestamp", future.offset() + "@" + future.timestamp());
        // KIP-1023 (ListOffsets v11, clients 4.2+): a topic without remote
        // storage has nothing pending upload.
        OffsetSpec pending = (OffsetSpec) callIfPresent(OffsetSpec.class, null, "earliestPendingUpload");
        put("offsets.earliest_pending_upload", pending == null ? "client too old"
                : admin.listOffsets(Map.of(p0, pending)).all().get().get(p0).offset());
        put("offsets.empty_partition", admin.listOffsets(Map.of(new TopicPartition(t, 1), OffsetSpec.latest())).all().get()
                .get(new TopicPartition(t, 1)).offset());

        DeletedRecords dr = admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(5))).lowWatermarks().get(p0).get();
        put("delete_records.low_watermark", dr.lowWatermark());
        put("offsets.earliest_after_delete", admin.listOffsets(Map.of(p0, OffsetSpec.earliest())).all().get().get(p0).offset());
        put("delete_records.to_end", admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(-1))).lowWatermarks().get(p0).get().lowWatermark());

        Map<Integer, Map<String, LogDirDescription>> dirs = admin.describeLogDirs(List.of(1)).allDescriptions().get();
        put("log_dirs.brokers", sorted(dirs.keySet()));
        Map<String, LogDirDescription> one = dirs.get(1);
        put("log_dirs.count", one.size());
        for (LogDirDescription ld : one.values()) {
            put("log_dirs.error", ld.error() == null ? "none" : ld.error().getClass().getSimpleName());
            ReplicaInfo ri = ld.replicaInfos().get(p0);
            check(ri != null, "describeLogDirs lists " + p0);
            put("log_dirs.p0_size", ri.size());
            put("log_dirs.p0_offset_lag", ri.offsetLag());
            put("log_dirs.p0_future", ri.isFuture());
            // KIP-1066 (DescribeLogDirs v5, clients 4.2+).
            Object cordoned = callIfPresent(LogDirDescription.class, ld, "isCordoned");
            put("log_dirs.cordoned", cordoned == null ? "client too old" : cordoned);
            put("log_dirs.has_total_bytes", ld.totalBytes().isPresent());
        }
        DescribeProducersResult.PartitionProducerState ps = admin.describeProducers(List.of(p0)).all().get().get(p0);
        put("producers.count", ps.activeProducers().size());
        put("producers.last_sequence", ps.activeProducers().stream().map(s -> Integer.toString(s.lastSequence())).collect(Collectors.joining(",")));
        put("producers.epoch", ps.activeProducers().stream().map(s -> Integer.toString(s.producerEpoch())).collect(Collectors.joining(",")));

        put("elect.preferred", outcome(() -> admin.electLeaders(ElectionType.PREFERRED, Set.of(p0)).partitions().get()
                .get(p0).map(e -> (Object) e.getClass().getSimpleName()).orElse("ok")));
        put("elect.unclean", outcome(() -> admin.electLeaders(ElectionType.UNCLEAN, Set.of(p0)).partitions().get()
                .get(p0).map(e -> (Object) e.getClass().getSimpleName()).orElse("ok")));
        put("elect.preferred_result", outcomeValue(() -> admin.electLeaders(ElectionType.PREFERRED, Set.of(p0)).partitions().get()
                .get(p0).map(e -> e.getClass().getSimpleName()).orElse("ok")));

        put("delete.topic", outcome(() -> admin.deleteTopics(List.of(t)).all().get()));
        waitFor("topic " + t + " to disappear", () -> {
            try {
                return !admin.listTopics().names().get().contains(t);
            } catch (Exception e) {
                return false;
            }
        });
        put("delete.describe_after", outcome(() -> admin.describeTopics(List.of(t)).allTopicNames().get()));
    }

    /** The value a call returned, or the exception class it failed with. */
    static String outcomeValue(Call call) {
        String[] value = new String[1];
        String o = outcome(() -> value[0] = String.valueOf(call.call()));
        return o.equals("ok") ? value[0] : o;
    }

    /** Two consumers in one group (classic or KIP-848), commits, a rebalance, admin on the group. */
    void group(String protocol) throws Exception {
        String t = topic(protocol + "-group");
        String g = topic(protocol + "-g");
        createTopic(t, 4, null);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(null))) {
            for (int i = 0; i < 40; i++) producer.send(new ProducerRecord<>(t, i % 4, null, ("g-" + i).getBytes()));
            producer.flush();
        }
        Map<String, String> extra = new HashMap<>();
        extra.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        if (protocol.equals("classic")) {
            extra.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
            extra.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        }
        KafkaConsumer<byte[], byte[]> c1 = new KafkaConsumer<>(consumerProps(g, extra));
        KafkaConsumer<byte[], byte[]> c2 = new KafkaConsumer<>(consumerProps(g, extra));
        Set<String> seen = new HashSet<>();
        try {
            c1.subscribe(List.of(t));
            c2.subscribe(List.of(t));
            // Until the two members own two partitions each and each has read
            // its partitions to the end (a partition that moved during the
            // first rebalance may be read twice: at least once, not at most).
            long deadline = System.currentTimeMillis() + WAIT_MS;
            while (true) {
                boolean settled = seen.size() == 40 && c1.assignment().size() == 2 && c2.assignment().size() == 2;
                if (settled) {
                    for (KafkaConsumer<byte[], byte[]> c : List.of(c1, c2)) {
                        for (TopicPartition tp : c.assignment()) settled &= c.position(tp) == 10;
                    }
                }
                if (settled) break;
                check(System.currentTimeMillis() < deadline, "two " + protocol + " consumers did not share 4 partitions and read 40 records: "
                        + c1.assignment() + " / " + c2.assignment() + ", " + seen.size() + " distinct read");
                for (KafkaConsumer<byte[], byte[]> c : List.of(c1, c2)) {
                    Map<TopicPartition, Long> last = new HashMap<>();
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) {
                        TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                        check(!last.containsKey(tp) || r.offset() == last.get(tp) + 1, "offsets in order on " + tp);
                        last.put(tp, r.offset());
                        check(new String(r.value()).equals("g-" + (r.offset() * 4 + r.partition())), "value at " + tp + ":" + r.offset());
                        seen.add(tp.partition() + ":" + r.offset());
                    }
                }
            }
            c1.commitSync();
            c2.commitSync();
            put("assignment", c1.assignment().size() + "+" + c2.assignment().size());
            ConsumerGroupDescription desc = admin.describeConsumerGroups(List.of(g)).all().get().get(g);
            put("describe.state", desc.state());
            put("describe.type", desc.type());
            put("describe.members", desc.members().size());
            put("describe.assignor", desc.partitionAssignor());
            put("describe.assigned", desc.members().stream().mapToInt(m -> m.assignment().topicPartitions().size())
                    .boxed().sorted().map(String::valueOf).collect(Collectors.joining("+")));
            put("describe.coordinator", desc.coordinator().id());
            Map<TopicPartition, OffsetAndMetadata> committed = admin.listConsumerGroupOffsets(g).partitionsToOffsetAndMetadata().get();
            put("committed", committed.entrySet().stream().map(e -> e.getKey().partition() + "=" + e.getValue().offset())
                    .sorted().collect(Collectors.joining(",")));
            put("listed", admin.listConsumerGroups().all().get().stream().filter(l -> l.groupId().equals(g))
                    .map(l -> l.groupId() + ":" + l.state().map(Object::toString).orElse("?") + ":" + l.type().map(Object::toString).orElse("?"))
                    .collect(Collectors.joining(",")));
            put("alter_offsets.active", outcome(() -> admin.alterConsumerGroupOffsets(g, Map.of(new TopicPartition(t, 0),
                    new OffsetAndMetadata(3))).all().get()));
            put("delete_group.active", outcome(() -> admin.deleteConsumerGroups(List.of(g)).all().get()));

            c1.close(Duration.ofSeconds(30));
            long d2 = System.currentTimeMillis() + WAIT_MS;
            while (c2.assignment().size() != 4) {
                check(System.currentTimeMillis() < d2, "the remaining " + protocol + " consumer did not take all 4 partitions: " + c2.assignment());
                for (ConsumerRecord<byte[], byte[]> r : c2.poll(Duration.ofMillis(100))) {
                    throw new AssertionError("re-read committed record " + r.topic() + ":" + r.partition() + ":" + r.offset());
                }
            }
            put("after_leave.assignment", c2.assignment().size());
        } finally {
            c1.close(Duration.ofSeconds(30));
            c2.close(Duration.ofSeconds(30));
        }
        waitFor("group " + g + " to be empty", () -> {
            try {
                return admin.describeConsumerGroups(List.of(g)).all().get().get(g).members().isEmpty();
            } catch (Exception e) {
                return false;
            }
        });
        ConsumerGroupDescription empty = admin.describeConsumerGroups(List.of(g)).all().get().get(g);
        put("empty.state", empty.state());
        put("alter_offsets.empty", outcome(() -> admin.alterConsumerGroupOffsets(g, Map.of(new TopicPartition(t, 0),
                new OffsetAndMetadata(3))).all().get()));
        put("delete_offsets", outcome(() -> admin.deleteConsumerGroupOffsets(g, Set.of(new TopicPartition(t, 1))).all().get()));
        Map<TopicPartition, OffsetAndMetadata> altered = admin.listConsumerGroupOffsets(g).partitionsToOffsetAndMetadata().get();
        put("altered", altered.entrySet().stream().map(e -> e.getKey().partition() + "=" + e.getValue().offset())
                .sorted().collect(Collectors.joining(",")));

        // A new member resumes from the committed offsets; partition 1's was deleted, so it starts over there.
        int resumed = 0;
        try (KafkaConsumer<byte[], byte[]> c3 = new KafkaConsumer<>(consumerProps(g, extra))) {
            c3.subscribe(List.of(t));
            long deadline = System.currentTimeMillis() + WAIT_MS;
            int want = 7 + 10;
            while (resumed < want) {
                check(System.currentTimeMillis() < deadline, "resuming consumer read " + resumed + " of " + want);
                for (ConsumerRecord<byte[], byte[]> r : c3.poll(Duration.ofMillis(200))) {
                    check(r.partition() == 0 ? r.offset() >= 3 : r.partition() == 1, "resumed at " + r.partition() + ":" + r.offset());
                    resumed++;
                }
            }
        }
        put("resumed", resumed);
        put("delete_group.empty", outcome(() -> admin.deleteConsumerGroups(List.of(g)).all().get()));
        put("describe_deleted", outcomeValue(() -> admin.describeConsumerGroups(List.of(g)).all().get().get(g).state()));
        put("delete_group.unknown", outcome(() -> admin.deleteConsumerGroups(List.of(topic(protocol + "-no-such-group"))).all().get()));
    }

    /**
     * Pattern subscriptions: the classic protocol resolves the pattern in the
     * client; KIP-848 sends it to the broker (SubscribedTopicRegex), which
     * resolves it. What each consumed is recorded, not checked, so the
     * differential run shows a broker that resolves nothing.
     */
    void regex() throws Exception {
        for (String protocol : List.of("classic", "consumer")) {
            String base = topic("regex-" + protocol);
            List<String> topics = List.of(base + "-a", base + "-b");
            for (String t : topics) createTopic(t, 1, null);
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(null))) {
                for (String t : topics) producer.send(new ProducerRecord<>(t, 0, null, t.getBytes()));
                producer.flush();
            }
            Set<String> seen = new TreeSet<>();
            String result = outcome(() -> {
                try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(consumerProps(topic("regex-g-" + protocol),
                        Map.of(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol, ConsumerConfig.METADATA_MAX_AGE_CONFIG, "1000")))) {
                    c.subscribe(java.util.regex.Pattern.compile(java.util.regex.Pattern.quote(base + "-") + "[ab]"));
                    long deadline = System.currentTimeMillis() + 30_000;
                    while (seen.size() < 2 && System.currentTimeMillis() < deadline) {
                        for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) seen.add(r.topic().substring(base.length()));
                    }
                }
                return null;
            });
            put(protocol + ".outcome", result);
            put(protocol + ".consumed", String.join(",", seen));
        }
    }

    Map<String, String> txnProps(String id) {
        return Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, id, ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "60000");
    }

    /** Commit, abort, an open transaction's LSO, the admin view of transactions, fencing. */
    void transactions() throws Exception {
        String t = topic("txn");
        String id = topic("txn-id");
        createTopic(t, 1, null);
        TopicPartition tp = new TopicPartition(t, 0);
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(txnProps(id)));
        try {
            producer.initTransactions();
            int[] sizes = {5, 3, 2};
            boolean[] commit = {true, false, true};
            for (int n = 0; n < 3; n++) {
                producer.beginTransaction();
                for (int i = 0; i < sizes[n]; i++) producer.send(new ProducerRecord<>(t, 0, null, ("txn-" + n + "-" + i).getBytes()));
                // Flushed first, so the aborted records reach the log and only the marker hides them.
                producer.flush();
                if (commit[n]) producer.commitTransaction();
                else producer.abortTransaction();
            }
            // Transactions v2 (KIP-890) bump the epoch at every end: 3 here; v1 keeps 0.
            put("epoch_after_three", admin.describeTransactions(List.of(id)).all().get().get(id).producerEpoch());
            List<ConsumerRecord<byte[], byte[]>> committed = readAll(List.of(tp), "read_committed");
            List<ConsumerRecord<byte[], byte[]>> all = readAll(List.of(tp), "read_uncommitted");
            put("read_committed", offsetsOf(committed, 0));
            put("read_uncommitted", offsetsOf(all, 0));
            check(committed.stream().noneMatch(r -> new String(r.value()).startsWith("txn-1-")), "read_committed hides the aborted transaction");
            check(committed.size() == 7, "read_committed sees the 7 committed records");

            producer.beginTransaction();
            producer.send(new ProducerRecord<>(t, 0, null, "open".getBytes())).get();
            put("open.latest_committed", admin.listOffsets(Map.of(tp, OffsetSpec.latest()),
                    new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).all().get().get(tp).offset());
            put("open.latest_uncommitted", admin.listOffsets(Map.of(tp, OffsetSpec.latest())).all().get().get(tp).offset());
            TransactionDescription td = admin.describeTransactions(List.of(id)).all().get().get(id);
            put("open.describe.state", td.state());
            put("open.describe.partitions", sorted(td.topicPartitions()));
            put("open.describe.timeout", td.transactionTimeoutMs());
            put("open.describe.has_start", td.transactionStartTimeMs().isPresent());
            put("open.list", admin.listTransactions().all().get().stream().filter(l -> l.transactionalId().equals(id))
                    .map(l -> l.state().toString()).collect(Collectors.joining(",")));
            DescribeProducersResult.PartitionProducerState ps = admin.describeProducers(List.of(tp)).all().get().get(tp);
            put("open.producers", ps.activeProducers().stream().map(s -> "txnStart=" + s.currentTransactionStartOffset().orElse(-1))
                    .collect(Collectors.joining(",")));
            try (Consumer<byte[], byte[]> c = new KafkaConsumer<>(consumerProps(null, Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed")))) {
                put("open.consumer_end_offset", c.endOffsets(List.of(tp)).get(tp));
            }
            producer.commitTransaction();
            waitFor("transaction " + id + " to complete", () -> {
                try {
                    return admin.describeTransactions(List.of(id)).all().get().get(id).state() != TransactionState.ONGOING
                            && admin.describeTransactions(List.of(id)).all().get().get(id).state() != TransactionState.PREPARE_COMMIT;
                } catch (Exception e) {
                    return false;
                }
            });
            put("done.describe.state", admin.describeTransactions(List.of(id)).all().get().get(id).state());
            put("done.latest_committed", admin.listOffsets(Map.of(tp, OffsetSpec.latest()),
                    new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).all().get().get(tp).offset());
            put("describe.unknown_id", outcome(() -> admin.describeTransactions(List.of(topic("no-such-txn"))).all().get()));

            // A second producer with the same id fences the first.
            try (KafkaProducer<byte[], byte[]> second = new KafkaProducer<>(producerProps(txnProps(id)))) {
                second.initTransactions();
                put("fenced", outcome(() -> {
                    producer.beginTransaction();
                    producer.send(new ProducerRecord<>(t, 0, null, "zombie".getBytes())).get();
                    producer.commitTransaction();
                    return null;
                }));
                second.beginTransaction();
                second.send(new ProducerRecord<>(t, 0, null, "second".getBytes()));
                second.commitTransaction();
            }
            List<ConsumerRecord<byte[], byte[]>> last = readAll(List.of(tp), "read_committed");
            check(last.stream().noneMatch(r -> new String(r.value()).equals("zombie")), "the fenced producer's record is not visible");
            check(new String(last.get(last.size() - 1).value()).equals("second"), "the new producer's record is visible last");
            put("final.read_committed", offsetsOf(last, 0));
        } finally {
            producer.close(Duration.ofSeconds(10));
        }
    }

    /** Consume-transform-produce with offsets in the transaction (exactly once). */
    void eos() throws Exception {
        String in = topic("eos-in"), outTopic = topic("eos-out"), g = topic("eos-g");
        createTopic(in, 2, null);
        createTopic(outTopic, 1, null);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(null))) {
            for (int i = 0; i < 30; i++) producer.send(new ProducerRecord<>(in, i % 2, null, ("in-" + i).getBytes()));
            producer.flush();
        }
        int copied = 0, rounds = 0, aborted = 0;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(txnProps(topic("eos-id"))));
             KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps(g,
                     Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed")))) {
            producer.initTransactions();
            consumer.subscribe(List.of(in));
            long deadline = System.currentTimeMillis() + WAIT_MS;
            while (copied < 30) {
                check(System.currentTimeMillis() < deadline, "copied " + copied + " of 30 records exactly once");
                ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(200));
                if (recs.isEmpty()) continue;
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    producer.send(new ProducerRecord<>(outTopic, 0, null, ("out-" + new String(r.value())).getBytes()));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                if (rounds++ == 0) {
                    // The first round is aborted: its output and offsets must vanish, and it is re-read.
                    producer.abortTransaction();
                    aborted = recs.count();
                    for (TopicPartition tp : recs.partitions()) {
                        consumer.seek(tp, recs.records(tp).get(0).offset());
                    }
                    continue;
                }
                producer.commitTransaction();
                copied += recs.count();
            }
        }
        check(aborted > 0, "one transaction was aborted");
        Map<TopicPartition, OffsetAndMetadata> committed = admin.listConsumerGroupOffsets(g).partitionsToOffsetAndMetadata().get();
        put("committed", committed.entrySet().stream().map(e -> e.getKey().partition() + "=" + e.getValue().offset())
                .sorted().collect(Collectors.joining(",")));
        List<ConsumerRecord<byte[], byte[]>> outRecs = readAll(List.of(new TopicPartition(outTopic, 0)), "read_committed");
        Set<String> values = outRecs.stream().map(r -> new String(r.value())).collect(Collectors.toCollection(TreeSet::new));
        check(outRecs.size() == 30 && values.size() == 30, "30 distinct records copied, got " + outRecs.size() + " (" + values.size() + " distinct)");
        put("out.count", outRecs.size());
        put("out.distinct", values.size());
    }

    /** Finalized features (KIP-584), which decide e.g. whether the client uses transactions v2. */
    void features() throws Exception {
        FeatureMetadata fm = admin.describeFeatures().featureMetadata().get();
        put("finalized", fm.finalizedFeatures().entrySet().stream()
                .map(e -> e.getKey() + "=" + e.getValue().minVersionLevel() + ".." + e.getValue().maxVersionLevel())
                .sorted().collect(Collectors.joining(",")));
        put("supported", fm.supportedFeatures().entrySet().stream()
                .map(e -> e.getKey() + "=" + e.getValue().minVersion() + ".." + e.getValue().maxVersion())
                .sorted().collect(Collectors.joining(",")));
    }
}
