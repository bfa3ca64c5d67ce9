// The tasks study in C# on Mono (not .NET): N async methods that each await Task.Delay,
// started all at once and waited for together (Task.WhenAll), as C#'s users write them, on
// the thread pool Mono gives them. Prints one CONCUR line: the tasks that finished (each adds
// itself to a counter with Interlocked.Increment when its wait is over), the work's wall, the
// time to start every task, and how late each woke.
//
//   mcs -optimize+ -out:tasks-cs.exe tasks.cs && mono tasks-cs.exe --tasks 1000000 --wait-ms 10000
using System;
using System.Diagnostics;
using System.Globalization;
using System.Reflection;
using System.Threading;
using System.Threading.Tasks;

public static class Tasks
{
    static long finished;

    static async Task WaitOne(int i, long t0, int waitMs, long[] starts, long[] late)
    {
        long start = Stopwatch.GetTimestamp();
        await Task.Delay(waitMs);
        long took = Stopwatch.GetTimestamp() - start;
        starts[i] = start - t0;
        late[i] = took * 1000000 / Stopwatch.Frequency - (long) waitMs * 1000;
        Interlocked.Increment(ref finished);
    }

    static int Arg(string[] args, string name, int fallback)
    {
        for (int i = 0; i + 1 < args.Length; i++)
        {
            if (args[i] == name)
            {
                int v;
                if (!int.TryParse(args[i + 1], NumberStyles.None, CultureInfo.InvariantCulture, out v))
                {
                    Console.Error.WriteLine(name + " " + args[i + 1] + " is not a count");
                    Environment.Exit(2);
                }
                return v;
            }
        }
        return fallback;
    }

    // Mono's own version ("6.8.0.105 (Debian ...)"), from the Mono.Runtime class .NET lacks.
    static string MonoVersion()
    {
        Type mono = Type.GetType("Mono.Runtime");
        MethodInfo name = mono == null ? null : mono.GetMethod("GetDisplayName", BindingFlags.NonPublic | BindingFlags.Static);
        string v = name == null ? "not Mono" : (string) name.Invoke(null, null);
        return v.Replace("\\", "\\\\").Replace("\"", "\\\"");
    }

    public static int Main(string[] args)
    {
        int n = Arg(args, "--tasks", 1);
        int waitMs = Arg(args, "--wait-ms", 10000);
        if (n < 1)
        {
            Console.Error.WriteLine("--tasks " + n + " is out of range: at least 1");
            return 2;
        }
        long[] starts = new long[n];
        long[] late = new long[n];
        Task[] tasks = new Task[n];
        long t0 = Stopwatch.GetTimestamp();
        for (int i = 0; i < n; i++)
        {
            tasks[i] = WaitOne(i, t0, waitMs, starts, late);
        }
        Task.WhenAll(tasks).Wait();
        double wall = (double) (Stopwatch.GetTimestamp() - t0) / Stopwatch.Frequency;
        long lastStart = 0;
        foreach (long s in starts)
        {
            lastStart = Math.Max(lastStart, s);
        }
        Array.Sort(late);
        Func<double, long> q = p => Math.Max(0L, late[(int) Math.Round(p * (n - 1))]);
        // A waiting task produces no bytes (concur's sleep task neither).
        Console.WriteLine(string.Format(CultureInfo.InvariantCulture,
            "CONCUR {{\"wall_s\": {0:F6}, \"tasks_ok\": {1}, \"bytes\": 0, \"runtime\": \"mono {2}\", "
            + "\"wakeups\": {{\"start_all_s\": {3:F6}, \"late_us\": {{\"p50\": {4}, \"p90\": {5}, "
            + "\"p99\": {6}, \"p999\": {7}, \"max\": {8}}}}}}}",
            wall, Interlocked.Read(ref finished), MonoVersion(), (double) lastStart / Stopwatch.Frequency,
            q(0.5), q(0.9), q(0.99), q(0.999), q(1.0)));
        return 0;
    }
}
