// The tasks study in C++20: N coroutines that each wait on a timer, as asio's users write
// them (asio::co_spawn of an asio::awaitable, an asio::steady_timer awaited with
// asio::use_awaitable), on one io_context run by one thread per core (as tokio's
// multi-threaded runtime and Go's scheduler use every core). Prints one CONCUR line: the
// coroutines that finished (each adds itself to an atomic counter when its wait is over), the
// work's wall, the time to start every coroutine, and how late each woke.
//
//   g++ -std=c++20 -O2 -pthread -o tasks-cpp tasks.cpp && ./tasks-cpp --tasks 1000000 --wait-ms 10000
#include <asio.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

using clock_type = std::chrono::steady_clock;

namespace {

std::atomic<long> finished{0};

asio::awaitable<void> wait_one(std::size_t i, clock_type::time_point t0, std::chrono::milliseconds wait,
                               std::vector<long long> &starts, std::vector<long long> &late) {
    auto start = clock_type::now();
    asio::steady_timer timer(co_await asio::this_coro::executor, wait);
    co_await timer.async_wait(asio::use_awaitable);
    auto took = clock_type::now() - start;
    starts[i] = std::chrono::duration_cast<std::chrono::nanoseconds>(start - t0).count();
    late[i] = std::chrono::duration_cast<std::chrono::microseconds>(took - wait).count();
    finished.fetch_add(1, std::memory_order_relaxed);
}

long arg(int argc, char **argv, const char *name, long fallback) {
    for (int i = 1; i + 1 < argc; i++) {
        if (std::strcmp(argv[i], name) == 0) {
            char *end = nullptr;
            long v = std::strtol(argv[i + 1], &end, 10);
            if (*end != '\0' || v < 0) {
                std::fprintf(stderr, "%s %s is not a count\n", name, argv[i + 1]);
                std::exit(2);
            }
            return v;
        }
    }
    return fallback;
}

} // namespace

int main(int argc, char **argv) {
    long n = arg(argc, argv, "--tasks", 1);
    long wait_ms = arg(argc, argv, "--wait-ms", 10000);
    if (n < 1) {
        std::fprintf(stderr, "--tasks %ld is out of range: at least 1\n", n);
        return 2;
    }
    auto wait = std::chrono::milliseconds(wait_ms);
    std::vector<long long> starts(n), late(n);
    unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    asio::io_context ctx(static_cast<int>(threads));
    auto t0 = clock_type::now();
    for (long i = 0; i < n; i++) {
        asio::co_spawn(ctx, wait_one(static_cast<std::size_t>(i), t0, wait, starts, late), asio::detached);
    }
    std::vector<std::thread> pool;
    for (unsigned k = 1; k < threads; k++) {
        pool.emplace_back([&ctx] { ctx.run(); });
    }
    ctx.run();
    for (auto &t : pool) {
        t.join();
    }
    double wall = std::chrono::duration<double>(clock_type::now() - t0).count();
    long long last_start = *std::max_element(starts.begin(), starts.end());
    std::sort(late.begin(), late.end());
    auto q = [&](double p) {
        long long v = late[static_cast<std::size_t>(std::llround(p * static_cast<double>(n - 1)))];
        return v < 0 ? 0LL : v;
    };
    // A waiting coroutine produces no bytes (concur's sleep task neither).
    std::printf("CONCUR {\"wall_s\": %.6f, \"tasks_ok\": %ld, \"bytes\": 0, "
                "\"runtime\": \"asio %d.%d.%d, g++ %s, %u threads\", "
                "\"wakeups\": {\"start_all_s\": %.6f, \"late_us\": {\"p50\": %lld, \"p90\": %lld, "
                "\"p99\": %lld, \"p999\": %lld, \"max\": %lld}}}\n",
                wall, finished.load(), ASIO_VERSION / 100000, ASIO_VERSION / 100 % 1000, ASIO_VERSION % 100,
                __VERSION__, threads, static_cast<double>(last_start) / 1e9, q(0.5), q(0.9), q(0.99), q(0.999),
                q(1.0));
    return 0;
}
