/*
 * Baselines for bench/latest_checkpoints_bench.py: Kafka's own ways of getting the latest checkpoint per
 * (group, topic, partition) from <alias>.checkpoints.internal, timed inside one JVM.
 *
 *   java -cp '.cache/jars/kafka/*' bench/jvm/TranslateBench.java <mode> <bootstrap> <alias> <groups...>
 *
 * Modes:
 *   per-group  RemoteClusterUtils.translateOffsets(props, alias, group, timeout) once per listed group (each call
 *              builds a MirrorClient, reads the whole checkpoint topic and keeps that group's records);
 *   batch      RemoteClusterUtils.translateOffsets(props, alias, Pattern, timeout) (KIP-1239, Kafka 4.3): every
 *              group matching the pattern (system property -Dbench.pattern, default ".*") in one read;
 *   consumer   a plain KafkaConsumer tuned for one big sequential read (max.poll.records=100000,
 *              max.partition.fetch.bytes=16 MiB, fetch.max.bytes=64 MiB) decoding every record with Kafka's own
 *              Checkpoint.deserializeRecord, keeping the last record per key.
 *
 * The listed groups are the sample whose answers are printed (to be checked against the Spark job's output);
 * batch and consumer also print a count and a checksum (sum of downstream offsets) over every group.
 * Output: one line per event, "TRANSLATE_BENCH <json>". Written without a JSON library on purpose.
 */

import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.connect.mirror.Checkpoint;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

public class TranslateBench {
    static final Duration TIMEOUT = Duration.ofMinutes(30); // translateOffsets returns a PARTIAL answer on timeout

    public static void main(String[] args) throws Exception {
        long mainStart = System.currentTimeMillis();
        if (args.length < 3) {
            System.err.println("usage: TranslateBench per-group|batch|consumer <bootstrap> <alias> <groups...>");
            System.exit(2);
        }
        String mode = args[0], bootstrap = args[1], alias = args[2];
        List<String> groups = List.of(args).subList(3, args.length);
        long jvmStart = ManagementFactory.getRuntimeMXBean().getStartTime();
        emit("{\"event\":\"start\",\"mode\":" + q(mode) + ",\"jvm_to_main_ms\":" + (mainStart - jvmStart) + "}");
        Map<String, Object> props = new HashMap<>();
        props.put("bootstrap.servers", bootstrap);
        switch (mode) {
            case "per-group": perGroup(props, alias, groups); break;
            case "batch": batch(props, alias, groups); break;
            case "consumer": consumer(bootstrap, alias, groups); break;
            default:
                System.err.println("unknown mode " + mode);
                System.exit(2);
        }
        emit("{\"event\":\"end\",\"mode\":" + q(mode) + ",\"main_ms\":" + (System.currentTimeMillis() - mainStart) + "}");
    }

