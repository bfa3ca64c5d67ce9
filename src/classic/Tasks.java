// The tasks study in Java: N threads that each sleep, started all at once and joined, as
// Java's users write it: platform threads (new Thread), or virtual threads
// (Thread.ofVirtual(), JDK 21 and later) with --virtual. Prints one CONCUR line: the threads
// that finished (each adds itself to an AtomicLong when its wait is over), the work's wall,
// the time to start every thread, and how late each woke.
//
//   javac -d . Tasks.java && java -cp . Tasks --tasks 10000 --wait-ms 10000 [--virtual]
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicLong;

public class Tasks {
    public static void main(String[] args) throws Exception {
        int n = 1;
        long waitMs = 10000;
        boolean virtual = false;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--tasks": n = Integer.parseInt(args[++i]); break;
                case "--wait-ms": waitMs = Long.parseLong(args[++i]); break;
                case "--virtual": virtual = true; break;
                default: throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        final long waitNs = waitMs * 1_000_000L;
        final long wait = waitMs;
        final long[] starts = new long[n];
        final long[] late = new long[n];
        final AtomicLong finished = new AtomicLong();
        Thread[] threads = new Thread[n];
        // Thread.ofVirtual() is JDK 21's: called by reflection so that this file builds on 17.
        Object builder = virtual ? Thread.class.getMethod("ofVirtual").invoke(null) : null;
        java.lang.reflect.Method unstarted = virtual
            ? Class.forName("java.lang.Thread$Builder").getMethod("unstarted", Runnable.class)
            : null;
        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++) {
            final int k = i;
            Runnable body = () -> {
                long start = System.nanoTime();
                try {
                    Thread.sleep(wait);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
                starts[k] = start - t0;
                late[k] = System.nanoTime() - start - waitNs;
                finished.incrementAndGet();
            };
            threads[i] = virtual ? (Thread) unstarted.invoke(builder, body) : new Thread(body);
            threads[i].start();
        }
        for (Thread t : threads) t.join();
        double wall = (System.nanoTime() - t0) / 1e9;
        long lastStart = Arrays.stream(starts).max().orElse(0);
        Arrays.sort(late);
        final int count = n;
        java.util.function.DoubleFunction<Long> q =
            p -> Math.max(0L, late[(int) Math.round(p * (count - 1))] / 1000);
        // A waiting thread produces no bytes (concur's sleep task neither).
        System.out.printf(
            "CONCUR {\"wall_s\": %.6f, \"tasks_ok\": %d, \"bytes\": 0, \"runtime\": \"java %s\", "
                + "\"wakeups\": {\"start_all_s\": %.6f, \"late_us\": {\"p50\": %d, \"p90\": %d, "
                + "\"p99\": %d, \"p999\": %d, \"max\": %d}}}%n",
            wall, finished.get(), System.getProperty("java.version"), lastStart / 1e9,
            q.apply(0.5), q.apply(0.9), q.apply(0.99), q.apply(0.999), q.apply(1.0));
    }
}
