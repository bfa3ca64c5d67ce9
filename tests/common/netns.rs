//! Stand-in "hosts" for integration tests, made of Linux network namespaces.
//!
//! A [`NetLab`] holds `n` namespaces, each with one end of a veth pair (named `eth0` inside);
//! the other ends hang on a bridge in the root namespace, and the bridge has an address in the
//! lab's /24 too, so the test process reaches every host and the hosts reach each other and it.
//!
//! Labs of parallel tests never collide: names carry the process id and a per-process counter
//! (pids are unique among live processes), and the /24 is chosen under a system-wide file lock
//! among those no root-namespace address or route uses yet (the bridge's address then claims
//! it). Leftovers of crashed runs (names whose pid is dead, or an exact name reused) are
//! deleted when the next lab is made.

#![allow(dead_code)]

use std::ffi::OsStr;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// One stand-in host: its namespace and its address on the lab's bridge.
#[derive(Debug, Clone)]
pub struct Host {
    pub ns: String,
    pub addr: Ipv4Addr,
}

/// Namespaces, veths and a bridge, plus the children started in them; all of it goes when
/// the lab drops (also when the test panicked).
#[derive(Debug)]
pub struct NetLab {
    ip: String,
    bridge: String,
    root_addr: Ipv4Addr,
    hosts: Vec<Host>,
    /// Root-namespace ends of the veth pairs made so far.
    veths: Vec<String>,
    /// Namespaces made so far (a host is pushed only once fully set up).
    namespaces: Vec<String>,
    bridge_made: bool,
    children: Vec<Child>,
}

/// Labs made by this process so far (part of every name).
static LABS: AtomicU32 = AtomicU32::new(0);

/// Prefixes of what labs create, for the sweep of dead runs' leftovers.
const NS_PREFIX: &str = "concur-";
const BRIDGE_PREFIX: &str = "cb";
/// The port [`NetLab::start_redis`] listens on (each namespace has its own ports).
pub const REDIS_PORT: u16 = 6379;

