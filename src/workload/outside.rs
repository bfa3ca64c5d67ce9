//! What a workload that arrives from outside (a share sent through a hub, a job taken from a
//! queue) may ask of the host that runs it: the load, and nothing else. Whoever can write to a
//! shared Redis may choose the spec, but not run a command (`cmd:` needs the operator's
//! `--allow-commands`), not read a file of the host's (`read:` only of the random devices),
//! not write one (`--cmd-output`), and not aim the load at the host's own networks: an `http:`
//! target must resolve to a public address, or be listed in the operator's `--allow-targets`
//! (k6's `blacklistIPs`/`blockHostnames` are the anchor; here the list allows instead of
//! blocks, so that private and loopback ranges are refused unless the operator named them).
//!
//! The checks run before the spec is parsed by the same parser a user's spec goes through, so
//! that the parser never opens a file or resolves a host that the policy refuses.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, ToSocketAddrs};

use super::WorkloadOptions;

/// The files a `read:` workload from outside may read: devices with nothing of the host's in
/// them (the gil study's `io1` reads `/dev/urandom`).
pub const READABLE_FROM_OUTSIDE: [&str; 3] = ["/dev/urandom", "/dev/random", "/dev/zero"];

/// What the operator of a host lets others choose (`concur agent`'s and `concur jobs work`'s
/// `--allow-commands` and `--allow-targets`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Allowed {
    /// Whether `cmd:` workloads run (`--allow-commands`).
    pub commands: bool,
    /// Where `http:` load may go besides public addresses (`--allow-targets`).
    pub targets: Targets,
}

/// `--allow-targets`: host names and address ranges that load from outside may reach besides
/// public addresses.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Targets {
    rules: Vec<Rule>,
}

#[derive(Debug, Clone, PartialEq)]
enum Rule {
    /// A host name, as written in a URL (lowercase).
    Host(String),
    /// An address range: its first address and prefix length.
    Net(IpAddr, u8),
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::Host(h) => f.write_str(h),
            Rule::Net(ip, len) => write!(f, "{ip}/{len}"),
        }
    }
}

/// What `--allow-targets` takes, for error messages.
const TARGETS_ALLOWED: &str = "allowed: host names, addresses and CIDR ranges separated by commas, e.g. 10.0.0.0/8,192.168.1.20,loadtest.example.com";

impl Targets {
    /// Parses `--allow-targets`' value: comma-separated host names, IP addresses and CIDR
    /// ranges (`10.0.0.0/8`, `fd00::/8`).
    pub fn parse(list: &str) -> Result<Targets, String> {
        let mut rules = Vec::new();
        for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            rules.push(parse_rule(item)?);
        }
        if rules.is_empty() {
            return Err(format!(
                "--allow-targets '{list}' names nothing ({TARGETS_ALLOWED})"
            ));
        }
        Ok(Targets { rules })
    }

    /// Adds the rules of `other`.
    pub fn extend(&mut self, other: Targets) {
        self.rules.extend(other.rules);
    }

    /// Whether nothing is listed (only public addresses are reachable).
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Whether `host` (as a URL names it), resolving to `addrs`, may be reached.
    fn permits(&self, host: &str, addrs: &[IpAddr]) -> Result<(), String> {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if self
            .rules
            .iter()
            .any(|r| matches!(r, Rule::Host(h) if h.eq_ignore_ascii_case(host)))
        {
            return Ok(());
        }
        for ip in addrs {
            let listed = self.rules.iter().any(|r| match r {
                Rule::Net(net, len) => in_range(*ip, *net, *len),
                Rule::Host(_) => false,
            });
            if !listed && !is_public(*ip) {
                return Err(format!(
                    "the target '{host}' ({ip}) is a private, loopback or otherwise local address: this host sends load there only if its operator lists it in --allow-targets{}",
                    if self.rules.is_empty() {
                        String::new()
                    } else {
                        format!(
                            " (listed: {})",
                            self.rules
                                .iter()
                                .map(Rule::to_string)
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    }
                ));
            }
        }
        Ok(())
    }
}

impl fmt::Display for Targets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let all: Vec<String> = self.rules.iter().map(Rule::to_string).collect();
        f.write_str(&all.join(","))
    }
}

