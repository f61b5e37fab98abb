//! The addresses of this machine's own network interfaces, which `fetch_url` must not reach
//! (see [`super::net_guard`]): a service bound to `0.0.0.0` answers on the machine's eth0
//! address as it does on loopback, and on a server with a public address that address passes
//! every range check.
//!
//! They are read with `getifaddrs(3)` at every check, so an address that came up a moment ago
//! (DHCP, a VPN, a new container network) is refused as soon as it exists: one netlink dump,
//! microseconds beside the request it guards. `getifaddrs` is the POSIX call (`ip addr` reads
//! the same kernel list): every address of every interface, both families, aliases included.
//! The alternatives fall short: `/proc/net` lists IPv6 addresses (`if_inet6`) but IPv4 ones
//! only inside a routing-table dump (`fib_trie`), and connecting a UDP socket reveals one
//! source address, for one route. `libc` was already built for tokio and getrandom.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Every address of every interface of this machine, loopback included, as it is now.
#[cfg(unix)]
pub(crate) fn host_addresses() -> std::io::Result<Vec<IpAddr>> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: on success `list` is a linked list owned by us until `freeifaddrs`, below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut addresses = Vec::new();
    let mut node = list;
    while !node.is_null() {
        // SAFETY: `node` is an element of the list, which is not freed yet.
        let entry = unsafe { &*node };
        // SAFETY: a non-null `ifa_addr` points to a socket address of the family it names,
        // which has at least the size of that family's address struct.
        if let Some(address) = unsafe { entry.ifa_addr.as_ref() }.and_then(|addr| unsafe {
            match i32::from(addr.sa_family) {
                libc::AF_INET => {
                    let v4 = &*(entry.ifa_addr as *const libc::sockaddr_in);
                    Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(v4.sin_addr.s_addr))))
                }
                libc::AF_INET6 => {
                    let v6 = &*(entry.ifa_addr as *const libc::sockaddr_in6);
                    Some(IpAddr::V6(Ipv6Addr::from(v6.sin6_addr.s6_addr)))
                }
                _ => None,
            }
        }) {
            addresses.push(address);
        }
        node = entry.ifa_next;
    }
    // SAFETY: `list` came from `getifaddrs` and is freed once; nothing borrowed from it is
    // kept (the addresses were copied).
    unsafe { libc::freeifaddrs(list) };
    Ok(addresses)
}

/// Elsewhere the interfaces are not listed: only the range checks apply.
#[cfg(not(unix))]
pub(crate) fn host_addresses() -> std::io::Result<Vec<IpAddr>> {
    Ok(Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_among_this_hosts_addresses() {
        let addresses = host_addresses().unwrap();
        assert!(
            addresses.contains(&IpAddr::V4(Ipv4Addr::LOCALHOST)),
            "{addresses:?}"
        );
    }
}
