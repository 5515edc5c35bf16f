// Consumer-group commits WITH their metadata, byte for byte, through Kafka's own Java AdminClient.
//
// Why: confluent-kafka-python sends a commit's metadata as a C string including its terminating NUL ("abc" reaches
// the broker as "abc\0", which older Kafka Streams versions cannot decode), and librdkafka reads metadata back as a
// C string (metadata without a NUL comes back with bytes of whatever follows it in memory). The pipeline reads and
// writes commits without metadata with confluent-kafka, and the few groups whose commits carry metadata (Kafka
// Streams applications) with this program. It also reads the commits of many groups at once (Cluster.commits_many:
// more than JAVA_BULK_GROUPS), where librdkafka would need a consumer handle per group.
//
// Usage: java -cp '<kafka-clients and slf4j-api jars>' KafkaOffsets.java commit|read|describe <client.properties> <in.tsv>
//   client.properties: Java client settings (bootstrap.servers, security...), plus mm2.failover.timeout.ms
//   commit: in.tsv has one line per partition, every field base64 (UTF-8): group, topic, partition, offset, metadata
//           output, one line per group: "OK\t<group>" or "ERR\t<group>\t<message>"
//   read:   in.tsv has one base64 group per line
//           output per group: "GROUP\t<group>", then "ROW\t<topic>\t<partition>\t<offset>\t<metadata>" per
//           commit (partition and offset in decimal, not base64: 100k rows at 10k groups, decoded in Python), then
//           "OK\t<group>"; or "ERR\t<group>\t<message>"
//   describe: in.tsv has one base64 group per line
//           output: "ROW\t<group>\t<member id>\t<client id>\t<host>" per member, "OK\t<group>\t<state>" after a
//           group's rows (state: Kafka's GroupState name, UNKNOWN for a group the coordinator does not know,
//           NOT_A_CONSUMER_GROUP for a group of another protocol), or "ERR\t<group>\t<message>"
//   fenced: the one writer of a target under its lease (fenced.FencedWriter). <in.tsv> is a transactional id: the
//           program takes it (initTransactions: every earlier producer of that id is fenced, its open transaction
//           aborted), prints "READY", then reads batches from standard input - lines as commit's, then "COMMIT" -
//           and commits each batch in transactions (sendOffsetsToTransaction per group: a transaction's offsets land
//           all or none, and only while this producer's epoch is the newest). Per batch: "OK\t<group>" or
//           "ERR\t<group>\t<message>" per group (a refused group is left out and the others committed again in a
//           new transaction), then "DONE". "FENCED\t<message>" (exit 3) once a newer writer took the id: nothing of
//           the open batch was committed. "FATAL\t<message>" (exit 4): the producer cannot go on (timeout, ACL).
// Every other output field is base64 (UTF-8). Exit 0 when the input was read (groups may still have failed: see the ERR
// lines), 2 on bad input.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeConsumerGroupsResult;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.common.errors.GroupIdNotFoundException;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsResult;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsSpec;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;

public class KafkaOffsets {
    static String text(String b64) {
        return new String(Base64.getDecoder().decode(b64), StandardCharsets.UTF_8);
    }

    static String b64(Object o) {
        return Base64.getEncoder().encodeToString(String.valueOf(o == null ? "" : o).getBytes(StandardCharsets.UTF_8));
    }