fn parse_rule(item: &str) -> Result<Rule, String> {
    if let Some((ip, len)) = item.split_once('/') {
        let ip: IpAddr = ip.parse().map_err(|_| {
            format!("--allow-targets '{item}': '{ip}' is not an IP address ({TARGETS_ALLOWED})")
        })?;
        let max = if ip.is_ipv4() { 32 } else { 128 };
        let len: u8 = len.parse().ok().filter(|l| *l <= max).ok_or_else(|| {
            format!("--allow-targets '{item}': the prefix length '{len}' must be from 0 to {max}")
        })?;
        return Ok(Rule::Net(ip, len));
    }
    if let Ok(ip) = item
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
    {
        return Ok(Rule::Net(ip, if ip.is_ipv4() { 32 } else { 128 }));
    }
    let name_ok = item.len() <= 253
        && item.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        });
    if !name_ok {
        return Err(format!("--allow-targets '{item}' is not a host name, an address or a range ({TARGETS_ALLOWED})"));
    }
    Ok(Rule::Host(item.to_ascii_lowercase()))
}

/// The address with IPv4-mapped IPv6 addresses seen as the IPv4 address they carry.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn in_range(ip: IpAddr, net: IpAddr, len: u8) -> bool {
    match (canonical(ip), canonical(net)) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = if len == 0 {
                0
            } else {
                u32::MAX << (32 - len.min(32))
            };
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = if len == 0 {
                0
            } else {
                u128::MAX << (128 - len.min(128))
            };
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

/// Whether `ip` is a public unicast address: not loopback, private (RFC 1918, unique local),
/// link-local, shared (RFC 6598), unspecified, broadcast, multicast or documentation. An IPv6
/// address that carries an IPv4 address (mapped, compatible, translated, NAT64, 6to4, Teredo)
/// is judged by every IPv4 address inside it too: `[::127.0.0.1]` and `[64:ff9b::7f00:1]`
/// reach this host's loopback on a stack that routes them.
pub fn is_public(ip: IpAddr) -> bool {
    match canonical(ip) {
        IpAddr::V4(v4) => !is_local_v4(v4),
        IpAddr::V6(v6) => !is_local_v6(v6) && embedded_v4(v6).iter().all(|v4| !is_local_v4(*v4)),
    }
}

/// The IPv4 addresses an IPv6 address carries: IPv4-compatible (`::a.b.c.d`, RFC 4291),
/// IPv4-translated (`::ffff:0:a.b.c.d`, RFC 2765), NAT64's well-known prefix
/// (`64:ff9b::/96`, RFC 6052), 6to4 (`2002:AABB:CCDD::/48`, RFC 3056), and Teredo's server and
/// client (`2001:0::/32`, RFC 4380: the client's address stored inverted). Mapped addresses
/// (`::ffff:a.b.c.d`) are turned into IPv4 by [`canonical`] before this is asked.
fn embedded_v4(ip: Ipv6Addr) -> Vec<Ipv4Addr> {
    let bits = u128::from(ip);
    let low32 = Ipv4Addr::from(bits as u32);
    let s = ip.segments();
    let mut out = Vec::new();
    // ::/96 but not :: and ::1, which is_local_v6 judges as they are.
    if bits >> 32 == 0 && bits > 1 {
        out.push(low32);
    }
    if bits >> 32 == 0xffff_0000 {
        out.push(low32);
    }
    if bits >> 32 == u128::from(u32::from_be_bytes([0, 0x64, 0xff, 0x9b])) << 64 {
        out.push(low32);
    }
    if s[0] == 0x2002 {
        out.push(Ipv4Addr::from(((s[1] as u32) << 16) | s[2] as u32));
    }
    if s[0] == 0x2001 && s[1] == 0 {
        out.push(Ipv4Addr::from(((s[2] as u32) << 16) | s[3] as u32));
        out.push(Ipv4Addr::from(!(bits as u32)));
    }
    out
}

