// The crawl study in Java: N GETs of the delay server, C at a time, as Java's users write it
// (java.net.http.HttpClient's sendAsync, a Semaphore of C, HTTP/1.1 as the server speaks it
// without TLS). Prints one CONCUR line: the work's wall, bytes, and requests ok and failed.
//
//   javac -d . Crawl.java && java -cp . Crawl --url http://127.0.0.1:PORT -n 1000 -c 100 [--cafile PEM]
import java.io.FileInputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicLong;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

public class Crawl {
    public static void main(String[] args) throws Exception {
        String base = "";
        String cafile = null;
        int n = 1000;
        int c = 100;
        int delay = 100;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--url": base = args[++i]; break;
                case "-n": n = Integer.parseInt(args[++i]); break;
                case "-c": c = Integer.parseInt(args[++i]); break;
                case "--delay": delay = Integer.parseInt(args[++i]); break;
                case "--cafile": cafile = args[++i]; break;
                default: throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        HttpClient.Builder builder = HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(30));
        if (cafile != null) {
            KeyStore trusted = KeyStore.getInstance(KeyStore.getDefaultType());
            trusted.load(null, null);
            try (FileInputStream in = new FileInputStream(cafile)) {
                int k = 0;
                for (Certificate cert : CertificateFactory.getInstance("X.509").generateCertificates(in)) {
                    trusted.setCertificateEntry("ca" + k++, cert);
                }
            }
            TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
            tmf.init(trusted);
            SSLContext ssl = SSLContext.getInstance("TLS");
            ssl.init(null, tmf.getTrustManagers(), null);
            builder.sslContext(ssl);
        }
        HttpClient client = builder.build();
        Random rng = new Random(42);
        String[] urls = new String[n];
        for (int i = 0; i < n; i++) {
            StringBuilder name = new StringBuilder();
            for (int j = 0; j < 10; j++) name.append((char) ('a' + rng.nextInt(26)));
            urls[i] = base + "/add?name=crawl" + name + "&delay=" + delay;
        }
        AtomicLong ok = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        AtomicLong bytes = new AtomicLong();
        Semaphore inFlight = new Semaphore(c);
        CompletableFuture<?>[] all = new CompletableFuture<?>[n];
        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++) {
            inFlight.acquire();
            HttpRequest req = HttpRequest.newBuilder(URI.create(urls[i])).timeout(Duration.ofSeconds(30)).build();
            all[i] = client.sendAsync(req, HttpResponse.BodyHandlers.ofByteArray()).whenComplete((r, e) -> {
                if (e == null && r.statusCode() == 200) {
                    ok.incrementAndGet();
                    bytes.addAndGet(r.body().length);
                } else {
                    failed.incrementAndGet();
                }
                inFlight.release();
            });
        }
        CompletableFuture.allOf(all).exceptionally(e -> null).join();
        double wall = (System.nanoTime() - t0) / 1e9;
        System.out.printf(
            "CONCUR {\"wall_s\": %.6f, \"bytes\": %d, \"tasks_ok\": %d, \"tasks_failed\": %d, \"runtime\": \"java %s\"}%n",
            wall, bytes.get(), ok.get(), failed.get(), System.getProperty("java.version"));
    }
}
