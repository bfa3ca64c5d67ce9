//! The `concur` binary: the command line lives in the library (`concur::cli`), so that this
//! file is only the process's entry point and its exit code.

fn main() -> std::process::ExitCode {
    concur::cli::main()
}
