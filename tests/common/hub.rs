//! A hub on loopback for the tests: a `redis-server` of the test's own and the agents it
//! starts, all killed when dropped.

#![allow(dead_code)]

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{concur, free_port, wait_for};

/// What a loaded two-core machine may add to a hub mechanism's own bound: process starts,
/// Redis round trips and the test's own polling, on cores shared with other tests (which the
/// timing tests keep out with `common::alone()`, though builds and lighter tests may run).
pub const LOADED_MARGIN: Duration = Duration::from_secs(2);

/// The longest a study may take, from the moment one of its agents is killed while holding
/// its share, to writing that run's line, when the other shares take `share_wall` each:
/// - the others end by `LEAD` (`concur::hub::executor::LEAD`: how far ahead the common start
///   is announced, and the victim held its work, so the start was at most that far off) plus
///   `share_wall`;
/// - the victim's heartbeat key, renewed every `BEAT` with a life of `LOST_AFTER`
///   (`concur::hub`), expires at most `LOST_AFTER` after the kill, and the study looks at it
///   every turn of its wait (20 ms when its list is empty: the executor's `EMPTY_WAIT`);
/// - plus [`LOADED_MARGIN`].
///
/// A study that never noticed the loss would wait `LEAD` + the run's timeout + 2.5 s (the
/// executor's `ANSWER_MARGIN`), past this bound.
pub fn loss_bound(share_wall: Duration) -> Duration {
    use concur::hub::{executor::LEAD, BEAT, LOST_AFTER};
    // The heartbeat outlives several beats: one missed renewal alone does not lose an agent.
    assert!(
        LOST_AFTER >= 2 * BEAT,
        "{LOST_AFTER:?} against a beat of {BEAT:?}"
    );
    (LEAD + share_wall).max(LOST_AFTER) + Duration::from_millis(20) + LOADED_MARGIN
}

/// A `redis-server` of the test's own on a free loopback port, and the agents it starts,
/// all killed when dropped.
pub struct Hub {
    pub port: u16,
    password: Option<String>,
    redis: Child,
    pub agents: Vec<(String, Child)>,
}

impl Hub {
    /// Starts it and returns once it answers PING as Redis (`+PONG`, or `-NOAUTH` with a
    /// password): a free port can be taken between our choosing it and the server's binding
    /// it, so a server that exits is started again on another port, and a mere TCP connect
    /// (which a self-connection can fake) is not taken for an answer.
    pub fn start(password: Option<&str>) -> Hub {
        for _ in 0..5 {
            let port = free_port();
            if let Some(redis) = redis_on(port, password) {
                return Hub {
                    port,
                    password: password.map(str::to_string),
                    redis,
                    agents: Vec::new(),
                };
            }
        }
        panic!("redis-server did not start on 5 free ports in a row");
    }

    /// Starts a hub on `port`, which the test chose (an agent may already be waiting for
    /// it); `None` if the server exited (the port was taken).
    pub fn start_on(port: u16) -> Option<Hub> {
        redis_on(port, None).map(|redis| Hub {
            port,
            password: None,
            redis,
            agents: Vec::new(),
        })
    }

    /// Kills the Redis server (its data goes: it saves nothing) and starts a new one on the
    /// same port, as a restart would.
    pub fn restart(&mut self) {
        let _ = self.redis.kill();
        let _ = self.redis.wait();
        for _ in 0..50 {
            if let Some(r) = redis_on(self.port, self.password.as_deref()) {
                self.redis = r;
                return;
            }
        }
        panic!("redis-server did not start again on port {}", self.port);
    }

    /// Kills the Redis server, leaves the port closed for `outage`, then starts a new one
    /// on the same port (its data gone), as a restart that takes that long would.
    pub fn restart_after(&mut self, outage: Duration) {
        self.stop();
        let down = std::time::Instant::now();
        wait_for(
            "the outage to last",
            outage + Duration::from_secs(1),
            || down.elapsed() >= outage,
        );
        self.restart();
    }

    /// Kills the Redis server (its data goes) and leaves the port closed.
    pub fn stop(&mut self) {
        let _ = self.redis.kill();
        let _ = self.redis.wait();
    }