    /** CPU time of this JVM (every thread: the caller, the client's network thread, GC, JIT), in ms. */
    static double cpuMs() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime() / 1e6;
    }

    static void perGroup(Map<String, Object> props, String alias, List<String> groups) throws Exception {
        for (String g : groups) {
            double c0 = cpuMs();
            long t0 = System.nanoTime();
            Map<TopicPartition, OffsetAndMetadata> r = RemoteClusterUtils.translateOffsets(props, alias, g, TIMEOUT);
            double ms = (System.nanoTime() - t0) / 1e6;
            emit("{\"event\":\"group\",\"group\":" + q(g) + ",\"ms\":" + ms + ",\"cpu_ms\":" + (cpuMs() - c0)
                 + ",\"offsets\":" + offsets(r) + "}");
        }
    }

    static void batch(Map<String, Object> props, String alias, List<String> sample) throws Exception {
        Pattern p = Pattern.compile(System.getProperty("bench.pattern", ".*"));
        double c0 = cpuMs();
        long t0 = System.nanoTime();
        Map<String, Map<TopicPartition, OffsetAndMetadata>> all = RemoteClusterUtils.translateOffsets(props, alias, p, TIMEOUT);
        double ms = (System.nanoTime() - t0) / 1e6;
        long keys = 0, checksum = 0;
        for (Map<TopicPartition, OffsetAndMetadata> m : all.values())
            for (OffsetAndMetadata o : m.values()) { keys++; checksum += o.offset(); }
        emit("{\"event\":\"batch\",\"ms\":" + ms + ",\"cpu_ms\":" + (cpuMs() - c0) + ",\"groups\":" + all.size() + ",\"keys\":" + keys
             + ",\"checksum\":" + checksum + "}");
        for (String g : sample)
            emit("{\"event\":\"group\",\"group\":" + q(g) + ",\"offsets\":" + offsets(all.getOrDefault(g, Map.of())) + "}");
    }

    static void consumer(String bootstrap, String alias, List<String> sample) {
        String topic = alias + ".checkpoints.internal";
        Map<String, Object> conf = new HashMap<>();
        conf.put("bootstrap.servers", bootstrap);
        conf.put("enable.auto.commit", "false");
        conf.put("max.poll.records", "100000");
        conf.put("max.partition.fetch.bytes", String.valueOf(16 << 20));
        conf.put("fetch.max.bytes", String.valueOf(64 << 20));
        double c0 = cpuMs();
        long t0 = System.nanoTime();
        KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(conf, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        Map<String, Map<TopicPartition, Long>> latest = new HashMap<>();
        long records = 0;
        double readMs, closeMs;
        try {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo pi : c.partitionsFor(topic)) tps.add(new TopicPartition(topic, pi.partition()));
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps);
            while (true) {
                boolean done = true;
                for (TopicPartition tp : tps) if (c.position(tp) < end.get(tp)) { done = false; break; }
                if (done) break;
                ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(500));
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    records++;
                    if (r.value() == null) continue; // none in the bench
                    Checkpoint cp = Checkpoint.deserializeRecord(r);
                    latest.computeIfAbsent(cp.consumerGroupId(), k -> new HashMap<>())
                          .put(cp.topicPartition(), cp.downstreamOffset());
                }
            }
            readMs = (System.nanoTime() - t0) / 1e6;
        } finally {
            long t1 = System.nanoTime();
            c.close();
            closeMs = (System.nanoTime() - t1) / 1e6;
        }
        long keys = 0, checksum = 0;
        for (Map<TopicPartition, Long> m : latest.values())
            for (long o : m.values()) { keys++; checksum += o; }
        emit("{\"event\":\"consumer\",\"ms\":" + (readMs + closeMs) + ",\"cpu_ms\":" + (cpuMs() - c0) + ",\"read_ms\":" + readMs + ",\"close_ms\":" + closeMs
             + ",\"records\":" + records + ",\"groups\":" + latest.size() + ",\"keys\":" + keys + ",\"checksum\":" + checksum + "}");
        for (String g : sample) {
            StringBuilder sb = new StringBuilder("[");
            for (Map.Entry<TopicPartition, Long> e : latest.getOrDefault(g, Map.of()).entrySet()) {
                if (sb.length() > 1) sb.append(',');
                sb.append('[').append(q(e.getKey().topic())).append(',').append(e.getKey().partition()).append(',')
                  .append(e.getValue()).append(']');
            }
            emit("{\"event\":\"group\",\"group\":" + q(g) + ",\"offsets\":" + sb.append(']') + "}");
        }
    }

    static String offsets(Map<TopicPartition, OffsetAndMetadata> m) {
        StringBuilder sb = new StringBuilder("[");
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : m.entrySet()) {
            if (sb.length() > 1) sb.append(',');
            sb.append('[').append(q(e.getKey().topic())).append(',').append(e.getKey().partition()).append(',')
              .append(e.getValue().offset()).append(']');
        }
        return sb.append(']').toString();
    }

    static String q(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (char ch : s.toCharArray()) {
            if (ch == '"' || ch == '\\') sb.append('\\').append(ch);
            else if (ch < 0x20) sb.append(String.format("\\u%04x", (int) ch));
            else sb.append(ch);
        }
        return sb.append('"').toString();
    }

    static void emit(String json) {
        System.out.println("TRANSLATE_BENCH " + json);
        System.out.flush();
    }
}
