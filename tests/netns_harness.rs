//! The network-namespace harness itself: hosts reach each other and the root namespace, and
//! the lab leaves nothing behind.

mod common;

use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::netns::NetLab;

/// Whether `program` is on PATH.
fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

#[test]
#[ignore = "full tier: needs root (network namespaces) and redis-server"]
fn hosts_reach_redis_in_another_host_and_the_lab_cleans_up() {
    common::require(&[common::Need::Netns, common::Need::Redis]);
    let mut lab = NetLab::new("harness", 2);
    let port = lab.start_redis(0, None);
    let server = lab.host(0).addr;

    // From host 1, through the bridge.
    let mut ping = if on_path("redis-cli") {
        let mut c = lab.command(1, "redis-cli");
        c.args(["-h", &server.to_string(), "-p", &port.to_string(), "ping"]);
        c
    } else {
        let mut c = lab.command(1, "bash");
        c.arg("-c").arg(format!(
            "exec 3<>/dev/tcp/{server}/{port} && printf 'PING\\r\\n' >&3 && IFS= read -r l <&3 && printf '%s\\n' \"$l\""
        ));
        c
    };
    let out = ping.stdin(Stdio::null()).output().expect("run the ping");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && said.contains("PONG"),
        "ping from {} to {server}:{port}: {} {said:?} {:?}",
        lab.host(1).ns,
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );

    // From the root namespace (the test process).
    TcpStream::connect_timeout(&SocketAddr::from((server, port)), Duration::from_secs(2))
        .unwrap_or_else(|e| panic!("root namespace to {server}:{port}: {e}"));

    let names: Vec<String> = lab.hosts().iter().map(|h| h.ns.clone()).collect();
    drop(lab);
    let list = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    let list = String::from_utf8_lossy(&list.stdout);
    for name in &names {
        assert!(
            !list
                .lines()
                .any(|l| l.split_whitespace().next() == Some(name)),
            "namespace {name} still listed after the lab dropped:\n{list}"
        );
    }
}
