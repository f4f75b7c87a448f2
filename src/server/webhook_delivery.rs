//! The webhook delivery task: takes deliveries off the queue `webhooks.rs` fills, signs each
//! attempt (`Rookery-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`), posts
//! it with a per-attempt timeout and retries a failure (an error, a timeout, a non-2xx answer)
//! with exponential backoff, up to [`MAX_IN_FLIGHT`] deliveries at once.
//!
//! It only sends and counts: it never touches a session, and a delivery given up is counted
//! and logged (`tracing` warn), never written to a trace. Redirects are not followed (a
//! redirect could lead to an origin the server does not allow).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{KeyInit, Mac};
use tokio::sync::{Semaphore, mpsc};
use url::Url;

/// Why one delivery attempt failed (logged, counted; the delivery is retried).
#[derive(Debug, thiserror::Error)]
enum AttemptFailure {
    /// No answer within the attempt's timeout.
    #[error("timed out")]
    TimedOut,
    /// The request could not be made or its answer read.
    #[error("{0}")]
    Request(reqwest::Error),
    /// The receiver answered something other than 2xx.
    #[error("answered {0}")]
    Status(reqwest::StatusCode),
}

/// Deliveries being attempted (or waiting to retry) at once, at most; while that many are, the
/// queue is not drained.
pub const MAX_IN_FLIGHT: usize = 16;
/// The longest wait between two attempts, whatever the backoff doubled to.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// The signature header.
pub const SIGNATURE_HEADER: &str = "Rookery-Signature";

/// Delivery counters for `/metrics`.
#[derive(Default)]
pub struct WebhookCounters {
    /// Deliveries a receiver answered with 2xx.
    pub delivered: AtomicU64,
    /// Deliveries given up after every retry failed.
    pub failed: AtomicU64,
    /// Deliveries dropped because the queue was full.
    pub dropped: AtomicU64,
    /// Attempts that failed (an error, a timeout or a non-2xx answer), retried or not.
    pub attempts_failed: AtomicU64,
}

/// One event for one URL.
pub struct Delivery {
    /// `wh-…`: also the body's `delivery_id` and the `Rookery-Delivery` header (receivers
    /// deduplicate retries by it).
    pub id: String,
    /// Where it goes.
    pub url: Url,
    /// The JSON body, the same bytes on every attempt.
    pub body: Vec<u8>,
    /// The event's `type` (for logs).
    pub kind: String,
}

/// Lowercase hex of HMAC-SHA256(`key`, `data`).
pub fn hmac_sha256_hex(key: &[u8], data: &[u8]) -> String {
    // HMAC takes a key of any length, so this cannot fail.
    let Ok(mut mac) = hmac::Hmac::<sha2::Sha256>::new_from_slice(key) else {
        return String::new();
    };
    mac.update(data);
    let tag = mac.finalize().into_bytes();
    let mut out = String::with_capacity(tag.len() * 2);
    for b in tag.iter() {
        out.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
        out.push(char::from(b"0123456789abcdef"[usize::from(b & 0xf)]));
    }
    out
}

/// The `Rookery-Signature` value of `body` sent at Unix time `t`.
pub fn signature(secret: &[u8], t: u64, body: &[u8]) -> String {
    let mut signed = Vec::with_capacity(body.len() + 21);
    signed.extend_from_slice(t.to_string().as_bytes());
    signed.push(b'.');
    signed.extend_from_slice(body);
    format!("t={t},v1={}", hmac_sha256_hex(secret, &signed))
}

/// The wait before retry `n` (0-based): `base` doubled `n` times, at most [`MAX_BACKOFF`].
pub fn backoff(base: Duration, n: u32) -> Duration {
    base.saturating_mul(2u32.saturating_pow(n.min(20)))
        .min(MAX_BACKOFF)
}

/// Sends deliveries: the HTTP client, the retry policy and the counters.
pub struct Sender {
    client: reqwest::Client,
    secret: Arc<[u8]>,
    retries: u32,
    backoff: Duration,
    counters: Arc<WebhookCounters>,
}

impl Sender {
    /// A sender signing with `secret`, giving each attempt `timeout` and retrying a failure
    /// `retries` times, `backoff` doubled between them.
    pub fn new(
        secret: &str,
        timeout: Duration,
        retries: u32,
        backoff: Duration,
        counters: Arc<WebhookCounters>,
    ) -> Result<Self, reqwest::Error> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Sender {
            client,
            secret: Arc::from(secret.as_bytes()),
            retries,
            backoff,
            counters,
        })
    }

    /// Delivers what `rx` brings until every sender of the queue is gone.
    pub async fn run(self, mut rx: mpsc::Receiver<Delivery>) {
        let me = Arc::new(self);
        let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
        while let Some(d) = rx.recv().await {
            let Ok(slot) = slots.clone().acquire_owned().await else {
                return;
            };
            let me = me.clone();
            tokio::spawn(async move {
                me.deliver(d).await;
                drop(slot);
            });
        }
    }

    /// Attempts `d` until a 2xx answer or the last retry.
    async fn deliver(&self, d: Delivery) {
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            let failure = match self.attempt(&d, attempt).await {
                Ok(()) => {
                    self.counters.delivered.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(delivery = %d.id, "webhook {} delivered to {}", d.kind, d.url);
                    return;
                }
                Err(f) => f,
            };
            self.counters
                .attempts_failed
                .fetch_add(1, Ordering::Relaxed);
            if attempt > self.retries {
                self.counters.failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    delivery = %d.id,
                    "webhook {} to {} given up after {attempt} attempts: {failure}",
                    d.kind,
                    d.url
                );
                return;
            }
            let wait = backoff(self.backoff, attempt - 1);
            tracing::warn!(
                delivery = %d.id,
                "webhook {} to {} attempt {attempt} failed: {failure}; retrying in {} ms",
                d.kind,
                d.url,
                wait.as_millis()
            );
            tokio::time::sleep(wait).await;
        }
    }

    /// One signed POST; `Err` says why it failed.
    async fn attempt(&self, d: &Delivery, attempt: u32) -> Result<(), AttemptFailure> {
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let answer = self
            .client
            .post(d.url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(SIGNATURE_HEADER, signature(&self.secret, t, &d.body))
            .header("Rookery-Delivery", &d.id)
            .header("Rookery-Attempt", attempt.to_string())
            .body(d.body.clone())
            .send()
            .await
            .map_err(|e| {
                if e.is_timeout() {
                    AttemptFailure::TimedOut
                } else {
                    AttemptFailure::Request(e)
                }
            })?;
        let status = answer.status();
        if status.is_success() {
            Ok(())
        } else {
            Err(AttemptFailure::Status(status))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231() {
        // RFC 4231, test case 2.
        assert_eq!(
            hmac_sha256_hex(b"Jefe", b"what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn the_signature_covers_time_and_body() {
        let s = signature(b"k", 1700000000, b"{}");
        assert_eq!(
            s,
            format!(
                "t=1700000000,v1={}",
                hmac_sha256_hex(b"k", b"1700000000.{}")
            )
        );
        assert_ne!(s, signature(b"k", 1700000001, b"{}"));
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let b = Duration::from_millis(100);
        assert_eq!(backoff(b, 0), Duration::from_millis(100));
        assert_eq!(backoff(b, 3), Duration::from_millis(800));
        assert_eq!(backoff(b, 40), MAX_BACKOFF);
    }
}
