use super::queue::{message_id, receipt_handle};
use super::*;

#[test]
fn message_ids_and_receipts_read_as_the_format_wrote_them() {
    for n in [0, 7, 42, 12_345_678, 123_456_789, u64::MAX] {
        assert_eq!(message_id(n), format!("m-{n:08}"));
    }
    for count in [0, 1, 10, u32::MAX] {
        assert_eq!(receipt_handle("m-00000042", count), format!("m-00000042#{count}"));
    }
}

#[test]
fn the_event_log_stays_sorted_by_key_and_keeps_a_live_keys_first_write() {
    let logged = |expires_at: i64| {
        move || LoggedEvent {
            at: chrono::DateTime::UNIX_EPOCH,
            kind: crate::ports::EventKind::Step,
            detail: Arc::new(crate::ports::Detail::object().finish()),
            expires_at,
        }
    };
    let mut log = EventLog::default();
    // Appends, then keys that sort before, between and after what is logged.
    for key in ["00-01-accepted", "00-02-routed", "01-03-handoff-b", "00-00-a", "01-03-handoff-a", "99-09-final"] {
        log.put(key, 100, logged(200));
    }
    let keys: Vec<&str> = log.0.iter().map(|(k, _)| k.as_str()).collect();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    assert_eq!(keys, sorted);
    assert_eq!(keys.len(), 6);
    // A live key keeps its first write; an expired one is written again.
    log.put("00-02-routed", 100, logged(300));
    assert_eq!(log.0.iter().find(|(k, _)| k == "00-02-routed").map(|(_, e)| e.expires_at), Some(200));
    log.put("00-02-routed", 250, logged(300));
    assert_eq!(log.0.iter().find(|(k, _)| k == "00-02-routed").map(|(_, e)| e.expires_at), Some(300));
    assert_eq!(log.0.len(), 6);
}
