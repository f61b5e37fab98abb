//! Keeps `fetch_url` on the public internet.
//!
//! A model can be talked into fetching `http://169.254.169.254/` or `http://localhost:8080/admin`
//! (server-side request forgery). Three doors are closed: literal IP hosts in the URL (in any
//! spelling: the WHATWG URL parser already normalises decimal and octal forms such as
//! `http://2130706433/` to `127.0.0.1`), host names, whose addresses are checked inside the HTTP
//! client's own resolver (so the address checked is the address connected to, leaving no DNS
//! rebinding window), and every redirect hop. Besides the non-public ranges, every address of
//! this machine's own interfaces is refused (see [`super::host_addrs`]): on a server with a
//! public address, the services it runs are one `http://<its address>:<port>/` away.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use super::host_addrs::host_addresses;

/// Whether an address is on the public internet. Everything else is refused: loopback,
/// private, link-local, CGNAT, multicast, documentation, benchmarking, reserved, and IPv6
/// outside global unicast (which includes IPv4-mapped, NAT64 and unique-local addresses).
pub fn is_public_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    let refused = ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_multicast()
        || ip.is_broadcast()
        || ip.is_documentation()
        || a == 0 // "this network"
        || (a == 100 && (64..128).contains(&b)) // CGNAT 100.64/10
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // benchmarking 198.18/15
        || a >= 240; // reserved 240/4
    !refused
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let segments = ip.segments();
    // Only global unicast (2000::/3) is public; of it, refuse documentation (2001:db8::/32),
    // Teredo (2001::/32) and 6to4 (2002::/16), which tunnel to arbitrary IPv4 addresses.
    let global_unicast = segments[0] & 0xe000 == 0x2000;
    let documentation = segments[0] == 0x2001 && segments[1] == 0x0db8;
    let teredo = segments[0] == 0x2001 && segments[1] == 0;
    let six_to_four = segments[0] == 0x2002;
    global_unicast && !documentation && !teredo && !six_to_four
}

/// Checks a URL before it is requested: scheme, and the host if it is a literal address.
pub(crate) fn check_url(url: &Url, allow_private: bool) -> Result<(), String> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "only http and https URLs can be fetched, not {}:",
            url.scheme()
        ));
    }
    let ip = match url.host() {
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip),
        Some(url::Host::Domain(domain)) => {
            let domain = domain.trim_end_matches('.');
            if !allow_private && (domain == "localhost" || domain.ends_with(".localhost")) {
                return Err(format!("{domain} is not a public host"));
            }
            return Ok(());
        }
        None => return Err("the URL has no host".to_string()),
    };
    if allow_private {
        return Ok(());
    }
    if is_own(ip, &own_addresses()?) {
        return Err(format!("{ip} is an address of this host, not a public one"));
    }
    if is_public_ip(ip) {
        Ok(())
    } else {
        Err(format!("{ip} is not a public address"))
    }
}

/// Whether `ip` is one of `own` (this host's addresses), in any spelling of it.
fn is_own(ip: IpAddr, own: &[IpAddr]) -> bool {
    own.contains(&ip.to_canonical())
}

/// This host's addresses as they are now; without them no fetch is checked, so none is made.
fn own_addresses() -> Result<Vec<IpAddr>, String> {
    host_addresses()
        .map_err(|e| format!("cannot list this host's own addresses to avoid them: {e}"))
}

/// Most redirect hops `fetch_url` follows.
pub(crate) const MAX_REDIRECTS: usize = 5;

/// Whether a redirect to `url` may be followed after `hops` earlier ones: within
/// [`MAX_REDIRECTS`], and to a URL [`check_url`] accepts (the guarded resolver then checks the
/// addresses of a host name).
pub(crate) fn check_redirect(hops: usize, url: &Url, allow_private: bool) -> Result<(), String> {
    if hops >= MAX_REDIRECTS {
        return Err(format!("more than {MAX_REDIRECTS} redirects"));
    }
    check_url(url, allow_private).map_err(|why| format!("redirect refused: {why}"))
}

/// The fetch client's resolver: the system resolver, minus every non-public answer and every
/// address of this host.
pub(crate) struct PublicOnlyResolver;

