//! What the browser-safety guard (`guard`) admits, from the command line: the accepted `Host`
//! names and `Origin`s and the deadline of a request body, normalized once. It only holds and
//! answers this configuration, and names the deadline the guard hands each request
//! ([`BodyDeadline`]). The middleware that applies them lives in `guard`; `guard`, `state` and
//! `error` import them from here.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// What the guard admits (from the command line).
#[derive(Debug, Clone)]
pub struct GuardConfig {
    /// The bound address: its IP is an accepted `Host` (loopback ones always are).
    pub listen: SocketAddr,
    /// Further `Host` names (`--allow-host`), lowercase, without port.
    pub allow_hosts: Vec<String>,
    /// Browser origins allowed to call the API (`--allow-origin`), normalized.
    pub allow_origins: Vec<String>,
    /// How long a request body may take to arrive.
    pub body_timeout: Duration,
}

impl GuardConfig {
    /// The guard's rules from the command line, normalized (hosts lowercased without port,
    /// origins normalized).
    pub fn new(
        listen: SocketAddr,
        allow_hosts: &[String],
        allow_origins: &[String],
        body_timeout: Duration,
    ) -> Self {
        GuardConfig {
            listen,
            allow_hosts: allow_hosts.iter().map(|h| host_name(h)).collect(),
            allow_origins: allow_origins.iter().map(|o| normalize_origin(o)).collect(),
            body_timeout,
        }
    }

    /// Whether a `Host` value (name or address, with or without port) may reach the API.
    pub fn host_allowed(&self, host: &str) -> bool {
        let name = host_name(host);
        if name.is_empty() {
            return false;
        }
        if name == "localhost" || name.ends_with(".localhost") {
            return true;
        }
        if let Ok(ip) = name.parse::<IpAddr>()
            && (ip.is_loopback() || (!self.listen.ip().is_unspecified() && ip == self.listen.ip()))
        {
            return true;
        }
        self.allow_hosts.iter().any(|h| h == &name)
    }

    /// Whether a browser `Origin` header may call the API (`--allow-origin`).
    pub fn origin_allowed(&self, origin: &str) -> bool {
        let origin = normalize_origin(origin);
        self.allow_origins.iter().any(|o| o == &origin)
    }
}

/// The host part of a `Host` value, lowercase, without port, brackets or a trailing dot.
fn host_name(host: &str) -> String {
    let host = host.trim();
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default()
    } else if host.matches(':').count() > 1 {
        host // a bare IPv6 address
    } else {
        host.split(':').next().unwrap_or_default()
    };
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// `scheme://host[:port]`, lowercase, without a trailing slash.
fn normalize_origin(origin: &str) -> String {
    origin.trim().trim_end_matches('/').to_ascii_lowercase()
}

/// The deadline of the request's body, read by the JSON extractors.
#[derive(Debug, Clone, Copy)]
pub struct BodyDeadline(pub Duration);