    /// The agents' flags for a study whose delay server is on loopback, as every test hub's
    /// is: load from a hub goes to loopback only when the agent's operator lists it.
    pub const LOOPBACK: [&'static str; 2] = ["--allow-targets", "127.0.0.1"];

    pub fn url(&self) -> String {
        match &self.password {
            Some(p) => format!("redis://:{p}@127.0.0.1:{}/0", self.port),
            None => format!("redis://127.0.0.1:{}/0", self.port),
        }
    }

    /// Starts `concur agent --name NAME` (with `extra` flags), the hub given in CONCUR_HUB,
    /// allowed to send load to loopback ([`Hub::LOOPBACK`]), where the tests' servers are.
    pub fn agent(&mut self, name: &str, extra: &[&str]) -> u32 {
        let mut flags = Self::LOOPBACK.to_vec();
        flags.extend_from_slice(extra);
        self.agent_with(name, &flags)
    }

    /// Starts `concur agent --name NAME` with exactly the flags `extra`.
    pub fn agent_with(&mut self, name: &str, extra: &[&str]) -> u32 {
        let child = Command::new(env!("CARGO_BIN_EXE_concur"))
            .args(["agent", "--name", name, "--quiet"])
            .args(extra)
            .env("CONCUR_HUB", self.url())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("concur agent starts");
        let pid = child.id();
        self.agents.push((name.to_string(), child));
        pid
    }

    /// A connection of the test's own to the hub's Redis.
    pub fn connect(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .unwrap()
            .get_connection()
            .unwrap()
    }

    pub fn redis_cli(&self, args: &[&str]) {
        let mut c = Command::new("redis-cli");
        c.args(["-p", &self.port.to_string()]);
        if let Some(p) = &self.password {
            c.args(["-a", p, "--no-auth-warning"]);
        }
        let out = c.args(args).output().expect("redis-cli runs");
        assert!(out.status.success(), "{out:?}");
    }
}

/// A `redis-server` on `port` that answers, or `None` if it exited.
fn redis_on(port: u16, password: Option<&str>) -> Option<Child> {
    let mut cmd = Command::new("redis-server");
    cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(p) = password {
        cmd.args(["--requirepass", p]);
    }
    let mut redis = cmd
        .spawn()
        .expect("redis-server must be installed (.ci/run installs it)");
    let mut exited = false;
    wait_for("redis-server to answer", Duration::from_secs(20), || {
        exited = redis.try_wait().ok().flatten().is_some();
        exited || answers_ping(port)
    });
    (!exited).then_some(redis)
}

/// Whether a Redis server answers PING on `port` (`+PONG`, or `-NOAUTH` when it wants a
/// password).
fn answers_ping(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut buf = [0u8; 64];
    s.write_all(b"PING\r\n").is_ok()
        && s.read(&mut buf).is_ok_and(|n| {
            let reply = &buf[..n];
            reply.starts_with(b"+PONG") || reply.starts_with(b"-NOAUTH")
        })
}

impl Drop for Hub {
    fn drop(&mut self) {
        for (_, a) in &mut self.agents {
            let _ = a.kill();
            let _ = a.wait();
        }
        let _ = self.redis.kill();
        let _ = self.redis.wait();
    }
}

/// The hub's clock (Redis `TIME`), in nanoseconds since the epoch.
pub fn hub_now_ns(c: &mut redis::Connection) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(c).unwrap();
    s * 1_000_000_000 + us * 1000
}

/// Writes `text` as agent `name`'s heartbeat (for 300 s) and lists it among the agents, as an
/// agent announces itself: how the tests plant an agent of their own.
pub fn announce(c: &mut redis::Connection, name: &str, text: &str) {
    let _: () = redis::cmd("SET")
        .arg(format!("concur:hub:agent:{name}"))
        .arg(text)
        .arg("EX")
        .arg(300)
        .query(c)
        .unwrap();
    let _: i64 = redis::cmd("SADD")
        .arg("concur:hub:agents")
        .arg(name)
        .query(c)
        .unwrap();
}

/// Writes a key with `concur hub keygen --out DIR/NAME.key`: its file and public key.
pub fn keygen(dir: &std::path::Path, name: &str) -> (std::path::PathBuf, String) {
    let path = dir.join(format!("{name}.key"));
    let out = concur()
        .args(["hub", "keygen", "--out"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let public = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(public.starts_with("concur-ed25519:"), "{public}");
    (path, public)
}
