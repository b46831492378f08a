//! Doubly linked lists over node indices, with Knuth's dancing links: a node taken out keeps
//! its neighbours, so putting nodes back in the reverse order restores the list.

/// Makes `nodes` nodes one list in index order: 0 the head, `nodes - 1` the tail.
pub(super) fn link(next: &mut Vec<u32>, prev: &mut Vec<u32>, nodes: usize) {
    next.clear();
    prev.clear();
    next.extend((1..=nodes as u32).map(|k| k.min(nodes as u32 - 1)));
    prev.extend((0..nodes as u32).map(|k| k.saturating_sub(1)));
}

pub(super) fn unlink(next: &mut [u32], prev: &mut [u32], node: u32) {
    let (p, n) = (prev[node as usize], next[node as usize]);
    next[p as usize] = n;
    prev[n as usize] = p;
}

/// Puts back the last node unlinked (the node still knows its neighbours).
pub(super) fn relink(next: &mut [u32], prev: &mut [u32], node: u32) {
    let (p, n) = (prev[node as usize], next[node as usize]);
    next[p as usize] = node;
    prev[n as usize] = node;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unlink_and_relink_in_reverse_restore_the_list() {
        let (mut next, mut prev) = (Vec::new(), Vec::new());
        link(&mut next, &mut prev, 6);
        let (next0, prev0) = (next.clone(), prev.clone());
        unlink(&mut next, &mut prev, 2);
        unlink(&mut next, &mut prev, 3);
        assert_eq!(next[1], 4);
        assert_eq!(prev[4], 1);
        relink(&mut next, &mut prev, 3);
        relink(&mut next, &mut prev, 2);
        assert_eq!((next, prev), (next0, prev0));
    }
}
