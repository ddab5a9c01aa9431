//! Loopback ports for processes restarted on the same address (a node restarted by hand where the
//! gateway already knows it, etcd on its data, a gateway behind a fixed front): picked *below* the
//! kernel's ephemeral range, from which the kernel hands a source port to every outgoing connection
//! (and a port to every bind of port 0). A port in that range is free only while nothing connects:
//! with a node down for a few seconds on a busy machine, an outgoing connection took its pinned
//! metrics port and the node could not start again ("Address already in use") until it closed.
//!
//! Owns the choice and the ports this process handed out (never twice). Must not start anything.

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::sync::Mutex;

use anyhow::Context;

/// The lowest port handed out (below it, well-known and registered services).
const LOWEST_PORT: u16 = 10_000;
/// Linux's default ephemeral range, when `/proc` does not say.
const DEFAULT_EPHEMERAL: (u16, u16) = (32_768, 60_999);
/// Fewest ports below the ephemeral range worth picking from; fewer, and the kernel picks.
const FEWEST_CANDIDATES: u16 = 1_000;
/// Random ports tried before the kernel picks.
const PICK_ATTEMPTS: usize = 256;

/// Ports this process handed out, so that two children never get the same one.
static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// The kernel's ephemeral port range (`/proc/sys/net/ipv4/ip_local_port_range`), or Linux's default.
pub fn ephemeral_range() -> (u16, u16) {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let mut bounds = text.split_whitespace().filter_map(|word| word.parse::<u16>().ok());
    match (bounds.next(), bounds.next()) {
        (Some(first), Some(last)) if first <= last => (first, last),
        _ => DEFAULT_EPHEMERAL,
    }
}

/// A free loopback port below the ephemeral range, not handed out before by this process (bound
/// once to check it is free, then released: the child binds it). When that range is too small,
/// or nothing in it is free after [`PICK_ATTEMPTS`] tries, a port the kernel picks, with a warning.
pub fn stable_loopback_addr() -> anyhow::Result<SocketAddr> {
    let (first_ephemeral, _) = ephemeral_range();
    if first_ephemeral >= LOWEST_PORT.saturating_add(FEWEST_CANDIDATES) {
        let mut handed_out = HANDED_OUT.lock().expect("ports lock");
        for _attempt in 0..PICK_ATTEMPTS {
            let port = rand::random_range(LOWEST_PORT..first_ephemeral);
            if handed_out.contains(&port) {
                continue;
            }
            if let Ok(listener) = TcpListener::bind((Ipv4Addr::LOCALHOST, port)) {
                handed_out.insert(port);
                return Ok(listener.local_addr()?);
            }
        }
    }
    tracing::warn!(first_ephemeral, "no free loopback port below the ephemeral range; the kernel picks one");
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("cannot find a free port on 127.0.0.1")?;
    Ok(listener.local_addr()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_below_the_ephemeral_range_distinct_and_free() {
        let (first_ephemeral, last_ephemeral) = ephemeral_range();
        assert!(first_ephemeral <= last_ephemeral);
        let addrs: Vec<SocketAddr> = (0..50).map(|_| stable_loopback_addr().unwrap()).collect();
        let ports: BTreeSet<u16> = addrs.iter().map(SocketAddr::port).collect();
        assert_eq!(ports.len(), 50, "never the same port twice: {ports:?}");
        for addr in &addrs {
            assert!(addr.ip().is_loopback());
            if first_ephemeral >= LOWEST_PORT + FEWEST_CANDIDATES {
                assert!((LOWEST_PORT..first_ephemeral).contains(&addr.port()), "{addr} in the ephemeral range");
            }
            TcpListener::bind(addr).unwrap_or_else(|e| panic!("{addr} is not free: {e}"));
        }
    }
}
