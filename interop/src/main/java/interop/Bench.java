package interop;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.net.Socket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReference;

import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * The Redisson side of the benchmarks (issue #6; orchestrated by benches/compare.rs through
 * scripts/bench.sh). One scenario per JVM; the JVM is warmed up before measuring; every result is
 * one JSON line on stdout (everything else goes to stderr).
 *
 * <pre>
 * java -cp agent-&lt;v&gt;.jar interop.Bench &lt;redis-url&gt; p1 &lt;iters&gt; &lt;warmupMs&gt; &lt;reps&gt;
 * java -cp agent-&lt;v&gt;.jar interop.Bench &lt;redis-url&gt; p2 &lt;owners&gt; &lt;ms&gt; &lt;warmupMs&gt; &lt;reps&gt;
 * java -cp agent-&lt;v&gt;.jar interop.Bench &lt;redis-url&gt; p2async &lt;owners&gt; &lt;ms&gt; &lt;warmupMs&gt; &lt;reps&gt;
 * java -cp agent-&lt;v&gt;.jar interop.Bench &lt;redis-url&gt; p3 &lt;n,n,..&gt; &lt;handoffs&gt; &lt;warmupAcq&gt; &lt;holdMs&gt; &lt;reps&gt; &lt;jvmWarmupHandoffs&gt; &lt;countHandoffs&gt;
 * java -cp agent-&lt;v&gt;.jar interop.Bench &lt;redis-url&gt; p4 &lt;locks&gt; &lt;watchdogMs&gt;   (then stdin: start, stop, quit)
 * java -cp agent-&lt;v&gt;.jar interop.Bench &lt;redis-url&gt; serve &lt;warmupMs&gt; &lt;owners&gt;
 *      (warms up every P1/P2 path for warmupMs (the JIT needs seconds), prints {"phase":"ready"}, then runs
 *      one repetition per stdin line and prints {"phase":"done"} after it:
 *      "p1 &lt;iters&gt; &lt;warmupMs&gt;", "p2 &lt;ms&gt; &lt;warmupMs&gt;", "p2async &lt;ms&gt; &lt;warmupMs&gt;"; "quit" ends it.
 *      The orchestrator alternates these repetitions with the Rust ones, so slow drifts of a shared
 *      machine hit every implementation alike.)
 * </pre>
 *
 * P1: one thread, lock()+unlock() on one key: p50/p99 per pair. P2: owners threads, each on its
 * own key, lock()+unlock() for ms: pairs/s; p2async: the same with lockAsync(id)/unlockAsync(id) chains
 * (owners = ids, not threads). P3: n waiters + 1 holder threads on one key; each
 * holds holdMs, unlocks, and contends again only once another thread has taken over, so every
 * unlock is a hand-off; latency = unlock() returned → next lock() returned; Redis commands per
 * acquisition from INFO commandstats; after the timed reps, one counting run per n with MONITOR counts
 * the commands the client sends (commands run by scripts left out). P4: hold locks watchdog-renewed; reports memory, then
 * process CPU and socket writes between "start" and "stop".
 *
 * <p>A redis-url of the form {@code cluster:URL,URL,...} (every master of a cluster) runs Redisson in
 * cluster mode with its defaults; server counters for P3 are then read at the first URL, which the
 * orchestrator makes the master of P3's key, and FLUSHALL goes to every URL. A redis-url of the
 * form {@code sentinel:MASTER_NAME@URL,URL,...} (the sentinels) runs Redisson in sentinel mode with
 * its defaults; counters and FLUSHALL then go to the master the sentinels name.
 */
public final class Bench {
    private static PrintStream out;