impl NetLab {
    /// Builds `hosts` namespaces on one bridge (see the module docs); panics, saying why,
    /// when namespaces cannot be made here (not root, no `ip`): its tests are full-tier ones
    /// (`common::Need::Netns`).
    pub fn new(tag: &str, hosts: usize) -> NetLab {
        assert!(
            (1..=250).contains(&hosts),
            "a lab has 1 to 250 hosts, not {hosts}"
        );
        let ip = usable_ip().unwrap_or_else(|why| panic!("network namespaces unavailable: {why}"));
        let pid = std::process::id();
        let n = LABS.fetch_add(1, Ordering::Relaxed) % 0x1000;
        // <= 2 + 7 + 1 + 3 = 13 characters (pids are at most 2^22).
        let bridge = format!("{BRIDGE_PREFIX}{pid:x}-{n:x}");
        let tag: String = tag
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .take(24)
            .collect();
        let mut lab = NetLab {
            ip,
            bridge,
            root_addr: Ipv4Addr::UNSPECIFIED,
            hosts: Vec::new(),
            veths: Vec::new(),
            namespaces: Vec::new(),
            bridge_made: false,
            children: Vec::new(),
        };
        let ns_names: Vec<String> = (0..hosts)
            .map(|i| format!("{NS_PREFIX}{pid}-{n}-{i}-{tag}"))
            .collect();
        let veth_names: Vec<String> = (0..hosts)
            // <= 2 + 7 + 1 + 3 + 2 = 15 characters.
            .map(|i| format!("cv{pid:x}-{n:x}{i:02x}"))
            .collect();

        // Claim a /24 under the lock: sweep dead runs' leftovers, pick a free subnet, and give
        // the bridge its address before anyone else looks.
        let (a, b) = {
            let _lock = system_lock();
            lab.sweep_dead();
            // Exact names reused (this pid, from a crashed earlier run).
            lab.quiet(&["link", "del", &lab.bridge]);
            for (ns, veth) in ns_names.iter().zip(&veth_names) {
                lab.quiet(&["link", "del", veth]);
                lab.quiet(&["netns", "del", ns]);
            }
            let (a, b) = lab.free_subnet(pid, n);
            lab.root_addr = Ipv4Addr::new(10, a, b, 1);
            lab.bridge_made = true;
            lab.run(&["link", "add", &lab.bridge, "type", "bridge"]);
            lab.run(&[
                "addr",
                "add",
                &format!("{}/24", lab.root_addr),
                "dev",
                &lab.bridge,
            ]);
            (a, b)
        };
        lab.run(&["link", "set", &lab.bridge, "up"]);

        for (i, (ns, veth)) in ns_names.into_iter().zip(veth_names).enumerate() {
            let addr = Ipv4Addr::new(10, a, b, 2 + i as u8);
            lab.namespaces.push(ns.clone());
            lab.run(&["netns", "add", &ns]);
            lab.veths.push(veth.clone());
            lab.run(&[
                "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ]);
            lab.run(&["link", "set", &veth, "master", &lab.bridge, "up"]);
            lab.run(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                "eth0",
            ]);
            lab.run(&["-n", &ns, "link", "set", "eth0", "up"]);
            lab.run(&["-n", &ns, "link", "set", "lo", "up"]);
            let root = lab.root_addr.to_string();
            lab.run(&["-n", &ns, "route", "add", "default", "via", &root]);
            lab.hosts.push(Host { ns, addr });
        }
        lab
    }

    pub fn host(&self, i: usize) -> &Host {
        &self.hosts[i]
    }

    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    /// The bridge's address in the root namespace (what a host dials to reach the test process).
    pub fn root_addr(&self) -> Ipv4Addr {
        self.root_addr
    }

    /// `ip netns exec NS program` for host `i`: the caller adds arguments, env and stdio.
    /// (`ip netns exec` execs the program, so the child's pid is the program's.)
    pub fn command(&self, i: usize, program: impl AsRef<OsStr>) -> Command {
        let mut c = Command::new(&self.ip);
        c.args(["netns", "exec", &self.hosts[i].ns]).arg(program);
        c
    }

    /// Spawns `cmd` in a process group of its own and keeps the child; the group is killed
    /// (SIGKILL) and the child reaped when the lab drops. The group, not the pid: a wrapper
    /// such as `faketime` starts the agent as its child, which killing the wrapper alone
    /// leaves running (and an agent outlives its hub on purpose).
    pub fn spawn(&mut self, mut cmd: Command) -> u32 {
        use std::os::unix::process::CommandExt;
        let child = cmd
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {cmd:?}: {e}"));
        let pid = child.id();
        self.children.push(child);
        pid
    }

    /// Kills the kept child `pid` now (SIGKILL) and reaps it.
    pub fn kill(&mut self, pid: u32) {
        let at = self
            .children
            .iter()
            .position(|c| c.id() == pid)
            .unwrap_or_else(|| panic!("no kept child with pid {pid}"));
        let mut child = self.children.swap_remove(at);
        kill_group(&mut child);
    }

    /// Starts redis-server in host `i` on its address and [`REDIS_PORT`] (no persistence,
    /// `--requirepass` when `password` is given), kept like [`NetLab::spawn`]; returns once a
    /// TCP connect from the root namespace succeeds (panics after 10 s, or when it exits).
    pub fn start_redis(&mut self, i: usize, password: Option<&str>) -> u16 {
        let addr = self.hosts[i].addr;
        let mut cmd = self.command(i, "redis-server");
        cmd.args(["--bind", &addr.to_string()])
            .args(["--port", &REDIS_PORT.to_string()])
            .args(["--save", "", "--appendonly", "no"])
            // Newer versions refuse non-loopback clients without a password otherwise.
            .args(["--protected-mode", "no"])
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        if let Some(p) = password {
            cmd.args(["--requirepass", p]);
        }
        let pid = self.spawn(cmd);
        let target = SocketAddr::from((addr, REDIS_PORT));
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if TcpStream::connect_timeout(&target, Duration::from_millis(250)).is_ok() {
                return REDIS_PORT;
            }
            let child = self
                .children
                .iter_mut()
                .find(|c| c.id() == pid)
                .expect("redis child kept");
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "redis-server in {} exited early: {status}",
                    self.hosts[i].ns
                );
            }
            assert!(
                Instant::now() < deadline,
                "redis-server in {} not accepting on {target} after 10 s",
                self.hosts[i].ns
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Runs `ip ARGS`, panicking with the command and its stderr when it fails.
    fn run(&self, args: &[&str]) {
        let out = Command::new(&self.ip)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("running {} {}: {e}", self.ip, args.join(" ")));
        assert!(
            out.status.success(),
            "{} {} failed ({}): {}",
            self.ip,
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }

    /// Runs `ip ARGS`, ignoring failure.
    fn quiet(&self, args: &[&str]) {
        let _ = Command::new(&self.ip)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }

    /// `ip ARGS`'s stdout ("" when it fails).
    fn read(&self, args: &[&str]) -> String {
        Command::new(&self.ip)
            .args(args)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    /// Deletes namespaces and bridges of labs whose process is gone.
    fn sweep_dead(&self) {
        let dead = |pid: &str| {
            pid.parse::<u32>().is_ok() && !std::path::Path::new(&format!("/proc/{pid}")).exists()
        };
        for line in self.read(&["netns", "list"]).lines() {
            let name = line.split_whitespace().next().unwrap_or("");
            if let Some(rest) = name.strip_prefix(NS_PREFIX) {
                if dead(rest.split('-').next().unwrap_or("")) {
                    self.quiet(&["netns", "del", name]);
                }
            }
        }
        for line in self.read(&["-o", "link", "show", "type", "bridge"]).lines() {
            // "12: cb1a2b-3: <BROADCAST,...> ..."
            let name = line.split(':').nth(1).unwrap_or("").trim();
            let Some(rest) = name.strip_prefix(BRIDGE_PREFIX) else {
                continue;
            };
            let Some((pid, n)) = rest.split_once('-') else {
                continue;
            };
            if n.is_empty() || !n.chars().all(|c| c.is_ascii_hexdigit()) {
                continue;
            }
            if let Ok(pid) = u32::from_str_radix(pid, 16) {
                if dead(&pid.to_string()) {
                    self.quiet(&["link", "del", name]);
                }
            }
        }
    }

    /// A 10.a.b.0/24 (a in 200..250) no root-namespace address or route touches, starting the
    /// search at a place derived from the pid and lab counter.
    fn free_subnet(&self, pid: u32, n: u32) -> (u8, u8) {
        let addrs = self.read(&["-4", "-o", "addr", "show"]);
        let routes = self.read(&["-4", "route", "show", "table", "all"]);
        let used = |a: u8, b: u8| {
            let prefix = format!("10.{a}.{b}.");
            let in_addrs = addrs.lines().any(|l| {
                l.split_whitespace()
                    .skip_while(|w| *w != "inet")
                    .nth(1)
                    .is_some_and(|w| w.starts_with(&prefix))
            });
            let in_routes = routes
                .lines()
                .any(|l| l.split_whitespace().any(|w| w.starts_with(&prefix)));
            in_addrs || in_routes
        };
        const COUNT: u32 = 50 * 256;
        let start = (pid % 50) * 256 + n % 256;
        (0..COUNT)
            .map(|k| (start + k) % COUNT)
            .map(|s| ((200 + s / 256) as u8, (s % 256) as u8))
            .find(|&(a, b)| !used(a, b))
            .expect("no free 10.200-249.x.0/24 subnet left")
    }
}

impl Drop for NetLab {
    fn drop(&mut self) {
        for mut child in self.children.drain(..) {
            kill_group(&mut child);
        }
        for veth in &self.veths {
            self.quiet(&["link", "del", veth]);
        }
        for ns in &self.namespaces {
            self.quiet(&["netns", "del", ns]);
        }
        if self.bridge_made {
            self.quiet(&["link", "del", &self.bridge]);
        }
    }
}

/// The `ip` program when this process may make namespaces, or why not.
fn usable_ip() -> Result<String, String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("reading /proc/self/status: {e}"))?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
            .unwrap_or("")
            .to_string()
    };
    let euid = field("Uid:")
        .split_whitespace()
        .nth(1)
        .unwrap_or("")
        .to_string();
    if euid != "0" {
        return Err(format!("not running as root (euid {euid})"));
    }
    let caps = u64::from_str_radix(&field("CapEff:"), 16).unwrap_or(0);
    const CAP_NET_ADMIN: u64 = 1 << 12;
    const CAP_SYS_ADMIN: u64 = 1 << 21;
    if caps & (CAP_NET_ADMIN | CAP_SYS_ADMIN) != CAP_NET_ADMIN | CAP_SYS_ADMIN {
        return Err(format!(
            "missing CAP_NET_ADMIN or CAP_SYS_ADMIN (CapEff {caps:x})"
        ));
    }
    let candidates = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("ip"))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
        .into_iter()
        .chain([
            "/usr/sbin/ip".into(),
            "/sbin/ip".into(),
            "/usr/bin/ip".into(),
        ]);
    for path in candidates {
        if !path.is_file() {
            continue;
        }
        let works = Command::new(&path)
            .arg("-V")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if works {
            return Ok(path.to_string_lossy().into_owned());
        }
    }
    Err("no working `ip` (iproute2) found".to_string())
}

/// An exclusive lock shared by every process on the machine, held while a lab claims names and
/// a subnet.
fn system_lock() -> std::fs::File {
    let open = |dir: std::path::PathBuf| {
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join("concur-netlab.lock"))
    };
    let file = open("/run/lock".into())
        .or_else(|_| open("/run".into()))
        .or_else(|_| open(std::env::temp_dir()))
        .unwrap_or_else(|e| panic!("opening the netlab lock file: {e}"));
    file.lock()
        .unwrap_or_else(|e| panic!("locking the netlab lock file: {e}"));
    file
}

/// Kills the process group `child` leads (SIGKILL), then `child` itself, and reaps it.
fn kill_group(child: &mut std::process::Child) {
    // SAFETY: kill takes a process group id and a signal; a group that is gone is ESRCH.
    unsafe {
        libc::kill(-(child.id() as i32), libc::SIGKILL);
    }
    let _ = child.kill();
    let _ = child.wait();
}
