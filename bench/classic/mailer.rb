#!/usr/bin/env ruby
# frozen_string_literal: true
#
# Classic Ruby "mailer" concurrency experiment, for comparison with concur.
#
# TASKS "deliveries" (default 100); each builds a mail (from/to/subject/body
# through a small Mail builder), computes fib(FIB) recursively (default 30)
# and "prints" the mail to a sink (default: an in-memory StringIO that is
# thrown away; --stdout prints for real).  Variants, timed with Benchmark.bm:
#
#   sequential   TASKS deliveries, one after another
#   fork         TASKS forked processes (fork + Process.waitall)
#   threads      TASKS threads (Thread.new, then join all)
#   pool         a pool of POOL threads (default 10) draining a Queue
#   threads-10k  (only with --threads-10k) 10,000 threads, one delivery each;
#                if thread creation fails, the exception message is
#                reported and the run continues.  Note: at --fib 30 this is
#                ~100x the "threads" variant (it does 10,000 deliveries).
#
# Standard library only.  Ruby's user/system columns are the parent's; the
# total column also includes reaped children (fork variant).

require 'benchmark'
require 'etc'
require 'optparse'
require 'stringio'

# A tiny Mail class with a builder DSL, e.g.
#   Mail.new { from "a@x"; to "b@y"; subject "hi"; body "..." }
class Mail
  FIELDS = %i[from to subject body].freeze

  FIELDS.each do |field|
    define_method(field) do |value = nil|
      if value.nil?
        instance_variable_get("@#{field}")
      else
        instance_variable_set("@#{field}", value)
      end
    end
  end

  def initialize(&block)
    instance_eval(&block) if block
  end

  def to_s
    "From: #{from}\nTo: #{to}\nSubject: #{subject}\n\n#{body}\n"
  end
end

# Delivers mails to a sink; one delivery = build mail + fib(n) + print.
class Mailer
  def self.fib(n)
    n < 2 ? n : fib(n - 1) + fib(n - 2)
  end

  def initialize(fib_n, sink)
    @fib_n = fib_n
    @sink = sink
    @lock = Mutex.new
  end

  def deliver(i)
    n = @fib_n
    value = Mailer.fib(n)
    mail = Mail.new do
      from    'mailer@example.com'
      to      "user#{i}@example.com"
      subject "Delivery #{i}"
      body    "fib(#{n}) = #{value}"
    end
    @lock.synchronize { @sink.puts(mail) }
  end
end

options = { fib: 30, tasks: 100, pool: 10, stdout: false, threads_10k: false, many: 10_000 }
parser = OptionParser.new do |o|
  o.banner = "Usage: #{File.basename($PROGRAM_NAME)} [options]"
  o.on('--fib N', Integer, 'fib(N) per delivery (default 30)') { |v| options[:fib] = v }
  o.on('--tasks N', Integer, 'deliveries per variant (default 100)') { |v| options[:tasks] = v }
  o.on('--pool N', Integer, 'thread-pool size (default 10)') { |v| options[:pool] = v }
  o.on('--stdout', 'print mails to stdout instead of discarding them') { options[:stdout] = true }
  o.on('--threads-10k', 'also run the 10,000-threads variant') { options[:threads_10k] = true }
  o.on('--many-threads N', Integer, 'thread count for --threads-10k (default 10000)') { |v| options[:many] = v }
end
begin
  parser.parse!(ARGV)
  raise OptionParser::InvalidArgument, '--fib must be >= 0' if options[:fib].negative?
  %i[tasks pool many].each do |k|
    raise OptionParser::InvalidArgument, "--#{k} must be >= 1" if options[k] < 1
  end
rescue OptionParser::ParseError => e
  warn e.message
  warn parser
  exit 2
end

$stdout.sync = true
fib_n = options[:fib]
tasks = options[:tasks]
new_sink = -> { options[:stdout] ? $stdout : StringIO.new }

puts "# ruby #{RUBY_VERSION} (#{RUBY_PLATFORM}), #{Etc.nprocessors} CPUs; " \
     "fib=#{fib_n}, tasks=#{tasks}, pool=#{options[:pool]}, " \
     "sink=#{options[:stdout] ? 'stdout' : 'discarded StringIO'}"

errors = []
Benchmark.bm(12) do |x|
  x.report('sequential') do
    mailer = Mailer.new(fib_n, new_sink.call)
    tasks.times { |i| mailer.deliver(i) }
  end

  x.report('fork') do
    mailer = Mailer.new(fib_n, new_sink.call)
    tasks.times { |i| fork { mailer.deliver(i) } }
    failed = Process.waitall.count { |_pid, status| !status.success? }
    errors << "fork: #{failed} child(ren) failed" if failed.positive?
  end

  x.report('threads') do
    mailer = Mailer.new(fib_n, new_sink.call)
    tasks.times.map { |i| Thread.new { mailer.deliver(i) } }.each(&:join)
  end

  x.report("pool(#{options[:pool]})") do
    mailer = Mailer.new(fib_n, new_sink.call)
    queue = Queue.new
    tasks.times { |i| queue << i }
    queue.close
    options[:pool].times.map do
      Thread.new do
        while (i = queue.pop)
          mailer.deliver(i)
        end
      end
    end.each(&:join)
  end

  if options[:threads_10k]
    many = options[:many]
    label = many == 10_000 ? 'threads-10k' : "threads-#{many}"
    x.report(label) do
      mailer = Mailer.new(fib_n, new_sink.call)
      threads = []
      begin
        many.times { |i| threads << Thread.new { mailer.deliver(i) } }
      rescue StandardError, NoMemoryError, SystemCallError => e
        errors << "#{label}: thread creation failed after #{threads.size} threads: " \
                  "#{e.class}: #{e.message}"
      end
      threads.each do |t|
        t.join
      rescue StandardError, NoMemoryError, SystemCallError => e
        errors << "#{label}: thread failed: #{e.class}: #{e.message}"
      end
    end
  end
end

errors.uniq.each { |msg| puts "# error: #{msg}" }
