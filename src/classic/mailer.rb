#!/usr/bin/env ruby
# frozen_string_literal: true
#
# The classic Ruby "mailer" experiment: one cell per process, as concur runs it (--classic),
# or the classic's Benchmark.bm table in one process (bm):
#
#   mailer.rb MODE [--tasks N] [--fib F] [--workers W] [--redis URL]
#   mailer.rb bm [--tasks N] [--fib F] [--workers W] [--many-threads M]
#
# The Redis URL may come from the environment instead, as CONCUR_JOBS_BACKEND=redis://...
# (how concur passes the study's --jobs-backend: `ps` shows every user a command line, so a
# password stays off it).
#
# N deliveries; each builds a mail (from/to/subject/body through a small builder), computes
# fib(F) recursively and renders the mail into a sink that is thrown away. MODE is one of
#   seq        one after another
#   fork       one forked process per delivery (fork, then Process.waitall)
#   threads    one thread per delivery (Thread.new, then join all)
#   pool       W threads draining a Queue
#   celluloid  a Celluloid pool of W actors (needs the celluloid gem)
#   sidekiq    W Sidekiq threads on Redis (needs the sidekiq gem and a URL): a `sidekiq`
#              process is started and waited for first, then N jobs are pushed and drained
# The last line is `CONCUR {"wall_s": ..., "bytes": ..., "tasks_ok": K}`: the work's own
# wall, without the interpreter's start-up and gem loading, and K the deliveries that ended
# (counted where each one ends: a thread's value, a child's exit status, a job's counter),
# never the N asked for.
# bm runs seq, fork, threads and pool one after another under Benchmark.bm (`user system
# total real`; user and system are this process's, total adds reaped children) and, with
# --many-threads M, a row of M threads, one delivery each (the classic's 10,000, which the OS
# may refuse: the error is printed and the table goes on).

require 'json'
require 'optparse'
require 'stringio'

# A tiny mail with a builder DSL: Mail.new { from "a@x"; to "b@y"; subject "hi"; body "..." }
class Mail
  %i[from to subject body].each do |field|
    define_method(field) do |value = nil|
      value.nil? ? instance_variable_get("@#{field}") : instance_variable_set("@#{field}", value)
    end
  end

  def initialize(&block)
    instance_eval(&block) if block
  end

  def to_s
    "From: #{from}\nTo: #{to}\nSubject: #{subject}\n\n#{body}\n"
  end
end

def fib(n)
  n < 2 ? n : fib(n - 1) + fib(n - 2)
end

# Mail i, rendered.
def render(i, fib_n, value)
  Mail.new do
    from "mailer@example.com"
    to "user#{i}@example.com"
    subject "Delivery #{i}"
    body "Hello user #{i}, fib(#{fib_n}) = #{value}."
  end.to_s
end

# One delivery: build, fib, print to a sink; the bytes of the rendered mail.
def deliver(i, fib_n)
  sink = StringIO.new
  sink.print(render(i, fib_n, fib(fib_n)))
  sink.string.bytesize
end

# One thread per delivery, then join all: [bytes, deliveries that ended]. When the OS refuses
# a thread (the classic's 10,000 threads), the ones already started are joined before the
# error goes on.
def in_threads(n, fib_n)
  threads = []
  n.times { |i| threads << Thread.new { deliver(i, fib_n) } }
  values = threads.map(&:value)
  [values.sum, values.size]
rescue ThreadError, SystemCallError, NoMemoryError
  threads.each { |t| t.join rescue nil }
  raise
end

# The N deliveries of a mode that needs no gem: [the bytes of their mails (nil for fork: the
# children's byte counts stay in the children, as in the classic), the deliveries that ended].
def deliveries(mode, n, fib_n, workers)
  case mode
  when 'seq'
    sizes = (0...n).map { |i| deliver(i, fib_n) }
    [sizes.sum, sizes.size]
  when 'fork'
    n.times { |i| fork { deliver(i, fib_n) } }
    statuses = Process.waitall
    bad = statuses.count { |_, st| !st.success? }
    raise "#{bad} forked deliveries failed" if bad.positive?
    [nil, statuses.size]
  when 'threads' then in_threads(n, fib_n)
  when 'pool'
    q = Queue.new
    n.times { |i| q << i }
    q.close
    counts = (0...workers).map { Thread.new { s = 0; c = 0; while (i = q.pop); s += deliver(i, fib_n); c += 1; end; [s, c] } }.map(&:value)
    [counts.sum(&:first), counts.sum(&:last)]
  end
end

MODES = %w[seq fork threads pool celluloid sidekiq bm].freeze

if $PROGRAM_NAME == __FILE__
opts = { tasks: 100, fib: 30, workers: 10, redis: nil, many: nil }
mode = ARGV.shift
usage = ->(why) { warn "mailer.rb: #{why}"; exit 2 }
begin
  OptionParser.new do |o|
    o.on('--tasks N', Integer) { |v| opts[:tasks] = v }
    o.on('--fib F', Integer) { |v| opts[:fib] = v }
    o.on('--workers W', Integer) { |v| opts[:workers] = v }
    o.on('--redis URL') { |v| opts[:redis] = v }
    o.on('--many-threads M', Integer) { |v| opts[:many] = v }
  end.parse!
