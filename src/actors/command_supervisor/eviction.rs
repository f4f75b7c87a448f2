//! The eviction rule of a session's command registry, as a pure function: given a snapshot of
//! the supervisor's entries, which registered commands go so that at most `capacity` stay.
//!
//! It owns the LRU rule only: exited commands go before running ones, the least recently used
//! first within each group; a command being read, and the one being admitted, never go; commands
//! in their foreground window (not registered) neither count nor go. It must not stop actors,
//! call the event sink or log: the supervisor carries out the choice (`CommandSupervisorState::trim`).

/// What the rule needs to know about one entry of the supervisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct EntryView<'a> {
    pub(super) id: &'a str,
    /// In the registry (counts towards the capacity and may be evicted).
    pub(super) registered: bool,
    /// Held by at least one reader.
    pub(super) reading: bool,
    /// The command is over.
    pub(super) exited: bool,
    /// Logical clock of the last use (the supervisor never gives two entries the same value).
    pub(super) last_used: u64,
}

/// The outcome of the rule.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Eviction {
    /// The commands to evict, in the order they are chosen.
    pub(super) victims: Vec<String>,
    /// After evicting `victims` the registry is still over capacity: every remaining
    /// registered command is protected or being read.
    pub(super) still_over: bool,
}

/// Chooses the registered commands to evict so that at most `capacity` stay registered: exited
/// before running, then the smallest `last_used` first (equal values, which the supervisor never
/// produces, by id). Never `protect`, never one being read.
pub(super) fn choose(
    entries: &[EntryView<'_>],
    capacity: usize,
    protect: Option<&str>,
) -> Eviction {
    let registered = entries.iter().filter(|e| e.registered).count();
    let excess = registered.saturating_sub(capacity);
    if excess == 0 {
        return Eviction::default();
    }
    let mut candidates: Vec<&EntryView<'_>> = entries
        .iter()
        .filter(|e| e.registered && !e.reading && Some(e.id) != protect)
        .collect();
    candidates.sort_by_key(|e| (!e.exited, e.last_used, e.id));
    let victims: Vec<String> = candidates
        .into_iter()
        .take(excess)
        .map(|e| e.id.to_string())
        .collect();
    Eviction {
        still_over: victims.len() < excess,
        victims,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running(id: &str, last_used: u64) -> EntryView<'_> {
        EntryView {
            id,
            registered: true,
            reading: false,
            exited: false,
            last_used,
        }
    }

    fn exited(id: &str, last_used: u64) -> EntryView<'_> {
        EntryView {
            exited: true,
            ..running(id, last_used)
        }
    }

    fn victims(e: &Eviction) -> Vec<&str> {
        e.victims.iter().map(String::as_str).collect()
    }

    #[test]
    fn nothing_to_evict_at_or_under_capacity() {
        assert_eq!(choose(&[], 2, None), Eviction::default());
        let entries = [running("a", 1), exited("b", 2)];
        assert_eq!(choose(&entries, 2, None), Eviction::default());
        assert_eq!(choose(&entries, 3, None), Eviction::default());
    }

    #[test]
    fn exited_goes_before_running_even_if_used_later() {
        let entries = [running("old", 1), exited("done", 9), running("new", 5)];
        let e = choose(&entries, 2, None);
        assert_eq!(victims(&e), ["done"]);
        assert!(!e.still_over);
    }

    #[test]
    fn least_recently_used_first_among_running() {
        let entries = [running("b", 7), running("a", 3), running("c", 5)];
        assert_eq!(victims(&choose(&entries, 2, None)), ["a"]);
    }

    #[test]
    fn least_recently_used_first_among_exited() {
        let entries = [
            exited("b", 7),
            exited("a", 8),
            exited("c", 2),
            running("r", 1),
        ];
        assert_eq!(victims(&choose(&entries, 3, None)), ["c"]);
    }

    #[test]
    fn several_victims_in_the_order_chosen() {
        let entries = [
            running("r1", 1),
            exited("x2", 4),
            running("r2", 2),
            exited("x1", 3),
            running("r3", 5),
        ];
        let e = choose(&entries, 1, None);
        assert_eq!(victims(&e), ["x1", "x2", "r1", "r2"]);
        assert!(!e.still_over);
    }

    #[test]
    fn the_default_cap_of_64_evicts_the_least_recently_used_on_the_65th() {
        use crate::actors::command_supervisor::MAX_COMMANDS;
        let ids: Vec<String> = (0..=MAX_COMMANDS)
            .map(|i| format!("proc-{i:08x}"))
            .collect();
        let mut entries: Vec<EntryView<'_>> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| running(id, i as u64 + 1))
            .collect();
        let newest = ids[MAX_COMMANDS].as_str();
        let e = choose(&entries, MAX_COMMANDS, Some(newest));
        assert_eq!(victims(&e), [ids[0].as_str()]);
        entries.pop();
        assert_eq!(
            choose(&entries, MAX_COMMANDS, None),
            Eviction::default(),
            "64 registered commands fit"
        );
    }

    #[test]
    fn unregistered_entries_neither_count_nor_go() {
        let window = EntryView {
            registered: false,
            ..exited("window", 0)
        };
        let entries = [window, running("a", 1), running("b", 2)];
        assert_eq!(choose(&entries, 2, None), Eviction::default());
        assert_eq!(victims(&choose(&entries, 1, None)), ["a"]);
    }

    #[test]
    fn the_protected_command_is_never_chosen() {
        let entries = [running("admitted", 1), running("b", 2), running("c", 3)];
        assert_eq!(
            victims(&choose(&entries, 2, Some("admitted"))),
            ["b"],
            "the one being admitted stays even though it is the least recently used"
        );
        let entries = [exited("admitted", 1), running("b", 2)];
        assert_eq!(victims(&choose(&entries, 1, Some("admitted"))), ["b"]);
    }

    #[test]
    fn a_command_being_read_is_never_chosen() {
        let read = EntryView {
            reading: true,
            ..exited("read", 1)
        };
        let entries = [read, running("b", 2), running("c", 3)];
        assert_eq!(victims(&choose(&entries, 2, None)), ["b"]);
    }

    #[test]
    fn every_command_busy_leaves_the_registry_over_capacity() {
        let read = EntryView {
            reading: true,
            ..running("read", 1)
        };
        let entries = [read, running("admitted", 2)];
        let e = choose(&entries, 1, Some("admitted"));
        assert!(e.victims.is_empty());
        assert!(e.still_over);
    }

    #[test]
    fn too_few_candidates_evicts_them_all_and_reports_still_over() {
        let read = EntryView {
            reading: true,
            ..running("read", 1)
        };
        let entries = [
            read,
            exited("x", 5),
            running("admitted", 2),
            running("r", 3),
        ];
        let e = choose(&entries, 1, Some("admitted"));
        assert_eq!(victims(&e), ["x", "r"]);
        assert!(e.still_over);
    }

    #[test]
    fn a_zero_capacity_evicts_every_candidate() {
        let entries = [running("a", 2), exited("b", 1)];
        let e = choose(&entries, 0, None);
        assert_eq!(victims(&e), ["b", "a"]);
        assert!(!e.still_over);
    }

    #[test]
    fn equal_last_use_is_broken_by_id() {
        let entries = [running("b", 4), running("a", 4), running("c", 4)];
        assert_eq!(victims(&choose(&entries, 1, None)), ["a", "b"]);
        let entries = [exited("z", 4), running("a", 4)];
        assert_eq!(
            victims(&choose(&entries, 1, None)),
            ["z"],
            "exited still first"
        );
    }
}
