import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Transactions v2 (KIP-890) with the Java client across the brokers of a
 * cluster: the client adds no partition itself, so each Produce v12 and the
 * TxnOffsetCommit v5 must reach the transaction's coordinator through the
 * broker that takes them, wherever it is.
 *
 * Four transactions write one record to each partition of a topic spread
 * over the brokers (the third aborts; the last also commits a group offset
 * with sendOffsetsToTransaction). A read_committed consumer through the
 * last bootstrap must see exactly the committed records, the group offset
 * must be committed, and the producer epoch must have moved once per
 * transaction — the mark of transactions v2. Prints the leaders, then "OK".
 */
public class TransactionsV2 {
    static final long WAIT_MS = 60_000;

    public static void main(String[] args) throws Exception {
        List<String> bootstraps = List.of();
        String topic = null, id = null, group = null;
        int partitions = 4;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--bootstraps": bootstraps = Arrays.asList(args[++i].split(",")); break;
                case "--topic": topic = args[++i]; break;
                case "--partitions": partitions = Integer.parseInt(args[++i]); break;
                case "--id": id = args[++i]; break;
                case "--group": group = args[++i]; break;
                default: throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        String first = bootstraps.get(0), last = bootstraps.get(bootstraps.size() - 1);
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, first);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get();
            Map<Integer, Integer> leaders = new TreeMap<>();
            long deadline = System.currentTimeMillis() + WAIT_MS;
            while (leaders.size() < partitions) {
                check(System.currentTimeMillis() < deadline, "leaders of " + topic + " known: " + leaders);
                TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                leaders.clear();
                d.partitions().forEach(p -> { if (p.leader() != null) leaders.put(p.partition(), p.leader().id()); });
                if (leaders.size() < partitions) Thread.sleep(200);
            }
            System.out.println("LEADERS " + leaders);

            Properties pp = new Properties();
            pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, first);
            pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, id);
            pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
            pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
            List<String> committed = new ArrayList<>();
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
                producer.initTransactions();
                short initial = epoch(admin, id);
                for (int n = 0; n < 4; n++) {
                    producer.beginTransaction();
                    List<String> sent = new ArrayList<>();
                    for (int p = 0; p < partitions; p++) {
                        String value = "txn-" + n + "-p" + p;
                        producer.send(new ProducerRecord<>(topic, p, null, value.getBytes())).get();
                        sent.add(value);
                    }
                    if (n == 3) {
                        producer.sendOffsetsToTransaction(
                                Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(5)),
                                new ConsumerGroupMetadata(group));
                    }
                    if (n == 2) {
                        producer.abortTransaction();
                    } else {
                        producer.commitTransaction();
                        committed.addAll(sent);
                    }
                }
                short after = epoch(admin, id);
                System.out.println("EPOCHS " + initial + " -> " + after);
                check(after == initial + 4, "the epoch moved once per transaction (v2): " + initial + " -> " + after);
            }

            Properties cp = new Properties();
            cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, last);
            cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
            cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            List<String> seen = new ArrayList<>();
            try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp)) {
                List<TopicPartition> tps = new ArrayList<>();
                for (int p = 0; p < partitions; p++) tps.add(new TopicPartition(topic, p));
                consumer.assign(tps);
                consumer.seekToBeginning(tps);
                Map<TopicPartition, Long> end = consumer.endOffsets(tps);
                long readUntil = System.currentTimeMillis() + WAIT_MS;
                while (tps.stream().anyMatch(tp -> consumer.position(tp) < end.get(tp))) {
                    check(System.currentTimeMillis() < deadline, "read up to " + end + ", seen " + seen);
                    for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) seen.add(new String(r.value()));
                }
            }
            check(seen.stream().sorted().collect(Collectors.toList()).equals(committed.stream().sorted().collect(Collectors.toList())),
                    "read_committed sees exactly the committed records: " + seen);
            Map<TopicPartition, OffsetAndMetadata> offsets = admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata().get();
            check(offsets.containsKey(new TopicPartition(topic, 0)) && offsets.get(new TopicPartition(topic, 0)).offset() == 5,
                    "the transaction's group offset is committed: " + offsets);
        }
        System.out.println("OK");
    }

    static short epoch(Admin admin, String id) throws Exception {
        TransactionDescription d = admin.describeTransactions(List.of(id)).all().get().get(id);
        return (short) d.producerEpoch();
    }

    static void check(boolean ok, String what) {
        if (!ok) throw new AssertionError(what);
    }
}
