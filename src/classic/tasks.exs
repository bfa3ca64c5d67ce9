# The tasks study in Elixir: N processes that each sleep, started with Task.async and awaited
# together, as Elixir's users write it. Run with the process limit raised:
#
#   elixir --erl "+P 2000000" tasks.exs --tasks 1000000 --wait-ms 10000
#
# Prints one CONCUR line: the processes that finished (each task's result counts 1 when its
# wait is over, summed after all are awaited), the work's wall, the time to start every
# process, and how late each woke.
{opts, _, _} = OptionParser.parse(System.argv(), strict: [tasks: :integer, wait_ms: :integer])
n = Keyword.get(opts, :tasks, 1)
wait_ms = Keyword.get(opts, :wait_ms, 10_000)
t0 = System.monotonic_time(:microsecond)

results =
  1..n
  |> Enum.map(fn _ ->
    Task.async(fn ->
      start = System.monotonic_time(:microsecond)
      Process.sleep(wait_ms)
      {start - t0, System.monotonic_time(:microsecond) - start - wait_ms * 1000, 1}
    end)
  end)
  |> Task.await_many(:infinity)

wall = (System.monotonic_time(:microsecond) - t0) / 1.0e6
finished = results |> Enum.map(&elem(&1, 2)) |> Enum.sum()
last_start = results |> Enum.map(&elem(&1, 0)) |> Enum.max()
late = results |> Enum.map(&elem(&1, 1)) |> Enum.sort() |> List.to_tuple()
q = fn p -> max(0, elem(late, round(p * (n - 1)))) end

# A waiting process produces no bytes (concur's sleep task neither).
IO.puts(
  "CONCUR {\"wall_s\": #{wall}, \"tasks_ok\": #{finished}, \"bytes\": 0, " <>
    "\"runtime\": \"elixir #{System.version()} otp #{System.otp_release()}\", " <>
    "\"wakeups\": {\"start_all_s\": #{last_start / 1.0e6}, \"late_us\": {\"p50\": #{q.(0.5)}, " <>
    "\"p90\": #{q.(0.9)}, \"p99\": #{q.(0.99)}, \"p999\": #{q.(0.999)}, \"max\": #{q.(1)}}}}"
)
