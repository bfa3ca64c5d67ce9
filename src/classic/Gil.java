// The gil study's CPU body in Java: K platform threads each running the multiply loop
// (a, b = b, a*b, wrapping 64-bit: concur's own loop), on every core (the JVM has no
// interpreter lock), or the K calls one after another with --mode plain. Prints one CONCUR
// line: the work's wall, the calls that returned (each adds itself to an AtomicLong) and the
// bytes they produced, summed: each result's size, Long.BYTES, as concur's spin.
//
//   javac -d . Gil.java && java -cp . Gil --mode threads --tasks 6 --iterations 60000000
import java.util.concurrent.atomic.AtomicLong;

public class Gil {
    static volatile long sink;
    static final AtomicLong done = new AtomicLong();
    static final AtomicLong bytes = new AtomicLong();

    /** One call: its result kept, the call and the result's bytes counted. */
    static void work(long n, long[] results, int i) {
        results[i] = spin(n);
        done.incrementAndGet();
        bytes.addAndGet(Long.BYTES);
    }

    static long spin(long n) {
        long a = 3;
        long b = 5;
        for (long i = 0; i < n; i++) {
            long next = (a * b) | 1;
            a = b;
            b = next;
        }
        return b;
    }

    public static void main(String[] args) throws Exception {
        String mode = "threads";
        int tasks = 1;
        long iterations = 60_000_000L;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--mode": mode = args[++i]; break;
                case "--tasks": tasks = Integer.parseInt(args[++i]); break;
                case "--iterations": iterations = Long.parseLong(args[++i]); break;
                default: throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        final long n = iterations;
        long[] results = new long[tasks];
        long t0 = System.nanoTime();
        if (mode.equals("plain")) {
            for (int i = 0; i < tasks; i++) work(n, results, i);
        } else {
            Thread[] threads = new Thread[tasks];
            for (int i = 0; i < tasks; i++) {
                final int k = i;
                threads[i] = new Thread(() -> work(n, results, k));
                threads[i].start();
            }
            for (Thread t : threads) t.join();
        }
        double wall = (System.nanoTime() - t0) / 1e9;
        for (long r : results) sink ^= r;
        System.out.printf(
            "CONCUR {\"wall_s\": %.6f, \"bytes\": %d, \"tasks_ok\": %d, \"runtime\": \"java %s\"}%n",
            wall, bytes.get(), done.get(), System.getProperty("java.version"));
    }
}
