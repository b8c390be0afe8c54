//! Cluster slots: which of the 16384 slots a key hashes to (CRC16 of the key, or of its hash
//! tag), and batching many keys into calls that a cluster accepts (one slot per call).

use super::NodeAddr;

/// Which master serves which slots, as `CLUSTER SLOTS` said at one moment.
#[derive(Debug, Default, Clone)]
pub(crate) struct SlotMap {
    /// `(first, last, master)`, sorted by first slot.
    ranges: Vec<(u16, u16, NodeAddr)>,
}

impl SlotMap {
    pub(crate) fn new(mut ranges: Vec<(u16, u16, NodeAddr)>) -> SlotMap {
        ranges.sort_by_key(|(first, ..)| *first);
        SlotMap { ranges }
    }

    /// The master serving `key`'s slot (`None`: a slot nobody serves, as mid-failover).
    pub(crate) fn master_of(&self, key: &str) -> Option<&NodeAddr> {
        let slot = slot_of(key);
        let i = self.ranges.partition_point(|(first, ..)| *first <= slot);
        let (first, last, master) = self.ranges.get(i.checked_sub(1)?)?;
        (*first..=*last).contains(&slot).then_some(master)
    }

    /// Every master serving a slot, each once.
    pub(crate) fn masters(&self) -> Vec<&NodeAddr> {
        let mut masters: Vec<&NodeAddr> = self.ranges.iter().map(|(.., m)| m).collect();
        masters.sort();
        masters.dedup();
        masters
    }
}

/// How keys may share one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Grouping {
    /// Any keys together (one server).
    Any,
    /// Only keys of one slot (a cluster refuses others with `CROSSSLOT`).
    #[allow(dead_code)] // the cluster transport uses it
    BySlot,
}

/// The cluster slot of `key`: CRC16 (XMODEM) of the key, or of the part between the first `{`
/// and the next `}` when that part is not empty, modulo 16384.
pub(crate) fn slot_of(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let hashed = match bytes.iter().position(|&b| b == b'{') {
        Some(open) => match bytes[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &bytes[open + 1..open + 1 + len],
            _ => bytes,
        },
        None => bytes,
    };
    crc16(hashed) % 16384
}

fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// Splits `items` into slices of at most `max` items that one call may carry. With
/// [`Grouping::BySlot`] the items are first sorted by the slot of their key, and no slice
/// spans two slots.
pub(crate) fn batches<'a, T>(
    items: &'a mut [T],
    key: impl Fn(&T) -> &str,
    max: usize,
    grouping: Grouping,
) -> Vec<&'a [T]> {
    let max = max.max(1);
    match grouping {
        Grouping::Any => items.chunks(max).collect(),
        Grouping::BySlot => {
            items.sort_by_cached_key(|item| slot_of(key(item)));
            let items: &'a [T] = items;
            let mut out = Vec::new();
            let mut start = 0;
            while start < items.len() {
                let slot = slot_of(key(&items[start]));
                let run = items[start..]
                    .iter()
                    .take(max)
                    .take_while(|item| slot_of(key(item)) == slot)
                    .count();
                out.push(&items[start..start + run]);
                start += run;
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_the_cluster_spec() {
        // The Redis Cluster specification's test vector, and its hash tag examples.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(slot_of("123456789"), 12739);
        assert_eq!(
            slot_of("{user1000}.following"),
            slot_of("{user1000}.followers")
        );
        assert_eq!(slot_of("foo{}{bar}"), crc16(b"foo{}{bar}") % 16384);
        assert_eq!(slot_of("foo{{bar}}zap"), slot_of("{bar"));
        assert_eq!(slot_of("foo{bar}{zap}"), slot_of("bar"));
        // A lock's derived names share its slot.
        let key = "orders:42";
        assert_eq!(slot_of(&crate::names::lock_channel(key)), slot_of(key));
    }

    #[test]
    fn batches_never_span_slots_when_grouped_and_keep_their_size() {
        let mut keys: Vec<String> = (0..1000).map(|i| format!("k{i}")).collect();
        let any = batches(&mut keys, |k| k, 100, Grouping::Any);
        assert_eq!(any.len(), 10);
        let mut keys: Vec<String> = (0..1000).map(|i| format!("{{t{}}}:k{i}", i % 3)).collect();
        let grouped = batches(&mut keys, |k| k, 100, Grouping::BySlot);
        assert_eq!(grouped.iter().map(|b| b.len()).sum::<usize>(), 1000);
        for batch in &grouped {
            assert!(batch.len() <= 100);
            assert!(batch.iter().all(|k| slot_of(k) == slot_of(&batch[0])));
        }
        assert_eq!(
            grouped.len(),
            3 * 4,
            "334/333/333 keys per tag: 4 batches each"
        );
    }
}
