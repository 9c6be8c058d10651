//! The bookkeeping both shared-memory tables share (`verdict_cache`,
//! `budget_table`): fixed slots linked by indices, never pointers, so that
//! every nginx worker can map them at its own address. A slot is on one hash
//! chain (or the free list, through the same link) and on one doubly linked
//! list (least recently used first at the tail).

/// No slot.
pub const NIL: u32 = u32::MAX;

/// A slot's links.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Links {
    /// The next slot on its hash chain, or on the free list.
    pub hash_next: u32,
    pub prev: u32,
    pub next: u32,
}

impl Links {
    pub const NONE: Links = Links { hash_next: NIL, prev: NIL, next: NIL };
}

/// A doubly linked list of slots: most recent at the head.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct List {
    pub head: u32,
    pub tail: u32,
}

impl List {
    pub const EMPTY: List = List { head: NIL, tail: NIL };
}

/// How many buckets (a power of two) and entries of `entry_size` bytes (with
/// a 4-byte bucket each) fit in `bytes` after a header of `header_size`; None
/// for fewer than `min_entries`.
pub fn layout(bytes: usize, header_size: usize, entry_size: usize, min_entries: usize) -> Option<(usize, usize)> {
    let room = bytes.checked_sub(header_size)?;
    let entries = (room / (entry_size + 4)).min(NIL as usize - 1);
    if entries < min_entries.max(1) {
        return None;
    }
    let buckets = 1usize << (usize::BITS - 1 - entries.leading_zeros());
    Some((buckets, entries))
}

/// A table slot with links.
pub trait Slot: Copy {
    fn links(&self) -> &Links;
    fn links_mut(&mut self) -> &mut Links;
}

/// Chain every slot on the free list (slot 0 first); the head is 0.
pub fn chain_free<S: Slot>(slots: &mut [S]) {
    let n = slots.len() as u32;
    for (i, s) in slots.iter_mut().enumerate() {
        s.links_mut().hash_next = if i as u32 + 1 < n { i as u32 + 1 } else { NIL };
    }
}

/// The first slot on bucket `head`'s chain that `is` accepts.
///
/// A chain holds each slot at most once, so a walk takes at most as many
/// steps as there are slots: a longer one is a loop that a worker killed
/// halfway through a change left (nginx frees a dead worker's lock), and it
/// ends there, not with every worker spinning under the zone's lock. An
/// index past the slots ends it too.
pub fn find<S: Slot>(slots: &[S], head: u32, is: impl Fn(&S) -> bool) -> Option<u32> {
    let mut i = head;
    for _ in 0..slots.len() {
        let s = slots.get(i as usize)?;
        if is(s) {
            return Some(i);
        }
        i = s.links().hash_next;
    }
    None
}

/// Take slot `i` off the hash chain that starts at `*head` (as [`find`], at
/// most as many steps as there are slots).
pub fn unchain<S: Slot>(slots: &mut [S], head: &mut u32, i: u32) {
    let Some(next) = slots.get(i as usize).map(|s| s.links().hash_next) else { return };
    if *head == i {
        *head = next;
        return;
    }
    let mut cur = *head;
    for _ in 0..slots.len() {
        let Some(after) = slots.get(cur as usize).map(|s| s.links().hash_next) else { return };
        if after == i {
            slots[cur as usize].links_mut().hash_next = next;
            return;
        }
        cur = after;
    }
}

/// Take slot `i` off `list`.
pub fn unlink<S: Slot>(slots: &mut [S], list: &mut List, i: u32) {
    let Links { prev, next, .. } = *slots[i as usize].links();
    match prev {
        NIL => list.head = next,
        p => slots[p as usize].links_mut().next = next,
    }
    match next {
        NIL => list.tail = prev,
        n => slots[n as usize].links_mut().prev = prev,
    }
}

/// Put slot `i` at the head of `list`.
pub fn push_front<S: Slot>(slots: &mut [S], list: &mut List, i: u32) {
    let head = list.head;
    let l = slots[i as usize].links_mut();
    l.prev = NIL;
    l.next = head;
    match head {
        NIL => list.tail = i,
        h => slots[h as usize].links_mut().prev = i,
    }
    list.head = i;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy)]
    struct S(Links);

    impl Slot for S {
        fn links(&self) -> &Links {
            &self.0
        }
        fn links_mut(&mut self) -> &mut Links {
            &mut self.0
        }
    }

    #[test]
    fn a_looping_or_broken_chain_ends_the_walk() {
        // 0 -> 1 -> 0 -> ...: what a worker killed mid-change can leave
        let mut s = vec![S(Links::NONE); 3];
        s[0].0.hash_next = 1;
        s[1].0.hash_next = 0;
        assert_eq!(find(&s, 0, |_| false), None);
        let mut head = 0;
        unchain(&mut s, &mut head, 2);
        assert_eq!(head, 0);
        // an index past the slots
        s[1].0.hash_next = 7;
        assert_eq!(find(&s, 0, |_| false), None);
        unchain(&mut s, &mut head, 2);
        unchain(&mut s, &mut head, 9);
    }

    #[test]
    fn lists_and_chains() {
        let mut s = vec![S(Links::NONE); 4];
        chain_free(&mut s);
        assert_eq!(s.iter().map(|x| x.0.hash_next).collect::<Vec<_>>(), [1, 2, 3, NIL]);
        let mut l = List::EMPTY;
        for i in 0..4 {
            push_front(&mut s, &mut l, i);
        }
        assert_eq!((l.head, l.tail), (3, 0));
        unlink(&mut s, &mut l, 3);
        unlink(&mut s, &mut l, 0);
        assert_eq!((l.head, l.tail), (2, 1));
        let mut head = 0;
        unchain(&mut s, &mut head, 2);
        assert_eq!(find(&s, head, |x| x.0.hash_next == NIL), Some(3));
        unchain(&mut s, &mut head, 0);
        assert_eq!(head, 1);
    }
}