fn is_local_v4(ip: Ipv4Addr) -> bool {
    let ranges: [(Ipv4Addr, u8); 12] = [
        (Ipv4Addr::new(0, 0, 0, 0), 8),
        (Ipv4Addr::new(10, 0, 0, 0), 8),
        (Ipv4Addr::new(100, 64, 0, 0), 10),
        (Ipv4Addr::new(127, 0, 0, 0), 8),
        (Ipv4Addr::new(169, 254, 0, 0), 16),
        (Ipv4Addr::new(172, 16, 0, 0), 12),
        (Ipv4Addr::new(192, 0, 0, 0), 24),
        (Ipv4Addr::new(192, 0, 2, 0), 24),
        (Ipv4Addr::new(192, 168, 0, 0), 16),
        (Ipv4Addr::new(198, 18, 0, 0), 15),
        (Ipv4Addr::new(198, 51, 100, 0), 24),
        (Ipv4Addr::new(203, 0, 113, 0), 24),
    ];
    ip.is_multicast()
        || ip.is_broadcast()
        || u32::from(ip) >= u32::from(Ipv4Addr::new(240, 0, 0, 0))
        || ranges
            .iter()
            .any(|(n, l)| in_range(IpAddr::V4(ip), IpAddr::V4(*n), *l))
}

fn is_local_v6(ip: Ipv6Addr) -> bool {
    let ranges: [(Ipv6Addr, u8); 6] = [
        (Ipv6Addr::UNSPECIFIED, 128),
        (Ipv6Addr::LOCALHOST, 128),
        (Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0), 7),
        (Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), 10),
        (Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0), 32),
        // NAT64's local-use prefix (RFC 8215): translated by a local gateway.
        (Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 0), 48),
    ];
    ip.is_multicast()
        || ranges
            .iter()
            .any(|(n, l)| in_range(IpAddr::V6(ip), IpAddr::V6(*n), *l))
}

/// Checks a workload spec and its options that came from outside against what the host's
/// operator allows; the spec still goes through [`super::parse`] afterwards. The reason
/// names the value and the flag that would allow it.
pub fn check(spec: &str, opts: &WorkloadOptions, allowed: &Allowed) -> Result<(), String> {
    let (name, args) = spec.split_once(':').unwrap_or((spec, ""));
    if opts.cmd_output.is_some() {
        return Err(
            "--cmd-output names a folder of this host, which only its own operator may choose"
                .into(),
        );
    }
    match name {
        "cmd" if !allowed.commands => Err(format!(
            "'{spec}' runs a command, which this host runs for others only when started with --allow-commands"
        )),
        "read" => {
            let path = match args.rsplit_once(':') {
                Some((p, shape)) if shape.contains('x') => p,
                _ => args,
            };
            if path.is_empty() || READABLE_FROM_OUTSIDE.contains(&path) {
                Ok(())
            } else {
                Err(format!(
                    "'{spec}' reads the file '{path}' of this host; work from elsewhere may read only {}",
                    READABLE_FROM_OUTSIDE.join(", ")
                ))
            }
        }
        "http" => check_target(args, opts, &allowed.targets),
        _ => Ok(()),
    }
}

