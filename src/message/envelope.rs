//! The envelope of a message, `{timestamp, type, payload, origin?}`: `OmniMessage`, its
//! `Payload`, the timestamp it carries, and its JSON form (an unknown `type` is kept verbatim).
//! It must not define payload kinds (`super` does) or know about actors, tools or I/O.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::{EventPayload, ModelPayload, SessionMeta};

/// The payload of an envelope. `Unknown` keeps what this build does not understand, verbatim.
#[derive(Debug, Clone, PartialEq)]
pub enum Payload {
    /// Boxed: the largest payload, one per trace file, would otherwise size every message.
    SessionMeta(Box<SessionMeta>),
    /// A `model_msg`: a complete or partial model message.
    Model(ModelPayload),
    /// An `event_msg`.
    Event(EventPayload),
    /// Envelope type and payload as read (an unknown `type` at either level).
    Unknown {
        /// The envelope `type` as read.
        kind: String,
        /// The payload as read.
        payload: Value,
    },
}

/// One message of the protocol: a line of a trace, an item of a session's stream.
#[derive(Debug, Clone, PartialEq)]
pub struct OmniMessage {
    /// ISO-8601 UTC with milliseconds, set when the message is built.
    pub timestamp: String,
    /// What the message carries.
    pub payload: Payload,
    /// Child-session ids, outer → inner; `None` = from this session. Never an empty list.
    pub origin: Option<Vec<String>>,
}

/// The current time as the envelope wants it: `2026-07-18T03:10:22.531Z`.
///
/// One clock read per call; the calendar part (`…T03:10:22.`) is formatted once per second
/// per thread and reused, so a message costs a copy and three digits, not a date conversion.
pub fn now_timestamp() -> String {
    use std::cell::RefCell;
    use std::time::{SystemTime, UNIX_EPOCH};
    thread_local! {
        static SECOND: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
    }
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let (secs, ms) = (since.as_secs(), since.subsec_millis().min(999));
    let mut out = String::with_capacity(24);
    SECOND.with(|cell| {
        let mut cached = cell.borrow_mut();
        if cached.0 != secs {
            cached.1 = second_prefix(secs);
            cached.0 = secs;
        }
        out.push_str(&cached.1);
    });
    for digit in [ms / 100, ms / 10 % 10, ms % 10] {
        out.push(char::from(b'0' + digit as u8));
    }
    out.push('Z');
    out
}

/// `YYYY-MM-DDTHH:MM:SS.` of a Unix second.
fn second_prefix(secs: u64) -> String {
    use chrono::{Datelike, Timelike};
    use std::fmt::Write;
    let at = i64::try_from(secs)
        .ok()
        .and_then(|s| chrono::DateTime::from_timestamp(s, 0))
        .unwrap_or_default();
    let mut out = String::with_capacity(24);
    let _ = write!(
        out,
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.",
        at.year(),
        at.month(),
        at.day(),
        at.hour(),
        at.minute(),
        at.second(),
    );
    out
}

impl OmniMessage {
    /// A message of `payload`, stamped now, from this session (no origin).
    pub fn new(payload: Payload) -> Self {
        OmniMessage {
            timestamp: now_timestamp(),
            payload,
            origin: None,
        }
    }

    /// A `model_msg` envelope, stamped now.
    pub fn model(payload: ModelPayload) -> Self {
        Self::new(Payload::Model(payload))
    }

    /// An `event_msg` envelope, stamped now.
    pub fn event(payload: EventPayload) -> Self {
        Self::new(Payload::Event(payload))
    }

    /// A `session_meta` envelope, stamped now.
    pub fn session_meta(meta: SessionMeta) -> Self {
        Self::new(Payload::SessionMeta(Box::new(meta)))
    }

    /// The envelope `type`: `session_meta`, `model_msg` or `event_msg` (or the unknown one read).
    pub fn kind(&self) -> &str {
        match &self.payload {
            Payload::SessionMeta(_) => "session_meta",
            Payload::Model(_) => "model_msg",
            Payload::Event(_) => "event_msg",
            Payload::Unknown { kind, .. } => kind,
        }
    }

