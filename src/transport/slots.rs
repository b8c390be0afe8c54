//! Cluster slots: which master serves which slots ([`SlotMap`]), and batching many keys into
//! calls that a cluster accepts (one slot per call). Which slot a key hashes to is
//! [`names::cluster_slot`](crate::names::cluster_slot).

use super::NodeAddr;

/// Which master serves which slots, as `CLUSTER SLOTS` said at one moment.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
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
        let slot = crate::names::cluster_slot(key);
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

/// Splits `items` into slices of at most `max` items that one call may carry. With
/// [`Grouping::BySlot`] the items are first sorted by the slot of their key, and no slice
/// spans two slots.
pub(crate) fn batches<T>(
    items: &mut [T],
    key: impl Fn(&T) -> &str,
    max: usize,
    grouping: Grouping,
) -> Vec<&[T]> {
    let max = max.max(1);
    match grouping {
        Grouping::Any => items.chunks(max).collect(),
        Grouping::BySlot => batches_by(items, key, max, |k| {
            u32::from(crate::names::cluster_slot(k))
        }),
    }
}

/// Splits `items` into slices of at most `max` items of one group each (`group` of their key),
/// sorting them by group first.
pub(crate) fn batches_by<'a, T>(
    items: &'a mut [T],
    key: impl Fn(&T) -> &str,
    max: usize,
    group: impl Fn(&str) -> u32,
) -> Vec<&'a [T]> {
    let max = max.max(1);
    items.sort_by_cached_key(|item| group(key(item)));
    let items: &'a [T] = items;
    let mut out = Vec::new();
    let mut start = 0;
    while start < items.len() {
        let first = group(key(&items[start]));
        let run = items[start..]
            .iter()
            .take(max)
            .take_while(|item| group(key(item)) == first)
            .count();
        out.push(&items[start..start + run]);
        start += run;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
            assert!(batch
                .iter()
                .all(|k| crate::names::cluster_slot(k) == crate::names::cluster_slot(&batch[0])));
        }
        assert_eq!(
            grouped.len(),
            3 * 4,
            "334/333/333 keys per tag: 4 batches each"
        );
    }
}