/// Checks where an `http:` spec's load goes: every address its host resolves to must be
/// public or listed.
fn check_target(args: &str, opts: &WorkloadOptions, targets: &Targets) -> Result<(), String> {
    let connect = super::http::connect_address(args, opts.base_url.as_deref())?;
    let (host, _) = connect
        .rsplit_once(':')
        .ok_or_else(|| format!("the target '{connect}' names no port"))?;
    let addrs: Vec<IpAddr> = connect
        .to_socket_addrs()
        .map_err(|e| format!("the target '{host}' does not resolve: {e}"))?
        .map(|a| a.ip())
        .collect();
    if addrs.is_empty() {
        return Err(format!("the target '{host}' resolves to no address"));
    }
    targets.permits(host, &addrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(base: Option<&str>) -> WorkloadOptions {
        WorkloadOptions {
            base_url: base.map(str::to_string),
            ..WorkloadOptions::default()
        }
    }

    #[test]
    fn commands_files_and_folders_are_the_hosts_own() {
        let none = Allowed::default();
        let o = opts(None);
        assert!(check("cmd:touch /tmp/x", &o, &none)
            .unwrap_err()
            .contains("--allow-commands"));
        let commands = Allowed {
            commands: true,
            ..Allowed::default()
        };
        assert!(check("cmd:true", &o, &commands).is_ok());
        assert!(check("read:/etc/shadow:1x1", &o, &commands)
            .unwrap_err()
            .contains("/etc/shadow"));
        assert!(check("read:/etc/shadow", &o, &none).is_err());
        assert!(check("read", &o, &none).is_ok());
        assert!(check("read:/dev/urandom:1024x100", &o, &none).is_ok());
        assert!(check("fib:20", &o, &none).is_ok());
        let out = WorkloadOptions {
            cmd_output: Some("/etc".into()),
            ..o
        };
        assert!(check("fib:20", &out, &commands)
            .unwrap_err()
            .contains("--cmd-output"));
    }

    #[test]
    fn local_targets_need_listing_and_public_ones_do_not() {
        let none = Allowed::default();
        for url in [
            "http://127.0.0.1:8080/x",
            "http://10.1.2.3/",
            "http://[::1]:9/",
            "http://192.168.0.1/",
            "http://169.254.169.254/latest/meta-data",
            "http://[::ffff:127.0.0.1]/",
            "http://0.0.0.0:80/",
        ] {
            let e = check(&format!("http:{url}"), &opts(None), &none).unwrap_err();
            assert!(e.contains("--allow-targets"), "{url}: {e}");
        }
        assert!(check("http:/delay/1ms", &opts(Some("http://127.0.0.1:9")), &none).is_err());
        assert!(check("http:http://93.184.216.34/", &opts(None), &none).is_ok());
        let listed = Allowed {
            commands: false,
            targets: Targets::parse("10.0.0.0/8, 127.0.0.1").unwrap(),
        };
        assert!(check("http:http://10.200.0.1:81/", &opts(None), &listed).is_ok());
        assert!(check("http:/add", &opts(Some("http://127.0.0.1:9")), &listed).is_ok());
        let e = check("http:http://127.0.0.2/", &opts(None), &listed).unwrap_err();
        assert!(e.contains("listed: 10.0.0.0/8, 127.0.0.1/32"), "{e}");
        let by_name = Allowed {
            commands: false,
            targets: Targets::parse("localhost").unwrap(),
        };
        assert!(check("http:http://LOCALHOST:9/", &opts(None), &by_name).is_ok());
    }

    #[test]
    fn allow_targets_names_what_it_refuses() {
        for bad in [
            "",
            " , ",
            "10.0.0.0/33",
            "x/8",
            "a b",
            "::1/129",
            "bad_name",
        ] {
            let e = Targets::parse(bad).unwrap_err();
            assert!(e.contains("--allow-targets"), "{bad}: {e}");
        }
        assert_eq!(
            Targets::parse("10.0.0.0/8,fd00::/8,[::1],h.example")
                .unwrap()
                .to_string(),
            "10.0.0.0/8,fd00::/8,::1/128,h.example"
        );
    }

    /// Review row 11: an IPv6 spelling of a private IPv4 address passed as public.
    #[test]
    fn ipv6_addresses_are_judged_by_the_ipv4_addresses_they_carry() {
        let public = |a: &str| is_public(a.parse::<IpAddr>().unwrap());
        for local in [
            "::127.0.0.1",
            "::ffff:127.0.0.1",
            "::ffff:0:7f00:1",
            "64:ff9b::7f00:1",
            "64:ff9b::a00:1",
            "64:ff9b:1::808:808",
            "2002:7f00:1::1",
            "2002:c0a8:101::",
            // Teredo: server 8.8.8.8, client 127.0.0.1 (stored inverted: 0x80ff_fffe).
            "2001:0:808:808::80ff:fffe",
            // Teredo: server 10.0.0.1, client 8.8.8.8.
            "2001:0:a00:1::f7f7:f7f7",
        ] {
            assert!(!public(local), "{local} passed as public");
        }
        for p in [
            "64:ff9b::808:808",
            "2002:808:808::1",
            "2001:0:808:808::f7f7:f7f7",
            "2606:4700::1111",
            "8.8.8.8",
        ] {
            assert!(public(p), "{p} refused as local");
        }
        assert!(!public("::"));
        assert!(!public("::1"));
    }
}
