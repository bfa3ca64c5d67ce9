//! What clap gives each field of an option group when no flag is on the command line: the one
//! place the groups' defaults come from, below every group that has one (the study's options,
//! the server's, a run's settings).

use clap::{Args, FromArgMatches};

/// The value of option group `T` parsed from an empty command line.
pub fn defaults<T: Args + FromArgMatches>() -> T {
    let cmd = T::augment_args(clap::Command::new("defaults"));
    // Every option group has a default for every field (each group's tests parse one), so an
    // empty command line always parses.
    let matches = cmd
        .try_get_matches_from(["defaults"])
        .expect("every option group parses from an empty command line");
    T::from_arg_matches(&matches).expect("every option group parses from an empty command line")
}