impl Resolve for PublicOnlyResolver {
    fn resolve(&self, name: Name) -> Resolving {
        Box::pin(async move {
            let host = name.as_str().to_string();
            let resolved = tokio::net::lookup_host((host.as_str(), 0)).await?;
            let own = own_addresses()?;
            let addrs: Vec<SocketAddr> = resolved
                .filter(|addr| is_public_ip(addr.ip()) && !is_own(addr.ip(), &own))
                .collect();
            if addrs.is_empty() {
                return Err(format!(
                    "{host} does not resolve to a public address other than this host's own"
                )
                .into());
            }
            let addrs: Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
}

/// The HTTP client `fetch_url` uses: guarded resolver, guarded redirects, no proxy (a proxy
/// would resolve names itself, behind our back).
pub(crate) fn guarded_client(
    timeout: std::time::Duration,
    allow_private: bool,
) -> reqwest::Result<reqwest::Client> {
    let policy = reqwest::redirect::Policy::custom(move |attempt| {
        match check_redirect(attempt.previous().len(), attempt.url(), allow_private) {
            Ok(()) => attempt.follow(),
            Err(why) => attempt.error(why),
        }
    });
    let mut builder = reqwest::Client::builder()
        .timeout(timeout)
        .redirect(policy)
        .no_proxy()
        .user_agent(concat!("Heurist/", env!("CARGO_PKG_VERSION")));
    if !allow_private {
        builder = builder.dns_resolver(Arc::new(PublicOnlyResolver));
    }
    builder.build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        struct Case {
            name: &'static str,
            ip: &'static str,
            public: bool,
        }
        let cases = [
            Case {
                name: "public v4",
                ip: "93.184.216.34",
                public: true,
            },
            Case {
                name: "loopback",
                ip: "127.0.0.1",
                public: false,
            },
            Case {
                name: "loopback range",
                ip: "127.8.9.1",
                public: false,
            },
            Case {
                name: "private 10",
                ip: "10.1.2.3",
                public: false,
            },
            Case {
                name: "private 172",
                ip: "172.20.0.1",
                public: false,
            },
            Case {
                name: "private 192",
                ip: "192.168.1.1",
                public: false,
            },
            Case {
                name: "link-local / metadata",
                ip: "169.254.169.254",
                public: false,
            },
            Case {
                name: "cgnat",
                ip: "100.100.1.1",
                public: false,
            },
            Case {
                name: "just outside cgnat",
                ip: "100.128.0.1",
                public: true,
            },
            Case {
                name: "multicast",
                ip: "224.0.0.1",
                public: false,
            },
            Case {
                name: "broadcast",
                ip: "255.255.255.255",
                public: false,
            },
            Case {
                name: "this network",
                ip: "0.0.0.0",
                public: false,
            },
            Case {
                name: "benchmarking",
                ip: "198.18.0.1",
                public: false,
            },
            Case {
                name: "v6 public",
                ip: "2606:4700::1111",
                public: true,
            },
            Case {
                name: "v6 loopback",
                ip: "::1",
                public: false,
            },
            Case {
                name: "v6 unspecified",
                ip: "::",
                public: false,
            },
            Case {
                name: "v6 link-local",
                ip: "fe80::1",
                public: false,
            },
            Case {
                name: "v6 unique local",
                ip: "fd00::1",
                public: false,
            },
            Case {
                name: "v6 multicast",
                ip: "ff02::1",
                public: false,
            },
            Case {
                name: "v4-mapped loopback",
                ip: "::ffff:127.0.0.1",
                public: false,
            },
            Case {
                name: "v4-mapped private",
                ip: "::ffff:10.0.0.1",
                public: false,
            },
            Case {
                name: "nat64",
                ip: "64:ff9b::a00:1",
                public: false,
            },
            Case {
                name: "6to4",
                ip: "2002:7f00:1::",
                public: false,
            },
            Case {
                name: "documentation",
                ip: "2001:db8::1",
                public: false,
            },
        ];
        for case in cases {
            let ip: IpAddr = case.ip.parse().unwrap();
            assert_eq!(is_public_ip(ip), case.public, "case {}", case.name);
        }
    }

    #[test]
    fn urls() {
        struct Case {
            name: &'static str,
            url: &'static str,
            ok: bool,
        }
        let cases = [
            Case {
                name: "public name",
                url: "https://example.com/x",
                ok: true,
            },
            Case {
                name: "literal loopback",
                url: "http://127.0.0.1:8080/",
                ok: false,
            },
            Case {
                name: "decimal spelling",
                url: "http://2130706433/",
                ok: false,
            },
            Case {
                name: "octal spelling",
                url: "http://0177.0.0.1/",
                ok: false,
            },
            Case {
                name: "hex spelling",
                url: "http://0x7f.1/",
                ok: false,
            },
            Case {
                name: "short spelling",
                url: "http://127.1/",
                ok: false,
            },
            Case {
                name: "v6 literal",
                url: "http://[::1]/",
                ok: false,
            },
            Case {
                name: "v4-mapped literal",
                url: "http://[::ffff:7f00:1]/",
                ok: false,
            },
            Case {
                name: "localhost name",
                url: "http://localhost:3000/",
                ok: false,
            },
            Case {
                name: "localhost subdomain",
                url: "http://a.localhost./",
                ok: false,
            },
            Case {
                name: "file scheme",
                url: "file:///etc/passwd",
                ok: false,
            },
            Case {
                name: "ftp scheme",
                url: "ftp://example.com/",
                ok: false,
            },
        ];
        for case in cases {
            let url = Url::parse(case.url).unwrap();
            assert_eq!(
                check_url(&url, false).is_ok(),
                case.ok,
                "case {}",
                case.name
            );
        }
        let loopback = Url::parse("http://127.0.0.1/").unwrap();
        assert!(check_url(&loopback, true).is_ok());
    }

    #[test]
    fn redirects() {
        struct Case {
            name: &'static str,
            hops: usize,
            url: &'static str,
            ok: bool,
        }
        let cases = [
            Case {
                name: "public target",
                hops: 0,
                url: "https://example.org/next",
                ok: true,
            },
            Case {
                name: "to loopback",
                hops: 1,
                url: "http://127.0.0.1/admin",
                ok: false,
            },
            Case {
                name: "to metadata service",
                hops: 0,
                url: "http://169.254.169.254/latest/meta-data/",
                ok: false,
            },
            Case {
                name: "to decimal loopback",
                hops: 0,
                url: "http://2130706433/",
                ok: false,
            },
            Case {
                name: "to private v6",
                hops: 0,
                url: "http://[fd00::1]/",
                ok: false,
            },
            Case {
                name: "to localhost name",
                hops: 0,
                url: "http://localhost/",
                ok: false,
            },
            Case {
                name: "to another scheme",
                hops: 0,
                url: "file:///etc/passwd",
                ok: false,
            },
            Case {
                name: "too many hops",
                hops: 5,
                url: "https://example.org/",
                ok: false,
            },
        ];
        for case in cases {
            let url = Url::parse(case.url).unwrap();
            assert_eq!(
                check_redirect(case.hops, &url, false).is_ok(),
                case.ok,
                "case {}",
                case.name
            );
        }
    }

    #[test]
    fn this_hosts_addresses_are_refused_like_loopback() {
        // A server with a public address: it passes every range check, yet is this host.
        let public_own: IpAddr = "93.184.216.34".parse().unwrap();
        let own = [IpAddr::V4(Ipv4Addr::LOCALHOST), public_own];
        struct Case {
            name: &'static str,
            ip: &'static str,
            own: bool,
        }
        let cases = [
            Case {
                name: "the host's public address",
                ip: "93.184.216.34",
                own: true,
            },
            Case {
                name: "spelt as IPv4-mapped IPv6",
                ip: "::ffff:93.184.216.34",
                own: true,
            },
            Case {
                name: "another public address",
                ip: "93.184.216.35",
                own: false,
            },
        ];
        for case in cases {
            let ip: IpAddr = case.ip.parse().unwrap();
            assert_eq!(is_own(ip, &own), case.own, "case {}", case.name);
        }
        // Every address of this machine's interfaces is refused, whatever its range.
        for ip in host_addresses().unwrap() {
            let url = Url::parse(&format!("http://{}/", SocketAddr::new(ip, 80))).unwrap();
            let refused = check_url(&url, false).unwrap_err();
            assert!(
                refused.contains("an address of this host"),
                "{ip}: {refused}"
            );
            assert!(
                check_url(&url, true).is_ok(),
                "{ip}: fetch_allow_private lets it through"
            );
        }
    }

    #[tokio::test]
    async fn resolver_drops_private_answers() {
        let err = PublicOnlyResolver
            .resolve("localhost".parse().unwrap())
            .await
            .err()
            .expect("localhost must be refused");
        assert!(err.to_string().contains("public address"), "{err}");
    }
}
