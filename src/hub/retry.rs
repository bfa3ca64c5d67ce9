//! The one backoff every party uses to reach a hub that went away (a Redis restart, a
//! network cut): an agent between attempts to join, a study between attempts to reconnect
//! while it waits for a run's answers. One pause schedule, so that a study and its agents
//! come back within the same few seconds of the hub.

use std::time::{Duration, Instant};

/// The first pause before a hub that did not answer is asked again; it doubles up to
/// [`RETRY_MAX`].
pub const RETRY_FIRST: Duration = Duration::from_millis(250);

/// The longest pause between two attempts to reach the hub: a party that is waiting finds
/// the hub at most this long after it is back.
pub const RETRY_MAX: Duration = Duration::from_secs(5);

/// Pauses between attempts to reach the hub: [`RETRY_FIRST`], doubling up to [`RETRY_MAX`],
/// back to the first once the hub answers.
#[derive(Debug, Clone)]
pub struct Backoff {
    pause: Duration,
    attempt: u32,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            pause: RETRY_FIRST,
            attempt: 0,
        }
    }
}

impl Backoff {
    /// Counts a failed attempt: its number (from 1) and the pause before the next one.
    pub fn failed(&mut self) -> (u32, Duration) {
        self.attempt = self.attempt.saturating_add(1);
        let pause = self.pause;
        self.pause = (self.pause * 2).min(RETRY_MAX);
        (self.attempt, pause)
    }

    /// The hub answered: the next failure starts the schedule again.
    pub fn reset(&mut self) {
        *self = Backoff::default();
    }
}

/// Sleeps `d`, or less if Ctrl-C comes.
pub fn interruptible_sleep(d: Duration) {
    let until = Instant::now() + d;
    while !crate::os::interrupt::interrupted() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20).min(until - Instant::now()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_up_to_the_longest_and_start_again_once_the_hub_answers() {
        let mut b = Backoff::default();
        let pauses: Vec<(u32, u64)> = (0..7)
            .map(|_| b.failed())
            .map(|(n, p)| (n, p.as_millis() as u64))
            .collect();
        assert_eq!(
            pauses,
            [
                (1, 250),
                (2, 500),
                (3, 1000),
                (4, 2000),
                (5, 4000),
                (6, 5000),
                (7, 5000)
            ]
        );
        b.reset();
        assert_eq!(b.failed(), (1, RETRY_FIRST));
    }
}
