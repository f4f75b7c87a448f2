//! Tool call assembly of the chunk parser: which call a `delta.tool_calls[]` fragment belongs
//! to, and the session's tool call ids.
//!
//! A fragment continues the call last seen at its `index`, unless it carries a function name
//! and a provider id different from that call's id: then it starts a new call (Ollama and
//! LiteLLM in front of it send parallel calls as whole chunks that all say `index: 0`). It owns
//! no segment discipline and emits no events.

use std::collections::HashMap;

use serde_json::{Map, Value};

/// Tool call ids seen by one session: repeats become `<id>#2`, missing ids are generated.
#[derive(Debug, Default)]
pub(in crate::model::openai) struct CallIds {
    seen: HashMap<String, u32>,
    generated: u64,
}

impl CallIds {
    /// Counts `ids` (trace ids, `<id>#<k>` included) as seen.
    pub(in crate::model::openai) fn seed(&mut self, ids: &[&str]) {
        for id in ids {
            let (base, k) = match id.rsplit_once('#') {
                Some((b, k)) => match k.parse::<u32>() {
                    Ok(k) => (b, k),
                    Err(_) => (*id, 1),
                },
                None => (*id, 1),
            };
            let n = self.seen.entry(base.to_string()).or_insert(0);
            *n = (*n).max(k);
            if let Some(g) = base
                .strip_prefix("call_rk")
                .and_then(|g| g.parse::<u64>().ok())
            {
                self.generated = self.generated.max(g);
            }
        }
    }

    pub(super) fn assign(&mut self, provider_id: Option<&str>) -> String {
        let base = match provider_id.filter(|s| !s.is_empty()) {
            Some(id) => id.to_string(),
            None => {
                self.generated += 1;
                format!("call_rk{}", self.generated)
            }
        };
        let n = self.seen.entry(base.clone()).or_insert(0);
        *n += 1;
        if *n == 1 { base } else { format!("{base}#{n}") }
    }
}

/// One call being assembled.
#[derive(Debug, Default)]
pub(super) struct CallAcc {
    pub(super) index: u64,
    /// The id the provider gave (empty: none yet).
    pub(super) provider_id: String,
    /// The id in the trace (unique in the session).
    pub(super) id: String,
    pub(super) name: String,
    pub(super) arguments: String,
    pub(super) extra: Map<String, Value>,
}

/// The calls of one response, in the order they were opened.
#[derive(Debug, Default)]
pub(super) struct Calls {
    slots: Vec<CallAcc>,
    by_index: HashMap<u64, usize>,
}

impl Calls {
    /// The slot a fragment at `index` belongs to; `None` when a new call must be opened.
    pub(super) fn find(&self, index: u64, provider_id: &str, name: &str) -> Option<usize> {
        let slot = *self.by_index.get(&index)?;
        let acc = &self.slots[slot];
        let other_call = !provider_id.is_empty()
            && !acc.provider_id.is_empty()
            && acc.provider_id != provider_id
            && !name.is_empty();
        (!other_call).then_some(slot)
    }

    /// Opens a call at `index`; later fragments at that index continue it.
    pub(super) fn open(&mut self, index: u64, provider_id: &str, id: String) -> usize {
        let slot = self.slots.len();
        self.slots.push(CallAcc {
            index,
            provider_id: provider_id.to_string(),
            id,
            ..CallAcc::default()
        });
        self.by_index.insert(index, slot);
        slot
    }

    pub(super) fn get(&self, slot: usize) -> Option<&CallAcc> {
        self.slots.get(slot)
    }

    pub(super) fn get_mut(&mut self, slot: usize) -> Option<&mut CallAcc> {
        self.slots.get_mut(slot)
    }

    /// All calls, by index (calls sharing an index in the order they were opened).
    pub(super) fn take(&mut self) -> Vec<CallAcc> {
        self.by_index.clear();
        let mut calls = std::mem::take(&mut self.slots);
        calls.sort_by_key(|c| c.index);
        calls
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_ids_count_as_seen() {
        let mut ids = CallIds::default();
        ids.seed(&["call_0", "get#3", "call_rk4"]);
        assert_eq!(ids.assign(Some("call_0")), "call_0#2");
        assert_eq!(ids.assign(Some("get")), "get#4");
        assert_eq!(ids.assign(None), "call_rk5");
        assert_eq!(ids.assign(Some("fresh")), "fresh");
    }

    #[test]
    fn a_new_id_with_a_name_at_the_same_index_is_a_new_call() {
        let mut calls = Calls::default();
        let a = calls.open(0, "call_a", "call_a".into());
        assert_eq!(calls.find(0, "", ""), Some(a));
        assert_eq!(calls.find(0, "call_a", "f"), Some(a));
        // A different id without a name is a fragment of the same call.
        assert_eq!(calls.find(0, "call_x", ""), Some(a));
        assert_eq!(calls.find(0, "call_b", "f"), None);
        let b = calls.open(0, "call_b", "call_b".into());
        assert_eq!(calls.find(0, "", ""), Some(b));
        assert_eq!(calls.find(1, "", "f"), None);
        let c = calls.open(1, "", "call_rk1".into());
        assert_eq!(calls.find(1, "call_c", "g"), Some(c));
        let ids: Vec<String> = calls.take().into_iter().map(|c| c.id).collect();
        assert_eq!(ids, vec!["call_a", "call_b", "call_rk1"]);
    }
}