    public static void main(String[] args) throws Exception {
        out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, "UTF-8");
        System.setOut(new PrintStream(new FileOutputStream(FileDescriptor.err), true, "UTF-8"));
        if (args.length < 2) {
            System.err.println("usage: interop.Bench <redis-url> p1|p2|p3|p4 <params...>");
            System.exit(2);
        }
        String url = args[0];
        String[] p = Arrays.copyOfRange(args, 2, args.length);
        int code = 0;
        try {
            switch (args[1]) {
                case "p1":
                    p1(connect(url, 30000), Integer.parseInt(p[0]), Long.parseLong(p[1]), Integer.parseInt(p[2]));
                    break;
                case "p2":
                    p2(connect(url, 30000), Integer.parseInt(p[0]), Long.parseLong(p[1]), Long.parseLong(p[2]),
                            Integer.parseInt(p[3]));
                    break;
                case "p2async":
                    p2async(connect(url, 30000), Integer.parseInt(p[0]), Long.parseLong(p[1]), Long.parseLong(p[2]),
                            Integer.parseInt(p[3]));
                    break;
                case "p3":
                    p3(connect(url, 30000), url, p[0], Integer.parseInt(p[1]), Integer.parseInt(p[2]),
                            Long.parseLong(p[3]), Integer.parseInt(p[4]), Integer.parseInt(p[5]), Integer.parseInt(p[6]));
                    break;
                case "serve":
                    serve(url, Long.parseLong(p[0]), Integer.parseInt(p[1]));
                    break;
                case "kinds":
                    kinds(connect(url, 30000), url, p[0].split(","), Integer.parseInt(p[1]), Integer.parseInt(p[2]),
                            Integer.parseInt(p[3]), Integer.parseInt(p[4]), Integer.parseInt(p[5]),
                            Long.parseLong(p[6]), Integer.parseInt(p[7]), Long.parseLong(p[8]));
                    break;
                case "p4":
                    p4(url, Integer.parseInt(p[0]), Long.parseLong(p[1]));
                    break;
                default:
                    System.err.println("unknown scenario " + args[1]);
                    code = 2;
            }
        } catch (Throwable t) {
            t.printStackTrace();
            code = 1;
        }
        out.flush();
        // Netty's threads would keep the JVM alive, and a graceful client shutdown is not measured.
        Runtime.getRuntime().halt(code);
    }

    private static RedissonClient connect(String url, long watchdogMs) {
        Config config = new Config();
        config.setLockWatchdogTimeout(watchdogMs);
        if (url.startsWith(CLUSTER)) {
            config.useClusterServers().addNodeAddress(nodes(url));
        } else if (url.startsWith(SENTINEL)) {
            String[] nameAndUrls = url.substring(SENTINEL.length()).split("@", 2);
            config.useSentinelServers().setMasterName(nameAndUrls[0]).addSentinelAddress(nameAndUrls[1].split(","));
        } else {
            config.useSingleServer().setAddress(url);
        }
        return Redisson.create(config);
    }

    private static final String CLUSTER = "cluster:";
    private static final String SENTINEL = "sentinel:";

    /** The server URLs of a redis-url: one, a cluster's masters, or the master the sentinels name. */
    private static String[] nodes(String url) {
        if (url.startsWith(CLUSTER)) {
            return url.substring(CLUSTER.length()).split(",");
        }
        if (url.startsWith(SENTINEL)) {
            return new String[] {sentinelMaster(url)};
        }
        return new String[] {url};
    }

    private static String sentinelMaster;

    /** The master's URL, asked of the first sentinel once (the bench fails nothing over). */
    private static synchronized String sentinelMaster(String url) {
        if (sentinelMaster == null) {
            String[] nameAndUrls = url.substring(SENTINEL.length()).split("@", 2);
            try (Resp sentinel = new Resp(nameAndUrls[1].split(",")[0])) {
                List<?> addr = (List<?>) sentinel.call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", nameAndUrls[0]);
                sentinelMaster = "redis://" + addr.get(0) + ":" + addr.get(1);
            } catch (IOException e) {
                throw new IllegalStateException("no master from the sentinels", e);
            }
        }
        return sentinelMaster;
    }

    /** Where P3's counters are read: the server, or the master of P3's key (listed first). */
    private static String statsUrl(String url) {
        return nodes(url)[0];
    }

    private static String version() {
        try (InputStream is = Bench.class.getResourceAsStream("/agent.properties")) {
            java.util.Properties p = new java.util.Properties();
            p.load(is);
            return p.getProperty("redisson.version", "?");
        } catch (Exception e) {
            return "?";
        }
    }

    // ------------------------------------------------------------------------------------------

    /** P1 and P2 (threads and async) repetitions on request, in one JVM and one client, warmed up once. */
    private static void serve(String url, long warmupMs, int owners) throws Exception {
        RedissonClient client = connect(url, 30000);
        long t = System.nanoTime();
        p2async(client, owners, 0, warmupMs * 2 / 5, 0);
        p2(client, owners, 0, warmupMs * 2 / 5, 0);
        p1(client, 0, warmupMs / 5, 0);
        flushall(url);
        System.err.printf("interop.Bench: JVM warm-up took %d ms%n", (System.nanoTime() - t) / 1_000_000L);
        emit("{\"phase\":\"ready\"}");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] c = line.trim().split("\\s+");
            switch (c[0]) {
                case "p1":
                    p1(client, Integer.parseInt(c[1]), Long.parseLong(c[2]), 1);
                    break;
                case "p2":
                    p2(client, owners, Long.parseLong(c[1]), Long.parseLong(c[2]), 1);
                    break;
                case "p2async":
                    p2async(client, owners, Long.parseLong(c[1]), Long.parseLong(c[2]), 1);
                    break;
                default:
                    return;
            }
            emit("{\"phase\":\"done\"}");
        }
    }

    /** What P1 and P3 take and give back: a lock, or one permit of a semaphore. */
    interface Locker {
        void lock() throws Exception;

        void unlock() throws Exception;
    }

    /**
     * The lock of one kind (the Rust bench's names): lock, fenced, read, write, fair, spin; or
     * one permit of a semaphore (semaphore: RSemaphore, permit: RPermitExpirableSemaphore
     * without a lease), given 1 permit if it has none yet.
     */
    static Locker lockOf(RedissonClient client, String kind, String name) {
        switch (kind) {
            case "semaphore": {
                org.redisson.api.RSemaphore sem = client.getSemaphore(name);
                sem.trySetPermits(1);
                return new Locker() {
                    public void lock() throws Exception {
                        sem.acquire();
                    }

                    public void unlock() {
                        sem.release();
                    }
                };
            }
            case "permit": {
                org.redisson.api.RPermitExpirableSemaphore sem = client.getPermitExpirableSemaphore(name);
                sem.trySetPermits(1);
                return new Locker() {
                    private String id;

                    public void lock() throws Exception {
                        id = sem.acquire();
                    }

                    public void unlock() {
                        sem.release(id);
                    }
                };
            }
            default:
                RLock lock = rlockOf(client, kind, name);
                return new Locker() {
                    public void lock() {
                        lock.lock();
                    }

                    public void unlock() {
                        lock.unlock();
                    }
                };
        }
    }

    static RLock rlockOf(RedissonClient client, String kind, String name) {
        switch (kind) {
            case "lock":
                return client.getLock(name);
            case "fenced":
                return client.getFencedLock(name);
            case "read":
                return client.getReadWriteLock(name).readLock();
            case "write":
                return client.getReadWriteLock(name).writeLock();
            case "fair":
                return client.getFairLock(name);
            case "spin":
                return client.getSpinLock(name);
            default:
                throw new IllegalArgumentException("no such kind: " + kind);
        }
    }

    /**
     * P1 and P3 of each kind: after a JIT warm-up of every kind's P1 and P3 (about warmupMs in
     * all), reps P1 repetitions of iters pairs (a repetition of every kind in turn) and p3Reps P3
     * repetitions of n waiters and handoffs hand-offs (none for read: readers share). Emits p1k
     * and p3k lines with the kind.
     */
    private static void kinds(RedissonClient client, String url, String[] kinds, int iters, int reps, int n,
            int handoffs, int warmup, long holdMs, int p3Reps, long warmupMs) throws Exception {
        long perKind = Math.max(1, warmupMs / kinds.length / 2);
        for (String kind : kinds) {
            p1(client, 0, perKind, 0, kind);
            if (!kind.equals("read")) {
                p3Run(client, url, n, warmup, (int) Math.max(20, perKind / 5), holdMs, null, kind);
            }
            flushall(url);
        }
        // P1 a repetition at a time over every kind, each repetition starting one kind further
        // on and every other one in reverse (as the crate's side runs them): no kind always
        // follows the same one.
        for (int r = 0; r < reps; r++) {
            for (int i = 0; i < kinds.length; i++) {
                int step = r % 2 == 1 ? kinds.length - 1 - i : i;
                p1(client, iters, 0, 1, kinds[(r + step) % kinds.length]);
                flushall(url);
            }
        }
        for (String kind : kinds) {
            if (kind.equals("read")) {
                continue;
            }
            for (int r = 0; r < p3Reps; r++) {
                double[] res = p3Run(client, url, n, warmup, handoffs, holdMs, null, kind);
                emit("{\"scenario\":\"p3k\",\"kind\":\"%s\",\"version\":\"%s\",\"n\":%d,\"rep\":%d,"
                        + "\"p50_us\":%.3f,\"p99_us\":%.3f}", kind, version(), n, r, res[0], res[1]);
                flushall(url);
            }
        }
    }

    private static void p1(RedissonClient client, int iters, long warmupMs, int reps) throws Exception {
        p1(client, iters, warmupMs, reps, "lock");
    }

    /** P1 on a lock of `kind`; emits p1 lines for RLock, p1k lines (with the kind) for others. */
    private static void p1(RedissonClient client, int iters, long warmupMs, int reps, String kind)
            throws Exception {
        Locker lock = lockOf(client, kind, "bench:p1");
        long warmEnd = System.nanoTime() + warmupMs * 1_000_000L;
        while (System.nanoTime() < warmEnd) {
            lock.lock();
            lock.unlock();
        }
        for (int r = 0; r < reps; r++) {
            long[] lat = new long[iters];
            long cpu0 = cpuNanos();
            for (int i = 0; i < iters; i++) {
                long t = System.nanoTime();
                lock.lock();
                lock.unlock();
                lat[i] = System.nanoTime() - t;
            }
            double cpuUs = (cpuNanos() - cpu0) / 1e3 / iters;
            Arrays.sort(lat);
            if (kind.equals("lock")) {
                emit("{\"scenario\":\"p1\",\"version\":\"%s\",\"rep\":%d,\"p50_us\":%.3f,\"p99_us\":%.3f,\"cpu_us\":%.3f}",
                        version(), r, pct(lat, 50) / 1e3, pct(lat, 99) / 1e3, cpuUs);
            } else {
                emit("{\"scenario\":\"p1k\",\"kind\":\"%s\",\"version\":\"%s\",\"rep\":%d,\"p50_us\":%.3f,"
                        + "\"p99_us\":%.3f}", kind, version(), r, pct(lat, 50) / 1e3, pct(lat, 99) / 1e3);
            }
        }
    }

    // ------------------------------------------------------------------------------------------

    private static void p2(RedissonClient client, int owners, long ms, long warmupMs, int reps) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(owners);
        for (int r = -1; r < reps; r++) {
            long length = r < 0 ? warmupMs : ms;
            long cpu0 = cpuNanos();
            long start = System.nanoTime();
            long deadline = start + length * 1_000_000L;
            List<Future<Long>> tasks = new ArrayList<>();
            for (int i = 0; i < owners; i++) {
                RLock lock = client.getLock("bench:p2:" + i);
                Callable<Long> task = () -> {
                    long pairs = 0;
                    while (System.nanoTime() < deadline) {
                        lock.lock();
                        lock.unlock();
                        pairs++;
                    }
                    return pairs;
                };
                tasks.add(pool.submit(task));
            }
            long pairs = 0;
            for (Future<Long> f : tasks) {
                pairs += f.get();
            }
            double secs = (System.nanoTime() - start) / 1e9;
            double cpuUs = (cpuNanos() - cpu0) / 1e3 / Math.max(1, pairs);
            if (r >= 0) {
                emit("{\"scenario\":\"p2\",\"version\":\"%s\",\"rep\":%d,\"ops_per_s\":%.1f,\"cpu_us\":%.3f}",
                        version(), r, pairs / secs, cpuUs);
            }
        }
        pool.shutdownNow();
    }

    private static void p2async(RedissonClient client, int owners, long ms, long warmupMs, int reps)
            throws Exception {
        for (int r = -1; r < reps; r++) {
            long length = r < 0 ? warmupMs : ms;
            long cpu0 = cpuNanos();
            long start = System.nanoTime();
            long deadline = start + length * 1_000_000L;
            java.util.concurrent.atomic.AtomicLong pairs = new java.util.concurrent.atomic.AtomicLong();
            java.util.concurrent.CountDownLatch done = new java.util.concurrent.CountDownLatch(owners);
            AtomicReference<Throwable> failed = new AtomicReference<>();
            for (int i = 0; i < owners; i++) {
                chain(client.getLock("bench:p2:" + i), 1_000_000L + i, deadline, pairs, done, failed);
            }
            done.await();
            if (failed.get() != null) {
                throw new RuntimeException(failed.get());
            }
            double secs = (System.nanoTime() - start) / 1e9;
            double cpuUs = (cpuNanos() - cpu0) / 1e3 / Math.max(1, pairs.get());
            if (r >= 0) {
                emit("{\"scenario\":\"p2async\",\"version\":\"%s\",\"rep\":%d,\"ops_per_s\":%.1f,\"cpu_us\":%.3f}",
                        version(), r, pairs.get() / secs, cpuUs);
            }
        }
    }

    /** lockAsync(owner) then unlockAsync(owner), again and again until the deadline. */
    private static void chain(RLock lock, long owner, long deadline, java.util.concurrent.atomic.AtomicLong pairs,
            java.util.concurrent.CountDownLatch done, AtomicReference<Throwable> failed) {
        if (System.nanoTime() >= deadline || failed.get() != null) {
            done.countDown();
            return;
        }
        lock.lockAsync(owner).thenCompose(v -> lock.unlockAsync(owner)).whenComplete((v, e) -> {
            if (e != null) {
                failed.compareAndSet(null, e);
                done.countDown();
                return;
            }
            pairs.incrementAndGet();
            chain(lock, owner, deadline, pairs, done, failed);
        });
    }

    // ------------------------------------------------------------------------------------------

    /** Acquisition k's time, and when its holder's unlock() returned. */
    private static final class Handoffs {
        final AtomicLongArray acquired;
        final AtomicLongArray released;
        final AtomicInteger count = new AtomicInteger();
        final Object moved = new Object();

        Handoffs(int slots) {
            acquired = new AtomicLongArray(slots);
            released = new AtomicLongArray(slots);
        }

        int acquired() {
            long t = System.nanoTime();
            int k = count.getAndIncrement();
            acquired.set(k, t);
            synchronized (moved) {
                moved.notifyAll();
            }
            return k;
        }

        void released(int k) {
            released.set(k, System.nanoTime());
        }

        void takenOver(int k) throws InterruptedException {
            synchronized (moved) {
                while (count.get() <= k + 1) {
                    moved.wait();
                }
            }
        }

        long[] latencies(int from) {
            int n = count.get();
            long[] lat = new long[Math.max(0, n - 1 - from)];
            for (int k = from; k < n - 1; k++) {
                lat[k - from] = Math.max(0, acquired.get(k + 1) - released.get(k));
            }
            return lat;
        }
    }

    private static void p3(RedissonClient client, String url, String ns, int handoffs, int warmup, long holdMs,
            int reps, int jvmWarmup, int countHandoffs) throws Exception {
        if (jvmWarmup > 0) {
            p3Run(client, url, 8, warmup, jvmWarmup, holdMs, null); // JVM warm-up, not reported
        }
        for (String s : ns.split(",")) {
            int n = Integer.parseInt(s.trim());
            for (int r = 0; r < reps; r++) {
                double[] res = p3Run(client, url, n, warmup, handoffs, holdMs, null);
                emit("{\"scenario\":\"p3\",\"version\":\"%s\",\"n\":%d,\"rep\":%d,\"p50_us\":%.3f,\"p99_us\":%.3f,"
                        + "\"calls_per_acq\":%.3f,\"scripts_per_acq\":%.3f}",
                        version(), n, r, res[0], res[1], res[2], res[3]);
                flushall(url);
            }
            Map<String, Double> client_ = new java.util.TreeMap<>();
            p3Run(client, url, n, warmup, countHandoffs, holdMs, client_);
            StringBuilder sb = new StringBuilder();
            for (Map.Entry<String, Double> e : client_.entrySet()) {
                sb.append(sb.length() == 0 ? "" : ",").append(String.format(Locale.ROOT, "\"%s\":%.4f", e.getKey(), e.getValue()));
            }
            emit("{\"scenario\":\"p3\",\"version\":\"%s\",\"n\":%d,\"count\":true,\"client\":{%s}}", version(), n,
                    sb.toString());
            flushall(url);
        }
    }

    private static void flushall(String url) throws IOException {
        for (String node : nodes(url)) {
            try (Resp redis = new Resp(node)) {
                redis.call("FLUSHALL");
            }
        }
    }

    static final String MARK_START = "bench-mark-start";
    static final String MARK_END = "bench-mark-end";

    /** Counts, by name, the commands clients send between the ECHO markers (MONITOR, no Lua, no INFO). */
    private static final class Monitor {
        final Resp conn;
        final Map<String, Long> counts = new HashMap<>();
        final Thread thread;

        Monitor(String url) throws IOException {
            conn = new Resp(url);
            Object ok = conn.call("MONITOR");
            if (!"OK".equals(ok)) {
                throw new IOException("MONITOR refused: " + ok);
            }
            thread = new Thread(() -> {
                boolean counting = false;
                try {
                    while (true) {
                        String l = conn.line();
                        if (l.contains(MARK_START)) {
                            counting = true;
                            continue;
                        }
                        if (l.contains(MARK_END)) {
                            return;
                        }
                        if (!counting || l.contains("[0 lua]")) {
                            continue;
                        }
                        int at = l.indexOf("] \"");
                        if (at < 0) {
                            continue;
                        }
                        String rest = l.substring(at + 3);
                        String name = rest.substring(0, Math.max(0, rest.indexOf('"'))).toLowerCase(Locale.ROOT);
                        if (!name.equals("info")) {
                            counts.merge(name, 1L, Long::sum);
                        }
                    }
                } catch (IOException e) {
                    // closed
                }
            }, "monitor");
            thread.start();
        }

        Map<String, Long> finish() throws Exception {
            thread.join(10_000);
            conn.close();
            return counts;
        }
    }

    /** One P3 run; with clientCounts, MONITOR fills it with client commands per acquisition by name. */
    private static double[] p3Run(RedissonClient client, String url, int n, int warmup, int handoffs, long holdMs,
            Map<String, Double> clientCounts) throws Exception {
        return p3Run(client, url, n, warmup, handoffs, holdMs, clientCounts, "lock");
    }

    /** One P3 run on a lock of `kind` (see lockOf). */
    private static double[] p3Run(RedissonClient client, String url, int n, int warmup, int handoffs, long holdMs,
            Map<String, Double> clientCounts, String kind) throws Exception {
        Monitor monitor = clientCounts == null ? null : new Monitor(statsUrl(url));
        String key = "bench:p3";
        int total = warmup + handoffs;
        Handoffs track = new Handoffs(total + n + 4);
        AtomicReference<Map<String, Long>> before = new AtomicReference<>();
        AtomicReference<Throwable> failed = new AtomicReference<>();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i <= n; i++) {
            Thread th = new Thread(() -> {
                Locker lock = lockOf(client, kind, key);
                try (Resp stats = new Resp(statsUrl(url))) {
                    while (true) {
                        lock.lock();
                        int k = track.acquired();
                        if (k == warmup) {
                            before.set(stats.commandstats());
                            if (monitor != null) {
                                stats.call("ECHO", MARK_START);
                            }
                        }
                        if (k >= total) {
                            lock.unlock();
                            track.released(k);
                            return;
                        }
                        Thread.sleep(holdMs);
                        lock.unlock();
                        track.released(k);
                        track.takenOver(k);
                    }
                } catch (Throwable t) {
                    failed.compareAndSet(null, t);
                }
            }, "p3-" + i);
            th.start();
            threads.add(th);
        }
        for (Thread th : threads) {
            th.join();
        }
        if (failed.get() != null) {
            throw new RuntimeException(failed.get());
        }
        Thread.sleep(20);
        Map<String, Long> after;
        try (Resp redis = new Resp(statsUrl(url))) {
            after = redis.commandstats();
            if (monitor != null) {
                redis.call("ECHO", MARK_END);
            }
        }
        Map<String, Long> b = before.get();
        double acquisitions = track.count.get() - warmup;
        if (monitor != null) {
            for (Map.Entry<String, Long> e : monitor.finish().entrySet()) {
                clientCounts.put(e.getKey(), e.getValue() / acquisitions);
            }
        }
        long cmds = 0;
        for (Map.Entry<String, Long> e : after.entrySet()) {
            if (!e.getKey().startsWith("info")) {
                cmds += e.getValue() - b.getOrDefault(e.getKey(), 0L);
            }
        }
        long scripts = scripts(after) - scripts(b);
        long[] lat = track.latencies(warmup);
        Arrays.sort(lat);
        return new double[] {pct(lat, 50) / 1e3, pct(lat, 99) / 1e3, cmds / acquisitions, scripts / acquisitions};
    }

    private static long scripts(Map<String, Long> stats) {
        return stats.getOrDefault("evalsha", 0L) + stats.getOrDefault("eval", 0L);
    }

    // ------------------------------------------------------------------------------------------

    private static void p4(String url, int count, long watchdogMs) throws Exception {
        RedissonClient client = connect(url, watchdogMs);
        // Warm the code paths (and the JIT) on other keys, then take the baseline.
        acquireAll(client, "bench:warm:", 2000);
        for (int i = 0; i < 2000; i++) {
            client.getLock("bench:warm:" + i).forceUnlock();
        }
        long heap0 = liveHeap();
        long rss0 = rss();
        long t = System.nanoTime();
        int errors = acquireAll(client, "bench:p4:", count);
        double acquireMs = (System.nanoTime() - t) / 1e6;
        if (errors > 0) {
            System.err.println("p4: " + errors + " lock errors");
        }
        long rss1 = rss();
        long heap1 = liveHeap();
        emit("{\"phase\":\"held\",\"version\":\"%s\",\"acquire_ms\":%.1f,\"errors\":%d,\"bytes_per_lock\":%.1f,"
                + "\"heap_bytes_per_lock\":%.1f}",
                version(), acquireMs, errors, (rss1 - rss0) / (double) count, (heap1 - heap0) / (double) count);
        com.sun.management.OperatingSystemMXBean os =
                (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        long cpu0 = os.getProcessCpuTime();
        long writes0 = writeSyscalls();
        long t0 = System.nanoTime();
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.equals("start")) {
                cpu0 = os.getProcessCpuTime();
                writes0 = writeSyscalls();
                t0 = System.nanoTime();
                emit("{\"phase\":\"started\"}");
            } else if (line.equals("stop")) {
                long cpu = os.getProcessCpuTime() - cpu0;
                emit("{\"phase\":\"stopped\",\"cpu_ms\":%.3f,\"write_syscalls\":%d,\"wall_ms\":%.1f,"
                        + "\"rss_bytes\":%d}", cpu / 1e6, writeSyscalls() - writes0,
                        (System.nanoTime() - t0) / 1e6, rss());
            } else {
                break;
            }
        }
    }

    /** lockAsync() on prefix+0..count-1 with at most 256 in flight; returns the number of failures. */
    private static int acquireAll(RedissonClient client, String prefix, int count) throws InterruptedException {
        Semaphore inFlight = new Semaphore(256);
        AtomicInteger errors = new AtomicInteger();
        for (int i = 0; i < count; i++) {
            inFlight.acquire();
            client.getLock(prefix + i).lockAsync().whenComplete((v, e) -> {
                if (e != null) {
                    errors.incrementAndGet();
                }
                inFlight.release();
            });
        }
        inFlight.acquire(256);
        inFlight.release(256);
        return errors.get();
    }

    private static long liveHeap() throws InterruptedException {
        for (int i = 0; i < 3; i++) {
            System.gc();
            Thread.sleep(50);
        }
        return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
    }

    private static long rss() {
        try {
            for (String l : Files.readAllLines(Paths.get("/proc/self/status"))) {
                if (l.startsWith("VmRSS:")) {
                    return Long.parseLong(l.substring(6).replace("kB", "").trim()) * 1024;
                }
            }
        } catch (IOException ignored) {
            // not Linux: no RSS
        }
        return 0;
    }

    // ------------------------------------------------------------------------------------------

    /** CPU time of the whole JVM (every thread: application, Netty, JIT, GC). */
    /** Write-like system calls of this process so far (syscw in /proc/self/io): every socket write. */
    private static long writeSyscalls() {
        try {
            for (String l : java.nio.file.Files.readAllLines(java.nio.file.Paths.get("/proc/self/io"))) {
                if (l.startsWith("syscw:")) {
                    return Long.parseLong(l.substring(6).trim());
                }
            }
        } catch (IOException e) {
            // not Linux: no figure
        }
        return 0;
    }

    private static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime();
    }

    private static double pct(long[] sorted, double p) {
        if (sorted.length == 0) {
            return Double.NaN;
        }
        int rank = (int) Math.ceil(p / 100.0 * sorted.length);
        return sorted[Math.min(Math.max(rank, 1), sorted.length) - 1];
    }

    private static void emit(String format, Object... args) {
        synchronized (out) {
            out.println(String.format(Locale.ROOT, format, args));
            out.flush();
        }
    }

    /** A bare RESP2 connection for server counters (version independent, not Redisson's). */
    private static final class Resp implements AutoCloseable {
        private final Socket socket;
        private final InputStream in;
        private final OutputStream os;

        Resp(String url) throws IOException {
            URI uri = URI.create(url);
            socket = new Socket(uri.getHost(), uri.getPort() < 0 ? 6379 : uri.getPort());
            socket.setTcpNoDelay(true);
            in = new java.io.BufferedInputStream(socket.getInputStream());
            os = socket.getOutputStream();
        }

        Object call(String... parts) throws IOException {
            StringBuilder sb = new StringBuilder();
            sb.append('*').append(parts.length).append("\r\n");
            for (String s : parts) {
                byte[] b = s.getBytes(StandardCharsets.UTF_8);
                sb.append('$').append(b.length).append("\r\n").append(s).append("\r\n");
            }
            os.write(sb.toString().getBytes(StandardCharsets.UTF_8));
            os.flush();
            return read();
        }

        Map<String, Long> commandstats() throws IOException {
            String info = (String) call("INFO", "commandstats");
            Map<String, Long> stats = new HashMap<>();
            for (String l : info.split("\r?\n")) {
                if (!l.startsWith("cmdstat_")) {
                    continue;
                }
                int colon = l.indexOf(':');
                String name = l.substring(8, colon);
                String rest = l.substring(colon + 1);
                if (rest.startsWith("calls=")) {
                    int comma = rest.indexOf(',');
                    stats.put(name, Long.parseLong(rest.substring(6, comma < 0 ? rest.length() : comma)));
                }
            }
            return stats;
        }

        String line() throws IOException {
            StringBuilder sb = new StringBuilder();
            int c;
            while ((c = in.read()) != '\r') {
                if (c < 0) {
                    throw new IOException("connection closed");
                }
                sb.append((char) c);
            }
            in.read(); // '\n'
            return sb.toString();
        }

        private Object read() throws IOException {
            String l = line();
            switch (l.charAt(0)) {
                case '+':
                    return l.substring(1);
                case '-':
                    throw new IOException(l.substring(1));
                case ':':
                    return Long.parseLong(l.substring(1));
                case '*': {
                    int len = Integer.parseInt(l.substring(1));
                    if (len < 0) {
                        return null;
                    }
                    List<Object> items = new ArrayList<>(len);
                    for (int i = 0; i < len; i++) {
                        items.add(read());
                    }
                    return items;
                }
                case '$': {
                    int len = Integer.parseInt(l.substring(1));
                    if (len < 0) {
                        return null;
                    }
                    byte[] b = in.readNBytes(len + 2);
                    return new String(b, 0, len, StandardCharsets.UTF_8);
                }
                default:
                    throw new IOException("unexpected reply " + l);
            }
        }

        @Override
        public void close() throws IOException {
            socket.close();
        }
    }
}
