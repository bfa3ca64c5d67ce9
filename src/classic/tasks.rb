# The tasks study in MRI: N tasks that each sleep, started all at once and awaited, as Ruby's
# users write it: one thread each (Thread.new, sleep), or one fiber each under the async gem's
# reactor (Async, task.async, sleep: the fiber scheduler's sleep).
#
#   ruby tasks.rb --tasks 10000 --wait-ms 10000
#   ruby tasks.rb --mode fibers --tasks 100000 --wait-ms 10000
#
# A fiber's stack is a memory mapping with a guard page below it: past about half of
# vm.max_map_count fibers (30,000 fit under the default 65,530, 32,000 do not) MRI raises
# FiberError "can't set a guard page" in the task it cannot start, and the reactor waits for
# that task forever; the study runs this row only at counts that fit.
#
# Prints one CONCUR line: the tasks that finished (each task's value is 1 when its wait is
# over, summed after all are awaited), the work's wall, the time to start every task, and how
# late each woke.
require 'json'

n = 1
wait_ms = 10_000
mode = 'threads'
ARGV.each_slice(2) do |flag, value|
  case flag
  when '--tasks' then n = Integer(value)
  when '--wait-ms' then wait_ms = Integer(value)
  when '--mode' then mode = value
  else abort "unknown argument #{flag}"
  end
end
abort "unknown mode #{mode} (threads, fibers)" unless %w[threads fibers].include?(mode)
wait = wait_ms / 1000.0
clock = -> { Process.clock_gettime(Process::CLOCK_MONOTONIC) }
starts = Array.new(n, 0.0)
late = Array.new(n, 0.0)
# One task's body, the same in a thread and in a fiber: the wait is Kernel#sleep, which the
# async gem's fiber scheduler turns into a timer of its reactor.
task = lambda do |i, t0|
  start = clock.call
  sleep wait
  starts[i] = start - t0
  late[i] = clock.call - start - wait
  1
end
runtime = "ruby #{RUBY_VERSION}"
if mode == 'fibers'
  require 'async'
  runtime += ", async #{Async::VERSION}"
end
t0 = clock.call
if mode == 'threads'
  threads = Array.new(n) { |i| Thread.new { task.(i, t0) } }
  finished = threads.sum(&:value)
else
  finished = Async do |top|
    fibers = Array.new(n) { |i| top.async { task.(i, t0) } }
    fibers.sum(&:wait)
  end.wait
end
wall = clock.call - t0
late.sort!
q = ->(p) { [0, (late[(p * (n - 1)).round] * 1e6).round].max }
line = {
  # A waiting task produces no bytes (concur's sleep task neither).
  wall_s: wall, tasks_ok: finished, bytes: 0, runtime: runtime,
  wakeups: {
    start_all_s: starts.max,
    late_us: { p50: q.(0.5), p90: q.(0.9), p99: q.(0.99), p999: q.(0.999), max: q.(1) }
  }
}
puts "CONCUR #{JSON.generate(line)}"