    /// Prepends one forwarding hop (`origin = [id, ...old]`).
    pub fn with_origin(mut self, child_session_id: &str) -> Self {
        let mut origin = vec![child_session_id.to_string()];
        origin.extend(self.origin.take().unwrap_or_default());
        self.origin = Some(origin);
        self
    }

    /// True when this message came from a child session.
    pub fn has_origin(&self) -> bool {
        self.origin.as_ref().is_some_and(|o| !o.is_empty())
    }

    /// Whether the trace records it: everything but partials and origin-tagged messages.
    pub fn is_recordable(&self) -> bool {
        if self.has_origin() {
            return false;
        }
        !matches!(&self.payload, Payload::Model(p) if p.is_partial())
    }

    /// The model payload, if this is a `model_msg`.
    pub fn as_model(&self) -> Option<&ModelPayload> {
        match &self.payload {
            Payload::Model(p) => Some(p),
            _ => None,
        }
    }

    /// The event payload, if this is an `event_msg`.
    pub fn as_event(&self) -> Option<&EventPayload> {
        match &self.payload {
            Payload::Event(p) => Some(p),
            _ => None,
        }
    }

    /// One JSON line (no trailing newline).
    pub fn to_json(&self) -> String {
        // Serializing this type cannot fail: every field is a string, number, map or list.
        let mut out = Vec::new();
        match super::json_bytes::write_message(&mut out, self) {
            // What it writes is UTF-8 (escaped `str`s and ASCII); the check is the std one.
            Ok(()) => String::from_utf8(out)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
            Err(e) => format!(
                r#"{{"timestamp":"{}","type":"invalid","payload":{{"error":"{e}"}}}}"#,
                self.timestamp
            ),
        }
    }

    /// Parses one JSON line. An unknown `type` becomes `Payload::Unknown`;
    /// malformed JSON, a missing envelope field or a non-object payload is an error.
    pub fn from_json(line: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(line)
    }
}

impl Serialize for OmniMessage {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let fields = if self.origin.is_some() { 4 } else { 3 };
        let mut s = serializer.serialize_struct("OmniMessage", fields)?;
        s.serialize_field("timestamp", &self.timestamp)?;
        s.serialize_field("type", self.kind())?;
        match &self.payload {
            Payload::SessionMeta(m) => s.serialize_field("payload", m)?,
            Payload::Model(m) => s.serialize_field("payload", m)?,
            Payload::Event(e) => s.serialize_field("payload", e)?,
            Payload::Unknown { payload, .. } => s.serialize_field("payload", payload)?,
        }
        if let Some(origin) = &self.origin {
            s.serialize_field("origin", origin)?;
        }
        s.end()
    }
}

impl<'de> Deserialize<'de> for OmniMessage {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Raw {
            timestamp: String,
            #[serde(rename = "type")]
            kind: String,
            payload: Value,
            #[serde(default)]
            origin: Option<Vec<String>>,
        }
        let raw = Raw::deserialize(deserializer)?;
        if !raw.payload.is_object() {
            return Err(D::Error::custom("payload is not an object"));
        }
        let payload = match raw.kind.as_str() {
            "session_meta" => match serde_json::from_value::<SessionMeta>(raw.payload.clone()) {
                Ok(m) => Payload::SessionMeta(Box::new(m)),
                Err(_) => Payload::Unknown {
                    kind: raw.kind,
                    payload: raw.payload,
                },
            },
            "model_msg" => match serde_json::from_value::<ModelPayload>(raw.payload.clone()) {
                Ok(m) => Payload::Model(m),
                Err(_) => Payload::Unknown {
                    kind: raw.kind,
                    payload: raw.payload,
                },
            },
            "event_msg" => match serde_json::from_value::<EventPayload>(raw.payload.clone()) {
                Ok(e) => Payload::Event(e),
                Err(_) => Payload::Unknown {
                    kind: raw.kind,
                    payload: raw.payload,
                },
            },
            _ => Payload::Unknown {
                kind: raw.kind,
                payload: raw.payload,
            },
        };
        Ok(OmniMessage {
            timestamp: raw.timestamp,
            payload,
            origin: raw.origin.filter(|o| !o.is_empty()),
        })
    }
}