rescue OptionParser::ParseError => e
  usage.call(e.message)
end
opts[:redis] ||= ENV['CONCUR_JOBS_BACKEND'] if ENV['CONCUR_JOBS_BACKEND'].to_s.start_with?('redis')
usage.call("unknown mode #{mode.inspect} (allowed: #{MODES.join(', ')})") unless MODES.include?(mode)
usage.call("--fib #{opts[:fib]} is below 0") if opts[:fib].negative?
%i[tasks workers many].each { |k| usage.call("--#{k} #{opts[k]} is below 1") if opts[k]&.< 1 }
usage.call('sidekiq needs --redis URL or CONCUR_JOBS_BACKEND=redis://...') if mode == 'sidekiq' && !opts[:redis]
n = opts[:tasks]
f = opts[:fib]
w = opts[:workers]

def done(t0, bytes, n)
  wall = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
  puts "CONCUR #{JSON.generate(wall_s: wall, bytes: bytes, tasks_ok: n)}"
end

now = -> { Process.clock_gettime(Process::CLOCK_MONOTONIC) }

case mode
when 'seq', 'threads', 'pool'
  t0 = now.call
  bytes, ok = deliveries(mode, n, f, w)
  done(t0, bytes, ok)
when 'fork'
  t0 = now.call
  _, ok = deliveries(mode, n, f, w)
  # The parent renders the same mails (fib's value computed once, outside the clock) to
  # count their bytes: the mails of the children that exited well.
  wall = now.call - t0
  fv = fib(f)
  bytes = (0...ok).sum { |i| render(i, f, fv).bytesize }
  puts "CONCUR #{JSON.generate(wall_s: wall, bytes: bytes, tasks_ok: ok)}"
when 'bm'
  require 'benchmark'
  require 'etc'
  $stdout.sync = true
  puts "# ruby #{RUBY_VERSION} (#{RUBY_PLATFORM}), #{Etc.nprocessors} CPUs; fib=#{f}, tasks=#{n}, pool=#{w}"
  rows = [['sequential', 'seq', n], ['fork', 'fork', n], ['threads', 'threads', n], ["pool(#{w})", 'pool', n]]
  rows << ["threads-#{opts[:many]}", 'threads', opts[:many]] if opts[:many]
  errors = []
  Benchmark.bm(12) do |x|
    rows.each do |label, m, count|
      x.report(label) do
        deliveries(m, count, f, w)
      rescue StandardError, NoMemoryError => e
        errors << "#{label}: #{e.class}: #{e.message}"
      end
    end
  end
  errors.each { |e| puts "# error: #{e}" }
when 'celluloid'
  $stderr.reopen(File::NULL) # Celluloid logs its shutdown on stderr
  require 'celluloid'
  Celluloid.logger = nil
  class Deliverer
    include Celluloid
    def deliver_one(i, fib_n) = deliver(i, fib_n)
  end
  t0 = now.call
  pool = Deliverer.pool(size: w)
  values = (0...n).map { |i| pool.future.deliver_one(i, f) }.map(&:value)
  done(t0, values.sum, values.size)
when 'sidekiq'
  require 'sidekiq'
  require 'securerandom'
  queue = "concur-#{SecureRandom.hex(4)}"
  counter = "#{queue}:done"
  Sidekiq.configure_client { |c| c.redis = { url: opts[:redis] } }
  Sidekiq.logger.level = Logger::WARN
  Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)
  pid = spawn({ 'CONCUR_REDIS' => opts[:redis] }, 'sidekiq', '-r', File.expand_path(__FILE__),
              '-c', w.to_s, '-q', queue, out: File::NULL, err: File::NULL)
  at_exit { Process.kill('TERM', pid) rescue nil; Process.wait(pid) rescue nil }
  # Ready when the server has registered itself in Sidekiq's process set.
  deadline = now.call + 30
  sleep 0.05 until Sidekiq.redis { |r| r.smembers('processes') }.any? { |k| Sidekiq.redis { |r| r.hget(k, 'info') }.to_s.include?(queue) } || now.call > deadline
  t0 = now.call
  Sidekiq::Client.push_bulk('class' => 'ConcurMailJob', 'queue' => queue, 'args' => (0...n).map { |i| [i, f, counter] })
  sleep 0.005 until Sidekiq.redis { |r| r.get(counter) }.to_i >= n || now.call > t0 + 3600
  total = Sidekiq.redis { |r| r.get("#{counter}:bytes") }.to_i
  done(t0, total, Sidekiq.redis { |r| r.get(counter) }.to_i)
  Sidekiq.redis { |r| r.del(counter, "#{counter}:bytes") }
end
end

if defined?(Sidekiq) && ENV['CONCUR_REDIS']
  Sidekiq.configure_server { |c| c.redis = { url: ENV['CONCUR_REDIS'] } }
  # One delivery as a Sidekiq job; counts itself done and its bytes in Redis.
  class ConcurMailJob
    include Sidekiq::Worker
    def perform(i, fib_n, counter)
      bytes = deliver(i, fib_n)
      Sidekiq.redis { |r| r.incrby("#{counter}:bytes", bytes); r.incr(counter) }
    end
  end
end
