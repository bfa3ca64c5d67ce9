# The tasks study in MRI: N threads that each sleep, started all at once and joined, as
# Ruby's users write it (Thread.new, sleep).
#
#   ruby tasks.rb --tasks 10000 --wait-ms 10000
#
# Prints one CONCUR line: the threads that finished (each thread's value is 1 when its wait
# is over, summed after all are joined), the work's wall, the time to start every thread, and
# how late each woke.
require 'json'

n = 1
wait_ms = 10_000
ARGV.each_slice(2) do |flag, value|
  case flag
  when '--tasks' then n = Integer(value)
  when '--wait-ms' then wait_ms = Integer(value)
  else abort "unknown argument #{flag}"
  end
end
wait = wait_ms / 1000.0
clock = -> { Process.clock_gettime(Process::CLOCK_MONOTONIC) }
starts = Array.new(n, 0.0)
late = Array.new(n, 0.0)
t0 = clock.call
threads = Array.new(n) do |i|
  Thread.new do
    start = clock.call
    sleep wait
    starts[i] = start - t0
    late[i] = clock.call - start - wait
    1
  end
end
finished = threads.sum(&:value)
wall = clock.call - t0
late.sort!
q = ->(p) { [0, (late[(p * (n - 1)).round] * 1e6).round].max }
line = {
  # A waiting thread produces no bytes (concur's sleep task neither).
  wall_s: wall, tasks_ok: finished, bytes: 0, runtime: "ruby #{RUBY_VERSION}",
  wakeups: {
    start_all_s: starts.max,
    late_us: { p50: q.(0.5), p90: q.(0.9), p99: q.(0.99), p999: q.(0.999), max: q.(1) }
  }
}
puts "CONCUR #{JSON.generate(line)}"
