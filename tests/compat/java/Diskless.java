/*
 * The Java client on a diskless topic (KIP-1150), for
 * tests/compat/test_diskless_java.py: every broker of --bootstraps in turn
 * is the client's only bootstrap server.
 *
 *   1. with --create, the topic is created diskless through the first
 *      broker; through each broker, DescribeConfigs must say
 *      diskless.enable=true, Metadata must name a leader for every
 *      partition, the same one through every broker, and
 *      Admin.describeTopics the same leaders as Metadata;
 *   2. through each broker and with each codec, an idempotent acks=all
 *      producer sends records (keys, binary values of varied sizes up to
 *      300 KB, null and empty ones, headers with null values) to explicit
 *      partitions; the acknowledged offsets, in send order, must be dense
 *      from 0 per partition;
 *   3. through each broker, a consumer assigned every partition reads from
 *      the beginning to the end offsets: each record byte-identical to the
 *      one sent (key, value, headers, timestamp) at its acknowledged
 *      offset, in order, no gap, no duplicate.
 *
 * A failed check prints "FAIL reason" and the exit status is 1; otherwise
 * a summary and 0. Every wait has a deadline.
 *
 * Usage: java -cp CLASSPATH:. Diskless --bootstraps HOST:PORT[,HOST:PORT...]
 *            --topic T --partitions N [--create] [--records R]
 */

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class Diskless {
    static final List<String> CODECS = List.of("none", "gzip", "snappy", "lz4", "zstd");
    static final long WAIT_MS = 120_000;
    static final long BASE_TS = 1_700_000_000_000L;
    // Enough to show a flood of failures without burying the first ones.
    static final int MAX_FAILURES = 50;

    final List<String> bootstraps;
    final String topic;
    final int partitions;
    final int perRun;
    int failures = 0;
    // What was sent, per partition in send order.
    final List<List<Rec>> sent = new ArrayList<>();

    Diskless(List<String> bootstraps, String topic, int partitions, int perRun) {
        this.bootstraps = bootstraps;
        this.topic = topic;
        this.partitions = partitions;
        this.perRun = perRun;
        for (int p = 0; p < partitions; p++) sent.add(new ArrayList<>());
    }

    public static void main(String[] args) {
        List<String> bootstraps = null;
        String topic = null;
        int partitions = 0, records = 30;
        boolean create = false;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--bootstraps": bootstraps = Arrays.asList(args[++i].split(",")); break;
                case "--topic": topic = args[++i]; break;
                case "--partitions": partitions = Integer.parseInt(args[++i]); break;
                case "--records": records = Integer.parseInt(args[++i]); break;
                case "--create": create = true; break;
                default: throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        if (bootstraps == null || topic == null || partitions < 1) {
            System.err.println("usage: Diskless --bootstraps H:P[,H:P...] --topic T --partitions N [--create] [--records R]");
            System.exit(2);
        }
        Diskless d = new Diskless(bootstraps, topic, partitions, records);
        long start = System.nanoTime();
        try {
            d.run(create);
        } catch (Throwable t) {
            t.printStackTrace();
            d.fail("aborted: " + t);
        }
        if (d.failures > 0) {
            System.out.println(d.failures + " failure(s)");
            System.exit(1);
        }
        int total = d.sent.stream().mapToInt(List::size).sum();
        System.out.printf("OK %s: %d records over %d partitions produced through each of %d broker(s) with %s, "
                        + "read back byte-identical through each, offsets dense from 0 (%.1f s)%n",
                topic, total, partitions, bootstraps.size(), String.join(",", CODECS), (System.nanoTime() - start) / 1e9);
        System.exit(0);
    }

    void fail(String why) {
        failures++;
        if (failures <= MAX_FAILURES) System.out.println("FAIL " + why);
    }

    void run(boolean create) throws Exception {
        if (create) createTopic();
        checkTopic();
        for (String b : bootstraps) {
            for (String codec : CODECS) produce(b, codec);
        }
        checkAcknowledged();
        for (String b : bootstraps) consume(b);
    }

    static Admin admin(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "60000");
        return Admin.create(p);
    }

    interface Probe<T> { T get() throws Exception; }

    /** Polls `probe` until it answers non-null; null when `ms` have passed. */
    static <T> T waitFor(long ms, Probe<T> probe) throws InterruptedException {
        long deadline = System.currentTimeMillis() + ms;
        while (System.currentTimeMillis() < deadline) {
            try {
                T v = probe.get();
                if (v != null) return v;
            } catch (Exception e) {
                // not there yet (unknown topic, no leader): ask again
            }
            Thread.sleep(200);
        }
        return null;
    }

    void createTopic() throws Exception {
        try (Admin a = admin(bootstraps.get(0))) {
            a.createTopics(List.of(new NewTopic(topic, partitions, (short) 1)
                    .configs(Map.of("diskless.enable", "true")))).all().get();
        }
    }

    /**
     * Diskless through every broker; Metadata through every broker names a
     * leader for each partition, the same one, and Admin.describeTopics
     * (DescribeTopicPartitions in kafka-clients 4.x) names the same.
     */
    void checkTopic() throws Exception {
        Map<Integer, Integer> first = null;
        for (String b : bootstraps) {
            try (Admin a = admin(b); KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(consumerProps(b))) {
                // A broker of a cluster learns of a new topic, and of the
                // brokers that joined after it, a little later: wait until
                // it describes the topic, with leaders that agree with the
                // first broker's.
                ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, topic);
                ConfigEntry e = waitFor(WAIT_MS,
                        () -> a.describeConfigs(List.of(r)).all().get().get(r).get("diskless.enable"));
                if (e == null || !"true".equals(e.value())) {
                    fail("DescribeConfigs through " + b + ": diskless.enable is " + (e == null ? "absent" : e.value()));
                }
                Map<Integer, Integer> want = first;
                Map<Integer, Integer> leaders = waitFor(WAIT_MS, () -> {
                    Map<Integer, Integer> m = new TreeMap<>();
                    for (PartitionInfo pi : c.partitionsFor(topic, Duration.ofSeconds(10))) {
                        if (pi.leader() == null || pi.leader().id() < 0) return null;
                        m.put(pi.partition(), pi.leader().id());
                    }
                    return m.size() == partitions && (want == null || want.equals(m)) ? m : null;
                });
                if (leaders == null) {
                    fail("Metadata through " + b + ": no leader for every partition of " + topic
                            + (want == null ? "" : " agreeing with " + want) + " within " + WAIT_MS + " ms");
                    return;
                }
                if (first == null) first = leaders;
                System.out.println("leaders (Metadata) through " + b + ": " + leaders);
                // Metadata agreed already: a short wait is enough.
                Map<Integer, Integer> described = new TreeMap<>();
                boolean same = waitFor(10_000, () -> {
                    described.clear();
                    TopicDescription d = a.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                    for (TopicPartitionInfo pi : d.partitions()) {
                        described.put(pi.partition(), pi.leader() == null ? -1 : pi.leader().id());
                    }
                    return described.equals(leaders) ? true : null;
                }) != null;
                if (!same) {
                    fail("Admin.describeTopics through " + b + " names leaders " + described + ", Metadata " + leaders);
                }
            }
        }
    }

    /** One record sent, remembered to compare with what is read back. */
    static final class Rec {
        final String id;
        final int partition;
        final byte[] key, value;
        final long timestamp;
        final List<Header> headers;
        long offset = -1;

        Rec(String id, int partition, byte[] key, byte[] value, long timestamp, List<Header> headers) {
            this.id = id;
            this.partition = partition;
            this.key = key;
            this.value = value;
            this.timestamp = timestamp;
            this.headers = headers;
        }
    }

    static byte[] randomBytes(Random rnd, int n) {
        byte[] b = new byte[n];
        rnd.nextBytes(b);
        return b;
    }

    /** Record `i` of one producer run: every shape a value or key takes, deterministic per run. */
    Rec makeRecord(String run, int i, long timestamp) {
        Random rnd = new Random(run.hashCode() * 1_000_003L + i);
        byte[] key = i % 9 == 4 ? null
                : (run + "-key-" + i + "-\u00e9").getBytes(StandardCharsets.UTF_8);
        byte[] value;
        switch (i % 10) {
            case 0: value = new byte[0]; break;
            case 3: value = i % 20 == 3 ? null : randomBytes(rnd, 1 + rnd.nextInt(200)); break;
            case 5: value = randomBytes(rnd, 1000 + rnd.nextInt(20_000)); break;
            case 7:
                // 150 KB that no codec shrinks, or 300 KB that every one does.
                if (i % 20 == 7) {
                    value = randomBytes(rnd, 150_000);
                } else {
                    value = new byte[300_000];
                    for (int j = 0; j < value.length; j++) value[j] = (byte) ("krabka".charAt(j % 6) + j / 4096);
                }
                break;
            default:
                byte[] text = (run + "-value-" + i + "-").getBytes(StandardCharsets.UTF_8);
                value = Arrays.copyOf(text, text.length + rnd.nextInt(64));
                for (int j = text.length; j < value.length; j++) value[j] = (byte) rnd.nextInt(256);
        }
        List<Header> headers = new ArrayList<>();
        if (i % 3 == 0) {
            headers.add(new RecordHeader("h1", ("hv-" + i).getBytes(StandardCharsets.UTF_8)));
            headers.add(new RecordHeader("h-null", null));
            headers.add(new RecordHeader("h-bin", randomBytes(rnd, 1 + i % 17)));
            headers.add(new RecordHeader("h1", new byte[0]));
        } else if (i % 3 == 1) {
            headers.add(new RecordHeader("\u00fcnicode", new byte[] {0, -1, 0x7f}));
        }
        return new Rec(run + "#" + i, i % partitions, key, value, timestamp, headers);
    }

    void produce(String bootstrap, String codec) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "60000");
        String run = bootstrap + "/" + codec;
        List<Rec> batch = new ArrayList<>();
        List<Future<RecordMetadata>> futures = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < perRun; i++) {
                Rec r = makeRecord(run, i, BASE_TS + (sent.stream().mapToInt(List::size).sum() + i) * 1000L);
                batch.add(r);
                futures.add(producer.send(new ProducerRecord<>(topic, r.partition, r.timestamp, r.key, r.value, r.headers)));
            }
            producer.flush();
            for (int i = 0; i < batch.size(); i++) {
                Rec r = batch.get(i);
                RecordMetadata md;
                try {
                    md = futures.get(i).get();
                } catch (Exception e) {
                    fail("produce " + r.id + " to partition " + r.partition + ": " + e.getCause());
                    continue;
                }
                r.offset = md.offset();
                if (md.partition() != r.partition) fail(r.id + " acknowledged for partition " + md.partition());
                if (md.timestamp() != r.timestamp) fail(r.id + " acknowledged with timestamp " + md.timestamp());
            }
        }
        for (Rec r : batch) sent.get(r.partition).add(r);
    }

    /** Only this program writes the topic, one producer after another: each partition's acknowledged offsets, in send order, are 0, 1, 2, ... */
    void checkAcknowledged() {
        for (int p = 0; p < partitions; p++) {
            List<Rec> recs = sent.get(p);
            for (int i = 0; i < recs.size(); i++) {
                if (recs.get(i).offset != i) {
                    fail("partition " + p + ": record " + i + " sent (" + recs.get(i).id + ") acknowledged at offset "
                            + recs.get(i).offset + ", not " + i);
                }
            }
        }
    }

    static boolean sameHeaders(List<Header> a, Header[] b) {
        if (a.size() != b.length) return false;
        for (int i = 0; i < b.length; i++) {
            if (!a.get(i).key().equals(b[i].key()) || !Arrays.equals(a.get(i).value(), b[i].value())) return false;
        }
        return true;
    }

    static String describe(byte[] b) {
        return b == null ? "null" : b.length + " bytes";
    }

    /** A consumer of no group, bootstrapped through `bootstrap` only. */
    static Properties consumerProps(String bootstrap) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "60000");
        return p;
    }

    void consume(String bootstrap) throws Exception {
        List<TopicPartition> tps = new ArrayList<>();
        for (int i = 0; i < partitions; i++) tps.add(new TopicPartition(topic, i));
        List<List<ConsumerRecord<byte[], byte[]>>> got = new ArrayList<>();
        for (int i = 0; i < partitions; i++) got.add(new ArrayList<>());
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(consumerProps(bootstrap))) {
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> begin = c.beginningOffsets(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps);
            for (TopicPartition tp : tps) {
                int n = sent.get(tp.partition()).size();
                if (begin.get(tp) != 0 || end.get(tp) != n) {
                    fail("through " + bootstrap + ": " + tp + " spans offsets " + begin.get(tp) + " to " + end.get(tp)
                            + ", sent " + n);
                }
            }
            long deadline = System.currentTimeMillis() + WAIT_MS;
            while (true) {
                boolean done = true;
                for (TopicPartition tp : tps) if (c.position(tp) < end.get(tp)) done = false;
                if (done) break;
                if (System.currentTimeMillis() > deadline) {
                    Map<TopicPartition, Long> at = new TreeMap<>(Comparator.comparingInt(TopicPartition::partition));
                    for (TopicPartition tp : tps) at.put(tp, c.position(tp));
                    fail("through " + bootstrap + ": reading up to " + end + " timed out after " + WAIT_MS + " ms at " + at);
                    break;
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) got.get(r.partition()).add(r);
            }
        }
        for (int part = 0; part < partitions; part++) {
            List<Rec> want = sent.get(part);
            List<ConsumerRecord<byte[], byte[]>> have = got.get(part);
            if (have.size() != want.size()) {
                fail("through " + bootstrap + ": partition " + part + " read " + have.size() + " records, sent " + want.size());
            }
            for (int i = 0; i < have.size(); i++) {
                ConsumerRecord<byte[], byte[]> r = have.get(i);
                String at = "through " + bootstrap + ": " + part + ":" + r.offset();
                if (r.offset() != i) {
                    fail(at + " is read record " + i + " (offsets must be dense from 0, in order)");
                    break;
                }
                if (i >= want.size()) {
                    fail(at + " was never sent");
                    continue;
                }
                Rec w = want.get(i);
                if (w.offset != r.offset()) fail(at + ": " + w.id + " was acknowledged at offset " + w.offset);
                if (!Arrays.equals(w.key, r.key())) fail(at + ": key " + describe(r.key()) + " is not " + w.id + "'s");
                if (!Arrays.equals(w.value, r.value())) {
                    fail(at + ": value " + describe(r.value()) + " is not " + w.id + "'s (" + describe(w.value) + ")");
                }
                if (!sameHeaders(w.headers, r.headers().toArray())) fail(at + ": headers are not " + w.id + "'s");
                if (r.timestamp() != w.timestamp || r.timestampType() != TimestampType.CREATE_TIME) {
                    fail(at + ": timestamp " + r.timestampType() + " " + r.timestamp() + ", sent " + w.timestamp);
                }
            }
        }
        System.out.println("read " + got.stream().mapToInt(List::size).sum() + " records through " + bootstrap);
    }
}
