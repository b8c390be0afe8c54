package interop;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintStream;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import org.redisson.Redisson;
import org.redisson.RedissonRedLock;
import org.redisson.api.RFencedLock;
import org.redisson.api.RReadWriteLock;
import org.redisson.api.RCountDownLatch;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RSemaphore;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * One JVM = one RedissonClient, driven by JSON lines on stdin; every command gets exactly one JSON
 * line on stdout with the same "id". Each logical "thread" of a command is one real Java thread
 * (a single-thread executor created on first use), so Redisson's thread-id ownership is real.
 *
 * Usage: java -jar agent.jar redis://127.0.0.1:PORT [lockWatchdogTimeoutMs]
 *        java -jar agent.jar cluster:redis://HOST:PORT,redis://HOST:PORT... [lockWatchdogTimeoutMs]
 *        java -jar agent.jar sentinel:MASTER_NAME@redis://HOST:PORT,redis://HOST:PORT... [lockWatchdogTimeoutMs]
 * (cluster and sentinel modes: Redisson's defaults, replica acknowledgement included, with the
 * topology scanned every second)
 */
public final class Agent {
    private static final Object OUT_LOCK = new Object();
    private static Writer out;
    private static RedissonClient client;
    /** Clients of further, independent servers (RedLock), by URL. */
    private static final Map<String, RedissonClient> OTHERS = new ConcurrentHashMap<>();
    private static long watchdog;
    private static final Map<String, ExecutorService> THREADS = new ConcurrentHashMap<>();