    static String error(Throwable t) {
        Throwable c = t instanceof ExecutionException && t.getCause() != null ? t.getCause() : t;
        return b64(c.getClass().getSimpleName() + ": " + c.getMessage());
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 3 || !List.of("commit", "read", "describe", "fenced").contains(args[0])) {
            System.err.println("usage: KafkaOffsets commit|read|describe <client.properties> <in.tsv>\n"
                               + "       KafkaOffsets fenced <client.properties> <transactional.id>");
            System.exit(2);
        }
        Properties props = new Properties();
        try (Reader r = Files.newBufferedReader(Path.of(args[1]), StandardCharsets.UTF_8)) {
            props.load(r);
        }
        long timeoutMs = Long.parseLong((String) props.remove("mm2.failover.timeout.ms"));
        if (args[0].equals("fenced")) {
            System.exit(fenced(props, args[2], timeoutMs));
        }
        List<String> lines = Files.readAllLines(Path.of(args[2]), StandardCharsets.UTF_8);
        try (Admin admin = Admin.create(props)) {
            if (args[0].equals("commit")) {
                commit(admin, lines, timeoutMs);
            } else if (args[0].equals("describe")) {
                describe(admin, lines, timeoutMs);
            } else {
                read(admin, lines, timeoutMs);
            }
        }
    }

    /** One commit line (group, topic, partition, offset, metadata; each base64) added to byGroup; exit 2 if bad. */
    static void addCommit(Map<String, Map<TopicPartition, OffsetAndMetadata>> byGroup, String line) {
        String[] f = line.split("\t", -1);
        if (f.length != 5) {
            System.err.println("bad line: " + line);
            System.exit(2);
        }
        TopicPartition tp = new TopicPartition(text(f[1]), Integer.parseInt(text(f[2])));
        byGroup.computeIfAbsent(text(f[0]), g -> new HashMap<>())
               .put(tp, new OffsetAndMetadata(Long.parseLong(text(f[3])), text(f[4])));
    }

    static void commit(Admin admin, List<String> lines, long timeoutMs) throws InterruptedException {
        Map<String, Map<TopicPartition, OffsetAndMetadata>> byGroup = new TreeMap<>();
        for (String line : lines) {
            if (!line.isEmpty()) {
                addCommit(byGroup, line);
            }
        }
        // one deadline for the whole call (the caller's process timeout is derived from the same formula), commits
        // sent WINDOW at a time: a stalled cluster costs the deadline, not one timeout per group
        long deadline = deadline(timeoutMs, byGroup.size());
        List<Map.Entry<String, Map<TopicPartition, OffsetAndMetadata>>> all = new ArrayList<>(byGroup.entrySet());
        for (int i = 0; i < all.size(); i += WINDOW) {
            Map<String, KafkaFuture<Void>> sent = new LinkedHashMap<>();
            for (Map.Entry<String, Map<TopicPartition, OffsetAndMetadata>> e : all.subList(i, Math.min(all.size(), i + WINDOW))) {
                sent.put(e.getKey(), admin.alterConsumerGroupOffsets(e.getKey(), e.getValue()).all());
            }
            for (Map.Entry<String, KafkaFuture<Void>> e : sent.entrySet()) {
                try {
                    e.getValue().get(remaining(deadline), TimeUnit.MILLISECONDS);
                    System.out.println("OK\t" + b64(e.getKey()));
                } catch (ExecutionException | TimeoutException ex) {
                    System.out.println("ERR\t" + b64(e.getKey()) + "\t" + error(ex));
                }
            }
            System.out.flush();
        }
    }

    static final int WINDOW = 1000;

    /** The fenced writer (see the usage above): 0 at the end of its input, 3 fenced, 4 fatal. */
    static int fenced(Properties props, String transactionalId, long timeoutMs) throws Exception {
        Properties producerProps = new Properties();
        producerProps.putAll(props);
        producerProps.put("transactional.id", transactionalId);
        producerProps.put("key.serializer", ByteArraySerializer.class.getName());
        producerProps.put("value.serializer", ByteArraySerializer.class.getName());
        producerProps.putIfAbsent("max.block.ms", String.valueOf(timeoutMs));
        // a transaction begun right after the previous one's commit waits for its markers (CONCURRENT_TRANSACTIONS,
        // retried after this backoff): 100 ms by default, most of a small batch's time
        producerProps.putIfAbsent("retry.backoff.ms", "10");
        props.remove("transaction.timeout.ms");
        KafkaProducer<byte[], byte[]> producer;
        try {
            producer = new KafkaProducer<>(producerProps);
        } catch (KafkaException e) {
            System.out.println("FATAL\t" + error(e));
            return 4;
        }
        try (Admin admin = Admin.create(props)) {
            takeId(producer, timeoutMs + Long.parseLong(producerProps.getProperty("transaction.timeout.ms", "60000")));
            System.out.println("READY");
            System.out.flush();
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            Map<String, Map<TopicPartition, OffsetAndMetadata>> batch = new TreeMap<>();
            for (String line = in.readLine(); line != null; line = in.readLine()) {
                if (line.equals("COMMIT")) {
                    commitBatch(producer, admin, batch, timeoutMs);
                    batch.clear();
                    System.out.println("DONE");
                    System.out.flush();
                } else if (!line.isEmpty()) {
                    addCommit(batch, line);
                }
            }
            return 0;
        } catch (ProducerFencedException | InvalidProducerEpochException e) {
            System.out.println("FENCED\t" + error(e));
            return 3;
        } catch (KafkaException | ExecutionException | TimeoutException e) {
            System.out.println("FATAL\t" + error(e));
            return 4;
        } finally {
            System.out.flush();
            producer.close(java.time.Duration.ofMillis(timeoutMs));
        }
    }

    /** initTransactions: every earlier producer of this id is fenced from here on. Taking the id waits for the
     *  previous holder's open transaction to be aborted (CONCURRENT_TRANSACTIONS, retried by the client), which that
     *  transaction's timeout - the lease - bounds, while one call blocks for max.block.ms only (the client's timeout:
     *  on a busy machine, shorter than the abort). Kafka says a timed-out initTransactions may be called again (the
     *  same request goes on): it is, until {@code withinMs} have passed. */
    static void takeId(KafkaProducer<byte[], byte[]> producer, long withinMs) {
        long deadline = System.nanoTime() + withinMs * 1_000_000L;
        while (true) {
            try {
                producer.initTransactions();
                return;
            } catch (org.apache.kafka.common.errors.TimeoutException e) {
                if (System.nanoTime() - deadline >= 0) {
                    throw e;
                }
            }
        }
    }

    /** One batch in a transaction: every group's offsets sent (pending: a consumer that fetches its group's offsets
     *  now waits for the transaction's end), then every group described, then the transaction committed only if
     *  none has a member - so no live consumer's group is ever rewritten (a transactional commit of generation -1 is
     *  accepted by the broker even for a live group; AdminClient's alterConsumerGroupOffsets is not). A group
     *  refused (live members, or by the coordinator) aborts the transaction; it is reported, and the others are sent
     *  again in a new one. Fenced and fatal errors propagate (the caller ends the program). */
    static void commitBatch(KafkaProducer<byte[], byte[]> producer, Admin admin,
                            Map<String, Map<TopicPartition, OffsetAndMetadata>> batch, long timeoutMs)
            throws InterruptedException, ExecutionException, TimeoutException {
        Map<String, String> refused = new TreeMap<>();
        while (refused.size() < batch.size()) {
            producer.beginTransaction();
            List<String> sent = new ArrayList<>();
            for (Map.Entry<String, Map<TopicPartition, OffsetAndMetadata>> e : batch.entrySet()) {
                if (refused.containsKey(e.getKey())) {
                    continue;
                }
                try {
                    producer.sendOffsetsToTransaction(e.getValue(), new ConsumerGroupMetadata(e.getKey()));
                    sent.add(e.getKey());
                } catch (ProducerFencedException | InvalidProducerEpochException ex) {
                    throw ex;
                } catch (KafkaException ex) {
                    if (!abortable(ex)) {
                        throw ex;
                    }
                    refused.put(e.getKey(), error(ex));
                    sent.clear();
                    break;
                }
            }
            if (!sent.isEmpty()) {
                refused.putAll(live(admin, sent, timeoutMs));
            }
            if (sent.isEmpty() || refused.keySet().stream().anyMatch(sent::contains)) {
                producer.abortTransaction();
                continue;
            }
            producer.commitTransaction();
            break;
        }
        for (String g : batch.keySet()) {
            System.out.println(refused.containsKey(g) ? "ERR\t" + b64(g) + "\t" + refused.get(g) : "OK\t" + b64(g));
        }
    }

    /** The groups of ``groups`` that have members now, each with its refusal (base64). */
    static Map<String, String> live(Admin admin, List<String> groups, long timeoutMs)
            throws InterruptedException, ExecutionException, TimeoutException {
        Map<String, String> out = new TreeMap<>();
        Map<String, KafkaFuture<ConsumerGroupDescription>> described = admin.describeConsumerGroups(groups).describedGroups();
        for (String g : groups) {
            ConsumerGroupDescription d;
            try {
                d = described.get(g).get(timeoutMs, TimeUnit.MILLISECONDS);
            } catch (ExecutionException ex) {
                if (ex.getCause() instanceof GroupIdNotFoundException) {
                    continue;  // no group (yet): nobody consumes in it
                }
                throw ex;
            }
            if (!d.members().isEmpty()) {
                List<String> who = new ArrayList<>();
                for (MemberDescription m : d.members()) {
                    who.add(m.clientId() + "@" + m.host());
                }
                out.put(g, b64("NON_EMPTY_GROUP: the group has " + d.members().size() + " live member(s) on the "
                               + "target (" + String.join(", ", who) + ", state " + d.state() + "): a consumer "
                               + "reads there; stop it, then retry"));
            }
        }
        return out;
    }

    /** Whether the producer can abort and go on after ex (one group refused: live members, its ACL); a timeout or
     *  a fatal error cannot be told apart from a lost transaction, and ends the writer. */
    static boolean abortable(KafkaException ex) {
        return !(ex instanceof org.apache.kafka.common.errors.TimeoutException)
            && !(ex instanceof org.apache.kafka.common.errors.TransactionalIdAuthorizationException);
    }

    /** The call's deadline: one timeout, and one more per WINDOW groups (java_call_timeout in java_bridge). */
    static long deadline(long timeoutMs, int groups) {
        return System.currentTimeMillis() + timeoutMs * (1 + (groups + WINDOW - 1) / WINDOW);
    }

    static long remaining(long deadline) {
        return Math.max(1, deadline - System.currentTimeMillis());
    }

    static void read(Admin admin, List<String> lines, long timeoutMs) throws InterruptedException {
        List<String> groups = new ArrayList<>();
        for (String line : lines) {
            if (!line.isEmpty()) {
                groups.add(text(line));
            }
        }
        // up to 1,000 groups per call: the client sends one OffsetFetch per coordinator for all of them (KIP-709)
        Map<String, KafkaFuture<Map<TopicPartition, OffsetAndMetadata>>> pending = new LinkedHashMap<>();
        for (int i = 0; i < groups.size(); i += 1000) {
            Map<String, ListConsumerGroupOffsetsSpec> specs = new LinkedHashMap<>();
            for (String g : groups.subList(i, Math.min(groups.size(), i + 1000))) {
                specs.put(g, new ListConsumerGroupOffsetsSpec());
            }
            ListConsumerGroupOffsetsResult res = admin.listConsumerGroupOffsets(specs);
            for (String g : specs.keySet()) {
                pending.put(g, res.partitionsToOffsetAndMetadata(g));
            }
        }
        long deadline = deadline(timeoutMs, groups.size());
        for (String g : groups) {
            try {
                Map<TopicPartition, OffsetAndMetadata> m = pending.get(g).get(remaining(deadline), TimeUnit.MILLISECONDS);
                StringBuilder out = new StringBuilder("GROUP\t").append(b64(g)).append('\n');
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e : m.entrySet()) {
                    if (e.getValue() == null) {
                        continue;
                    }
                    out.append("ROW\t").append(b64(e.getKey().topic())).append('\t').append(e.getKey().partition())
                       .append('\t').append(e.getValue().offset()).append('\t').append(b64(e.getValue().metadata()))
                       .append('\n');
                }
                System.out.print(out);
                System.out.println("OK\t" + b64(g));
            } catch (ExecutionException | TimeoutException ex) {
                System.out.println("ERR\t" + b64(g) + "\t" + error(ex));
            }
            System.out.flush();
        }
    }

    static List<String> groups(List<String> lines) {
        List<String> groups = new ArrayList<>();
        for (String line : lines) {
            if (!line.isEmpty()) {
                groups.add(text(line));
            }
        }
        return groups;
    }

    // The coordinators' description of many groups: the client batches them, one request per coordinator per call
    // (librdkafka sends one per group). A group the coordinator does not know is UNKNOWN, as cluster.py reads
    // librdkafka's GROUP_ID_NOT_FOUND; a group of another protocol (Connect, share) is NOT_A_CONSUMER_GROUP, which
    // the gate never takes for empty.
    static void describe(Admin admin, List<String> lines, long timeoutMs) throws InterruptedException {
        List<String> groups = groups(lines);
        Map<String, KafkaFuture<ConsumerGroupDescription>> pending = new LinkedHashMap<>();
        for (int i = 0; i < groups.size(); i += WINDOW) {
            DescribeConsumerGroupsResult res = admin.describeConsumerGroups(groups.subList(i, Math.min(groups.size(), i + WINDOW)));
            pending.putAll(res.describedGroups());
        }
        long deadline = deadline(timeoutMs, groups.size());
        for (String g : groups) {
            try {
                ConsumerGroupDescription d = pending.get(g).get(remaining(deadline), TimeUnit.MILLISECONDS);
                StringBuilder out = new StringBuilder();
                for (MemberDescription m : d.members()) {
                    out.append("ROW\t").append(b64(g)).append('\t').append(b64(m.consumerId())).append('\t')
                       .append(b64(m.clientId())).append('\t').append(b64(m.host())).append('\n');
                }
                System.out.print(out);
                System.out.println("OK\t" + b64(g) + "\t" + b64(d.state().name()));
            } catch (ExecutionException ex) {
                Throwable c = ex.getCause();
                if (c instanceof GroupIdNotFoundException) {
                    System.out.println("OK\t" + b64(g) + "\t" + b64("UNKNOWN"));
                } else if (c instanceof IllegalArgumentException && String.valueOf(c.getMessage()).contains("is not a consumer group")) {
                    System.out.println("OK\t" + b64(g) + "\t" + b64("NOT_A_CONSUMER_GROUP"));
                } else {
                    System.out.println("ERR\t" + b64(g) + "\t" + error(ex));
                }
            } catch (TimeoutException ex) {
                System.out.println("ERR\t" + b64(g) + "\t" + error(ex));
            }
            System.out.flush();
        }
    }
}