    public static void main(String[] args) throws Exception {
        // Only our JSON lines may reach the real stdout: anything else printing to System.out goes
        // to stderr.
        out = new OutputStreamWriter(new FileOutputStream(FileDescriptor.out), StandardCharsets.UTF_8);
        System.setOut(new PrintStream(new FileOutputStream(FileDescriptor.err), true, "UTF-8"));

        if (args.length < 1) {
            System.err.println("usage: agent redis://host:port [lockWatchdogTimeoutMs]");
            System.exit(2);
        }
        String url = args[0];
        long watchdogMs = args.length > 1 ? Long.parseLong(args[1]) : 30000L;
        watchdog = watchdogMs;

        Config config = new Config();
        config.setLockWatchdogTimeout(watchdogMs);
        config.setThreads(4);
        config.setNettyThreads(4);
        if (url.startsWith("cluster:")) {
            config.useClusterServers()
                    .addNodeAddress(url.substring("cluster:".length()).split(","))
                    .setScanInterval(1000)
                    .setMasterConnectionMinimumIdleSize(1)
                    .setMasterConnectionPoolSize(8)
                    .setSlaveConnectionMinimumIdleSize(1)
                    .setSlaveConnectionPoolSize(8)
                    .setSubscriptionConnectionMinimumIdleSize(1)
                    .setSubscriptionConnectionPoolSize(4);
        } else if (url.startsWith("sentinel:")) {
            String[] nameAndUrls = url.substring("sentinel:".length()).split("@", 2);
            config.useSentinelServers()
                    .setMasterName(nameAndUrls[0])
                    .addSentinelAddress(nameAndUrls[1].split(","))
                    .setScanInterval(1000)
                    .setMasterConnectionMinimumIdleSize(1)
                    .setMasterConnectionPoolSize(8)
                    .setSlaveConnectionMinimumIdleSize(1)
                    .setSlaveConnectionPoolSize(8)
                    .setSubscriptionConnectionMinimumIdleSize(1)
                    .setSubscriptionConnectionPoolSize(4);
        } else {
            config.useSingleServer()
                    .setAddress(url)
                    .setConnectionMinimumIdleSize(1)
                    .setConnectionPoolSize(8)
                    .setSubscriptionConnectionMinimumIdleSize(1)
                    .setSubscriptionConnectionPoolSize(4);
        }
        try {
            client = Redisson.create(config);
        } catch (Throwable t) {
            // Netty's non-daemon threads would keep a failed JVM alive: exit explicitly.
            t.printStackTrace();
            System.exit(1);
        }

        Map<String, Object> ready = new LinkedHashMap<>();
        ready.put("ready", true);
        ready.put("version", redissonVersion());
        ready.put("clientId", ((Redisson) client).getServiceManager().getId());
        emit(ready);

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty()) {
                continue;
            }
            Map<String, Object> cmd;
            try {
                cmd = Json.parseObject(line);
            } catch (RuntimeException e) {
                Map<String, Object> err = new LinkedHashMap<>();
                err.put("id", null);
                err.put("ok", false);
                err.put("error", errorOf(e));
                emit(err);
                continue;
            }
            if (dispatch(cmd)) {
                break;
            }
        }
        shutdown();
    }

    /** Returns true when the agent must stop reading. */
    private static boolean dispatch(Map<String, Object> cmd) {
        Object id = cmd.get("id");
        String op = str(cmd, "op");
        if ("ping".equals(op)) {
            emit(reply(id));
            return false;
        }
        if ("shutdown".equals(op)) {
            // Let commands already queued finish (bounded: a thread blocked in lock() may never).
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            for (ExecutorService e : THREADS.values()) {
                e.shutdown();
            }
            for (ExecutorService e : THREADS.values()) {
                try {
                    e.awaitTermination(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
                } catch (InterruptedException ignored) {
                    break;
                }
            }
            emit(reply(id));
            return true;
        }
        String thread = cmd.containsKey("thread") ? str(cmd, "thread") : "main";
        ExecutorService exec = THREADS.computeIfAbsent(thread, t -> Executors.newSingleThreadExecutor(r -> {
            Thread th = new Thread(r, "agent-" + t);
            th.setDaemon(true);
            return th;
        }));
        if ("lockAsyncReport".equals(op)) {
            Map<String, Object> started = reply(id);
            started.put("started", true);
            emit(started);
            exec.execute(() -> {
                Map<String, Object> ev = new LinkedHashMap<>();
                try {
                    RLock lock = lockOf(cmd);
                    if (cmd.get("leaseMs") != null) {
                        lock.lock(num(cmd, "leaseMs"), TimeUnit.MILLISECONDS);
                    } else {
                        lock.lock();
                    }
                    long nanos = System.nanoTime();
                    long millis = System.currentTimeMillis();
                    ev.put("event", "acquired");
                    ev.put("id", id);
                    ev.put("lock", cmd.get("lock"));
                    ev.put("thread", thread);
                    ev.put("atNanos", nanos);
                    ev.put("atMillis", millis);
                } catch (Throwable t) {
                    ev.clear();
                    ev.put("event", "error");
                    ev.put("id", id);
                    ev.put("lock", cmd.get("lock"));
                    ev.put("thread", thread);
                    ev.put("error", errorOf(t));
                }
                emit(ev);
            });
            return false;
        }
        exec.execute(() -> {
            Map<String, Object> r = reply(id);
            try {
                Object result = run(op, cmd);
                if (result != NO_RESULT) {
                    r.put("result", result);
                }
            } catch (Throwable t) {
                r.put("ok", false);
                r.put("error", errorOf(t));
            }
            emit(r);
        });
        return false;
    }

    private static final Object NO_RESULT = new Object();

    /** Runs one command on the current (logical) thread. */
    private static Object run(String op, Map<String, Object> cmd) throws Exception {
        if ("threadId".equals(op)) {
            return Thread.currentThread().getId();
        }
        if (op.startsWith("fenced") || "getToken".equals(op)) {
            return runFenced(op, cmd);
        }
        if (op.startsWith("multi")) {
            return runMulti(op, cmd);
        }
        if (op.startsWith("red")) {
            return runRed(op, cmd);
        }
        if (op.startsWith("sem")) {
            return runSemaphore(op, cmd);
        }
        if (op.startsWith("perm")) {
            return runPermits(op, cmd);
        }
        if (op.startsWith("listen")) {
            return runListener(op, cmd);
        }
        if (op.startsWith("latch")) {
            return runLatch(op, cmd);
        }
        RLock lock = lockOf(cmd);
        switch (op) {
            case "lock":
                if (cmd.get("leaseMs") != null) {
                    lock.lock(num(cmd, "leaseMs"), TimeUnit.MILLISECONDS);
                } else {
                    lock.lock();
                }
                return NO_RESULT;
            case "tryLock":
                if (cmd.get("leaseMs") != null) {
                    return lock.tryLock(num(cmd, "waitMs"), num(cmd, "leaseMs"), TimeUnit.MILLISECONDS);
                }
                return lock.tryLock(num(cmd, "waitMs"), TimeUnit.MILLISECONDS);
            case "unlock":
                lock.unlock();
                return NO_RESULT;
            case "forceUnlock":
                return lock.forceUnlock();
            case "isLocked":
                return lock.isLocked();
            case "isHeldByThread":
                return lock.isHeldByCurrentThread();
            case "getHoldCount":
                return lock.getHoldCount();
            case "remainTimeToLive":
                return lock.remainTimeToLive();
            default:
                throw new IllegalArgumentException("unknown op: " + op);
        }
    }

    /** The RLock the RLock commands run on: getLock(lock), or with "half" that kind of lock:
     *  "read" or "write" (that half of getReadWriteLock(lock)), "fair" (getFairLock), "spin"
     *  (getSpinLock), "nonReentrant" and "nonReentrantFair" (4.4+ only; looked up by
     *  reflection, so the agent builds against 3.23.4 too). */
    private static RLock lockOf(Map<String, Object> cmd) throws Exception {
        String name = str(cmd, "lock");
        Object half = cmd.get("half");
        if (half == null) {
            return client.getLock(name);
        }
        switch (half.toString()) {
            case "read":
                return client.getReadWriteLock(name).readLock();
            case "write":
                return client.getReadWriteLock(name).writeLock();
            case "fair":
                return client.getFairLock(name);
            case "spin":
                return client.getSpinLock(name);
            case "nonReentrant":
                return (RLock) client.getClass().getMethod("getNonReentrantLock", String.class).invoke(client, name);
            case "nonReentrantFair":
                return (RLock) client.getClass().getMethod("getNonReentrantFairLock", String.class).invoke(client, name);
            default:
                throw new IllegalArgumentException("unknown half: " + half);
        }
    }

    /** The RFencedLock commands: tokens come back as numbers (null: not acquired, none issued). */
    private static Object runFenced(String op, Map<String, Object> cmd) throws Exception {
        RFencedLock lock = client.getFencedLock(str(cmd, "lock"));
        switch (op) {
            case "fencedLock":
                return lock.lockAndGetToken();
            case "fencedTryLock":
                if (cmd.get("leaseMs") != null) {
                    return lock.tryLockAndGetToken(num(cmd, "waitMs"), num(cmd, "leaseMs"), TimeUnit.MILLISECONDS);
                }
                return lock.tryLockAndGetToken(num(cmd, "waitMs"), TimeUnit.MILLISECONDS);
            case "fencedPlainLock":
                lock.lock();
                return NO_RESULT;
            case "fencedUnlock":
                lock.unlock();
                return NO_RESULT;
            case "getToken":
                return lock.getToken();
            default:
                throw new IllegalArgumentException("unknown op: " + op);
        }
    }

    /** RedissonMultiLock over the RLocks named in "locks", in that order. */
    @SuppressWarnings("unchecked")
    private static Object runMulti(String op, Map<String, Object> cmd) throws Exception {
        List<Object> names = (List<Object>) cmd.get("locks");
        RLock[] locks = names.stream().map(n -> client.getLock(String.valueOf(n))).toArray(RLock[]::new);
        RLock multi = client.getMultiLock(locks);
        switch (op) {
            case "multiTryLock":
                return multi.tryLock(num(cmd, "waitMs"), TimeUnit.MILLISECONDS);
            case "multiUnlock":
                multi.unlock();
                return NO_RESULT;
            default:
                throw new IllegalArgumentException("unknown op: " + op);
        }
    }

    /** The RSemaphore named "lock"; "permits" is the count each op takes, gives or sets. */
    private static Object runSemaphore(String op, Map<String, Object> cmd) throws Exception {
        RSemaphore sem = client.getSemaphore(str(cmd, "lock"));
        int permits = cmd.get("permits") == null ? 1 : (int) num(cmd, "permits");
        switch (op) {
            case "semTrySetPermits":
                return sem.trySetPermits(permits);
            case "semAddPermits":
                sem.addPermits(permits);
                return NO_RESULT;
            case "semAcquire":
                sem.acquire(permits);
                return NO_RESULT;
            case "semTryAcquire":
                return sem.tryAcquire(permits, num(cmd, "waitMs"), TimeUnit.MILLISECONDS);
            case "semRelease":
                sem.release(permits);
                return NO_RESULT;
            case "semAvailable":
                return sem.availablePermits();
            case "semDrain":
                return sem.drainPermits();
            default:
                throw new IllegalArgumentException("unknown op: " + op);
        }
    }

    /**
     * The RPermitExpirableSemaphore named "lock": "leaseMs" (absent: no lease) for acquires,
     * "permit" (its id) for the ops on one permit, "permits" for the counts; acquires answer the permit id.
     */
    private static Object runPermits(String op, Map<String, Object> cmd) throws Exception {
        RPermitExpirableSemaphore sem = client.getPermitExpirableSemaphore(str(cmd, "lock"));
        int permits = cmd.get("permits") == null ? 1 : (int) num(cmd, "permits");
        boolean leased = cmd.get("leaseMs") != null;
        switch (op) {
            case "permTrySetPermits":
                return sem.trySetPermits(permits);
            case "permSetPermits":
                sem.setPermits(permits);
                return NO_RESULT;
            case "permAddPermits":
                sem.addPermits(permits);
                return NO_RESULT;
            case "permAcquire":
                return leased ? sem.acquire(num(cmd, "leaseMs"), TimeUnit.MILLISECONDS) : sem.acquire();
            case "permTryAcquire":
                return leased
                        ? sem.tryAcquire(num(cmd, "waitMs"), num(cmd, "leaseMs"), TimeUnit.MILLISECONDS)
                        : sem.tryAcquire(num(cmd, "waitMs"), TimeUnit.MILLISECONDS);
            case "permTryRelease":
                return sem.tryRelease(str(cmd, "permit"));
            case "permRelease":
                sem.release(str(cmd, "permit"));
                return NO_RESULT;
            case "permUpdateLease":
                return sem.updateLeaseTime(str(cmd, "permit"), num(cmd, "leaseMs"), TimeUnit.MILLISECONDS);
            case "permAvailable":
                return sem.availablePermits();
            case "permAcquired":
                return sem.acquiredPermits();
            case "permPermits":
                return sem.getPermits();
            default:
                throw new IllegalArgumentException("unknown op: " + op);
        }
    }

    /** What the listeners of each lock name heard, in order ("deleted", "expired"). */
    private static final Map<String, java.util.concurrent.LinkedBlockingQueue<String>> HEARD =
            new ConcurrentHashMap<>();

    /**
     * Redisson's listeners on the RLock named "lock" (RObject.addListener with a
     * DeletedObjectListener and an ExpiredObjectListener: keyspace events, PSUBSCRIBE
     * __keyevent@*:del / :expired): "listenAdd" registers both, "listenNext" answers what they
     * heard next within "waitMs" (null if nothing).
     */
    private static Object runListener(String op, Map<String, Object> cmd) throws Exception {
        String name = str(cmd, "lock");
        java.util.concurrent.LinkedBlockingQueue<String> heard =
                HEARD.computeIfAbsent(name, n -> new java.util.concurrent.LinkedBlockingQueue<>());
        switch (op) {
            case "listenAdd": {
                org.redisson.api.RObject lock = (org.redisson.api.RObject) client.getLock(name);
                lock.addListener((org.redisson.api.DeletedObjectListener) n -> heard.add("deleted"));
                lock.addListener((org.redisson.api.ExpiredObjectListener) n -> heard.add("expired"));
                return NO_RESULT;
            }
            case "listenNext":
                return heard.poll(num(cmd, "waitMs"), TimeUnit.MILLISECONDS);
            default:
                throw new IllegalArgumentException("unknown op: " + op);
        }
    }

    /** The RCountDownLatch named "lock"; "count" is what latchTrySetCount sets. */
    private static Object runLatch(String op, Map<String, Object> cmd) throws Exception {
        RCountDownLatch latch = client.getCountDownLatch(str(cmd, "lock"));
        switch (op) {
            case "latchTrySetCount":
                return latch.trySetCount(num(cmd, "count"));
            case "latchCountDown":
                latch.countDown();
                return NO_RESULT;
            case "latchGetCount":
                return latch.getCount();
            case "latchAwait":
                if (cmd.get("waitMs") != null) {
                    return latch.await(num(cmd, "waitMs"), TimeUnit.MILLISECONDS);
                }
                latch.await();
                return true;
            case "latchDelete":
                return latch.delete();
            default:
                throw new IllegalArgumentException("unknown op: " + op);
        }
    }

    /** RedissonRedLock over the RLock "lock" of each independent server in "urls". */
    @SuppressWarnings({"unchecked", "deprecation"})
    private static Object runRed(String op, Map<String, Object> cmd) throws Exception {
        List<Object> urls = (List<Object>) cmd.get("urls");
        String name = String.valueOf(cmd.get("lock"));
        RLock[] locks = urls.stream().map(u -> other(String.valueOf(u)).getLock(name)).toArray(RLock[]::new);
        RLock red = new RedissonRedLock(locks);
        switch (op) {
            case "redTryLock":
                if (cmd.get("leaseMs") != null) {
                    return red.tryLock(num(cmd, "waitMs"), num(cmd, "leaseMs"), TimeUnit.MILLISECONDS);
                }
                return red.tryLock(num(cmd, "waitMs"), TimeUnit.MILLISECONDS);
            case "redUnlock":
                red.unlock();
                return NO_RESULT;
            default:
                throw new IllegalArgumentException("unknown op: " + op);
        }
    }

    /** A client of the single server at url, made on first use. */
    private static RedissonClient other(String url) {
        return OTHERS.computeIfAbsent(url, u -> {
            Config config = new Config();
            config.setLockWatchdogTimeout(watchdog);
            config.setThreads(2);
            config.setNettyThreads(2);
            config.useSingleServer()
                    .setAddress(u)
                    .setConnectionMinimumIdleSize(1)
                    .setConnectionPoolSize(4)
                    .setSubscriptionConnectionMinimumIdleSize(1)
                    .setSubscriptionConnectionPoolSize(2);
            return Redisson.create(config);
        });
    }

    private static Map<String, Object> reply(Object id) {
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("id", id);
        r.put("ok", true);
        return r;
    }

    private static Map<String, Object> errorOf(Throwable t) {
        while ((t instanceof ExecutionException || t instanceof CompletionException) && t.getCause() != null) {
            t = t.getCause();
        }
        Map<String, Object> e = new LinkedHashMap<>();
        e.put("class", t.getClass().getName());
        e.put("message", t.getMessage());
        return e;
    }

    private static String str(Map<String, Object> cmd, String key) {
        Object v = cmd.get(key);
        if (v == null) {
            throw new IllegalArgumentException("missing field: " + key);
        }
        return v.toString();
    }

    private static long num(Map<String, Object> cmd, String key) {
        Object v = cmd.get(key);
        if (!(v instanceof Number)) {
            throw new IllegalArgumentException("missing or non-numeric field: " + key);
        }
        return ((Number) v).longValue();
    }

    private static void emit(Map<String, Object> obj) {
        String line = Json.write(obj);
        synchronized (OUT_LOCK) {
            try {
                out.write(line);
                out.write('\n');
                out.flush();
            } catch (Exception e) {
                // stdout closed: the driver is gone.
                Runtime.getRuntime().halt(0);
            }
        }
    }

    private static String redissonVersion() {
        try (InputStream is = Agent.class.getResourceAsStream("/agent.properties")) {
            Properties p = new Properties();
            p.load(is);
            return p.getProperty("redisson.version");
        } catch (Exception e) {
            return "unknown";
        }
    }

    private static void shutdown() {
        Thread t = new Thread(() -> {
            try {
                client.shutdown(0, 2, TimeUnit.SECONDS);
                for (RedissonClient other : OTHERS.values()) {
                    other.shutdown(0, 2, TimeUnit.SECONDS);
                }
            } catch (Throwable ignored) {
                // exiting anyway
            }
        });
        t.setDaemon(true);
        t.start();
        try {
            t.join(3000);
        } catch (InterruptedException ignored) {
            // exiting anyway
        }
        System.exit(0);
    }

    /** Just enough JSON for flat command objects and replies. */
    static final class Json {
        private final String s;
        private int i;

        private Json(String s) {
            this.s = s;
        }

        @SuppressWarnings("unchecked")
        static Map<String, Object> parseObject(String text) {
            Json p = new Json(text);
            Object v = p.value();
            p.ws();
            if (p.i != text.length() || !(v instanceof Map)) {
                throw new IllegalArgumentException("expected one JSON object per line: " + text);
            }
            return (Map<String, Object>) v;
        }

        private void ws() {
            while (i < s.length() && Character.isWhitespace(s.charAt(i))) {
                i++;
            }
        }

        private IllegalArgumentException bad() {
            return new IllegalArgumentException("bad JSON at " + i + ": " + s);
        }

        private Object value() {
            ws();
            if (i >= s.length()) {
                throw bad();
            }
            char c = s.charAt(i);
            if (c == '{') {
                i++;
                Map<String, Object> m = new LinkedHashMap<>();
                ws();
                if (s.charAt(i) == '}') {
                    i++;
                    return m;
                }
                while (true) {
                    ws();
                    if (s.charAt(i) != '"') {
                        throw bad();
                    }
                    String k = string();
                    ws();
                    if (s.charAt(i++) != ':') {
                        throw bad();
                    }
                    m.put(k, value());
                    ws();
                    char d = s.charAt(i++);
                    if (d == '}') {
                        return m;
                    }
                    if (d != ',') {
                        throw bad();
                    }
                }
            }
            if (c == '[') {
                i++;
                List<Object> l = new ArrayList<>();
                ws();
                if (s.charAt(i) == ']') {
                    i++;
                    return l;
                }
                while (true) {
                    l.add(value());
                    ws();
                    char d = s.charAt(i++);
                    if (d == ']') {
                        return l;
                    }
                    if (d != ',') {
                        throw bad();
                    }
                }
            }
            if (c == '"') {
                return string();
            }
            if (s.startsWith("true", i)) {
                i += 4;
                return Boolean.TRUE;
            }
            if (s.startsWith("false", i)) {
                i += 5;
                return Boolean.FALSE;
            }
            if (s.startsWith("null", i)) {
                i += 4;
                return null;
            }
            int start = i;
            while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) {
                i++;
            }
            String n = s.substring(start, i);
            if (n.isEmpty()) {
                throw bad();
            }
            if (n.indexOf('.') < 0 && n.indexOf('e') < 0 && n.indexOf('E') < 0) {
                return Long.parseLong(n);
            }
            return Double.parseDouble(n);
        }

        private String string() {
            i++; // opening quote
            StringBuilder b = new StringBuilder();
            while (true) {
                char c = s.charAt(i++);
                if (c == '"') {
                    return b.toString();
                }
                if (c != '\\') {
                    b.append(c);
                    continue;
                }
                char e = s.charAt(i++);
                switch (e) {
                    case 'n': b.append('\n'); break;
                    case 't': b.append('\t'); break;
                    case 'r': b.append('\r'); break;
                    case 'b': b.append('\b'); break;
                    case 'f': b.append('\f'); break;
                    case 'u':
                        b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                        i += 4;
                        break;
                    default: b.append(e); // \" \\ \/
                }
            }
        }

        static String write(Object v) {
            StringBuilder b = new StringBuilder();
            write(b, v);
            return b.toString();
        }

        private static void write(StringBuilder b, Object v) {
            if (v == null) {
                b.append("null");
            } else if (v instanceof Map) {
                b.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                    if (!first) {
                        b.append(',');
                    }
                    first = false;
                    quote(b, e.getKey().toString());
                    b.append(':');
                    write(b, e.getValue());
                }
                b.append('}');
            } else if (v instanceof List) {
                b.append('[');
                boolean first = true;
                for (Object o : (List<?>) v) {
                    if (!first) {
                        b.append(',');
                    }
                    first = false;
                    write(b, o);
                }
                b.append(']');
            } else if (v instanceof Number || v instanceof Boolean) {
                b.append(v);
            } else {
                quote(b, v.toString());
            }
        }

        private static void quote(StringBuilder b, String s) {
            b.append('"');
            for (int k = 0; k < s.length(); k++) {
                char c = s.charAt(k);
                switch (c) {
                    case '"': b.append("\\\""); break;
                    case '\\': b.append("\\\\"); break;
                    case '\n': b.append("\\n"); break;
                    case '\r': b.append("\\r"); break;
                    case '\t': b.append("\\t"); break;
                    default:
                        if (c < 0x20) {
                            b.append(String.format("\\u%04x", (int) c));
                        } else {
                            b.append(c);
                        }
                }
            }
            b.append('"');
        }
    }
}
