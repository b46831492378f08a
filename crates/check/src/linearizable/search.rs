//! The search over one key's operations: Wing and Gong's depth-first search for a
//! linearization, with Lowe's memo of visited (linearized set, state) pairs, as Knossos and
//! Porcupine do it, plus reductions that are exact for a register.
//!
//! The operations with a known return ("required": all must be linearized) live as call and
//! return events in a doubly linked list in time order. An operation may come next when its
//! call is before the first return left in the list (that operation must come before anything
//! called after its return). Linearizing one removes its two events (dancing links: lifts are
//! undone in reverse order on backtrack).
//!
//! Operations of unknown outcome ("open") have no return: they may take effect at any point
//! after their call, or never. They sit in a second list in call order and may come next when
//! called before the first return.
//!
//! Each reduction below keeps, among a node's children, one from which the linearization can
//! be finished whenever the node's can (the same operations in another order), or fails only
//! nodes that cannot be finished; so the memo stays exact: a node in it was finished or failed.
//! 1. An observer (a read, a failed cas) that may come next and is legal in the current state
//!    is taken without trying any alternative: it changes nothing, so any linearization can be
//!    reordered to take it now. If that child fails, or was visited before, the node fails.
//! 2. Otherwise the children are the legal operations that change the state, tried in the
//!    order most likely to succeed first: the operation of the first return, then those that
//!    produce the value it needs, then the rest by return time, open operations last (so a
//!    history whose lost writes are not needed never explores their subsets). Of the writes
//!    and deletes that leave the same value, only the one with the earliest return is tried:
//!    a linearization that starts with another can swap the two (both may come now and leave
//!    the same state; the earlier return fits wherever the later one stood). If the first
//!    return's operation needs a value that nothing which may come before it produces, the
//!    node fails at once.
//! 3. Blind writes (`Op::blind`: no operation needs their value, no failed cas in the key) are
//!    no children of their own unless their return is the first: each is taken, with every
//!    other blind write that may come, just before the next write or delete taken. In a
//!    linearization a blind write must be followed by a write or delete (nothing may observe
//!    its value), and moving it earlier, to just before the first write or delete after the
//!    point where it may come, keeps the states and the real-time order. So their orders
//!    among themselves and the other writes are never explored.
//! 4. After each pick, a node where some operation left needs a value that is not the state
//!    and that nothing left produces fails at once (`Supply`).
//! 5. With open operations, a node whose state and required set equal a visited node's, and
//!    whose open set contains that node's, is pruned (`Dominance`): open operations are
//!    optional, so it can finish nothing the visited one could not.

use super::cache::{Cache, Dominance};
use super::list::{link, relink, unlink};
use super::model::{ABSENT, Effect, KeyOps, Op, Supply};
use super::set::{Segment, mix};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum KeyVerdict {
    Linearizable,
    NotLinearizable,
    /// The budget ran out first.
    Unknown,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Limits {
    pub steps_max: u64,
    pub cache_bytes_max: usize,
}

const HEAD: u32 = 0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pick {
    Required(u32),
    Open(u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FrameKind {
    /// One of the node's candidates: when its child fails, the node tries the next.
    Branch,
    /// An observer taken alone (reduction 1): when its child fails, so does its node.
    Forced,
    /// A blind write taken before the `Branch` above it (reduction 3), undone with it.
    Absorbed,
}

#[derive(Clone, Copy)]
struct Frame {
    pick: Pick,
    /// The state before `pick`.
    state: u32,
    kind: FrameKind,
    /// Where the candidates of the node that made the pick start in `candidates`.
    base: u32,
    /// That node's next candidate to try if this pick fails.
    next: u32,
}

/// Where the search stands: the register's value and how many required operations are
/// linearized.
struct Walk {
    state: u32,
    linearized: usize,
}

#[derive(Clone, Copy)]
enum Cursor {
    /// Looking from event node `node` on for an observer that may come now (reduction 1).
    Observe(u32),
    /// No observer may come now; `node` is the first return: list the node's candidates.
    Expand(u32),
    /// Trying the node's candidates `candidates[i..]` (its list starts at `base`).
    Try { base: u32, i: u32 },
    /// The node has failed: undo the pick that made it.
    Backtrack,
}

/// The search's buffers, kept from key to key.
#[derive(Default)]
pub(super) struct Searcher {
    /// Event list: node 0 is the head, 1..=2n the events in time order, 2n+1 the tail.
    next: Vec<u32>,
    prev: Vec<u32>,
    node_op: Vec<u32>,
    node_is_call: Vec<bool>,
    node_time_ns: Vec<u64>,
    call_node: Vec<u32>,
    return_node: Vec<u32>,
    /// Open list: node 0 is the head, node i + 1 is open operation i, then the tail.
    open_next: Vec<u32>,
    open_prev: Vec<u32>,
    required_set: Segment,
    open_set: Segment,
    stack: Vec<Frame>,
    /// The candidate lists of the expanded nodes on the current path, one after the other.
    candidates: Vec<Pick>,
    ranked: Vec<Candidate>,
    absorbed: Vec<u32>,
    supply: Supply,
    cache: Cache,
    dominance: Dominance,
    /// Whether the key has open operations (and so uses `dominance`).
    has_open: bool,
    key: Vec<u64>,
    events: Vec<(u64, bool, u32)>,
}

impl Searcher {
    /// Decides one key; also returns the steps taken.
    pub(super) fn check(&mut self, ops: &KeyOps, limits: &Limits) -> (KeyVerdict, u64) {
        self.build(ops);
        if ops.required.is_empty() {
            return (KeyVerdict::Linearizable, 0);
        }
        let mut walk = Walk {
            state: ABSENT,
            linearized: 0,
        };
        let mut steps = 0;
        let mut cursor = Cursor::Observe(self.next[HEAD as usize]);
        loop {
            if steps == limits.steps_max || self.bytes() > limits.cache_bytes_max {
                return (KeyVerdict::Unknown, steps);
            }
            steps += 1;
            cursor = match cursor {
                Cursor::Observe(node) => self.observe(node, ops, &mut walk),
                Cursor::Expand(node) => {
                    let base = self.candidates.len() as u32;
                    self.expand(node, ops, walk.state);
                    Cursor::Try { base, i: base }
                }
                Cursor::Try { base, i } => self.try_candidate(base, i, ops, &mut walk),
                Cursor::Backtrack => match self.backtrack(ops, &mut walk) {
                    Some(cursor) => cursor,
                    None => return (KeyVerdict::NotLinearizable, steps),
                },
            };
            if walk.linearized == ops.required.len() {
                return (KeyVerdict::Linearizable, steps);
            }
            if cfg!(debug_assertions) && steps % 1024 == 0 {
                self.invariants(ops, &walk);
            }
        }
    }

    /// What holds between steps; checked now and then in debug builds (it costs a pass over
    /// the stack).
    fn invariants(&self, ops: &KeyOps, walk: &Walk) {
        let required = self
            .stack
            .iter()
            .filter(|f| matches!(f.pick, Pick::Required(_)))
            .count();
        assert_eq!(walk.linearized, required);
        assert_eq!(self.required_set.len(), required);
        assert_eq!(self.open_set.len(), self.stack.len() - required);
        self.required_set.invariants();
        self.open_set.invariants();
        let mut base = 0;
        for frame in &self.stack {
            if frame.kind == FrameKind::Branch {
                assert!(base <= frame.base && frame.base < frame.next);
                assert!(frame.next as usize <= self.candidates.len());
                base = frame.base;
            }
        }
        if let Some(top) = self.stack.last() {
            assert_eq!(self.op(top.pick, ops).step(top.state), Some(walk.state));
        }
    }

    /// Where to go once picks have made a new node.
    fn arrive(&self, walk: &Walk) -> Cursor {
        if self.supply.starved(walk.state) {
            Cursor::Backtrack
        } else {
            Cursor::Observe(self.next[HEAD as usize])
        }
    }

    /// At event `node`, looking for an observer to take alone (reduction 1).
    fn observe(&mut self, node: u32, ops: &KeyOps, walk: &mut Walk) -> Cursor {
        if !self.node_is_call[node as usize] {
            // A return: nothing called later may be linearized before it.
            assert!(
                node != HEAD && (node as usize) < self.next.len() - 1,
                "list ends before its returns"
            );
            return Cursor::Expand(node);
        }
        let i = self.node_op[node as usize];
        let op = &ops.required[i as usize];
        if !op.observes() || op.step(walk.state).is_none() {
            return Cursor::Observe(self.next[node as usize]);
        }
        self.absorbed.clear();
        if !self.try_pick(Pick::Required(i), ops, walk, (FrameKind::Forced, 0, 0)) {
            // This node was reached before by another order, and failed.
            return Cursor::Backtrack;
        }
        self.arrive(walk)
    }

    /// Tries candidate `i` of the node whose candidates start at `base`.
    fn try_candidate(&mut self, base: u32, i: u32, ops: &KeyOps, walk: &mut Walk) -> Cursor {
        let Some(&pick) = self.candidates.get(i as usize) else {
            self.candidates.truncate(base as usize);
            return Cursor::Backtrack;
        };
        self.absorbed.clear();
        if self.op(pick, ops).unconditional() {
            self.collect_blind(pick, ops);
        }
        if !self.try_pick(pick, ops, walk, (FrameKind::Branch, base, i + 1)) {
            return Cursor::Try { base, i: i + 1 };
        }
        self.arrive(walk)
    }

    /// Undoes the pick that made the current, failed node; `None` when that is the root.
    fn backtrack(&mut self, ops: &KeyOps, walk: &mut Walk) -> Option<Cursor> {
        let frame = self.stack.pop()?;
        assert_ne!(
            frame.kind,
            FrameKind::Absorbed,
            "absorbed picks go with their branch"
        );
        self.undo(frame, ops, walk);
        while self.stack.last().is_some_and(|f| f.kind == FrameKind::Absorbed) {
            let below = self.stack.pop().expect("checked above");
            self.undo(below, ops, walk);
        }
        Some(match frame.kind {
            FrameKind::Forced => Cursor::Backtrack,
            FrameKind::Branch | FrameKind::Absorbed => Cursor::Try {
                base: frame.base,
                i: frame.next,
            },
        })
    }

    fn build(&mut self, ops: &KeyOps) {
        let n = ops.required.len();
        self.events.clear();
        for (i, op) in ops.required.iter().enumerate() {
            debug_assert!(op.call_ns <= op.return_ns);
            self.events.push((op.call_ns, false, i as u32));
            self.events.push((op.return_ns, true, i as u32));
        }
        // At equal times calls sort before returns: intervals that touch count as concurrent,
        // since a clock's resolution cannot order them.
        self.events.sort_unstable();
        link(&mut self.next, &mut self.prev, 2 * n + 2);
        self.node_op.clear();
        self.node_is_call.clear();
        self.node_time_ns.clear();
        self.call_node.clear();
        self.call_node.resize(n, 0);
        self.return_node.clear();
        self.return_node.resize(n, 0);
        // The head, the events, the tail.
        self.node_op.push(u32::MAX);
        self.node_is_call.push(false);
        self.node_time_ns.push(0);
        for (k, &(time_ns, is_return, op)) in self.events.iter().enumerate() {
            let node = k as u32 + 1;
            self.node_op.push(op);
            self.node_is_call.push(!is_return);
            self.node_time_ns.push(time_ns);
            let slot = if is_return {
                &mut self.return_node
            } else {
                &mut self.call_node
            };
            slot[op as usize] = node;
        }
        self.node_op.push(u32::MAX);
        self.node_is_call.push(false);
        self.node_time_ns.push(u64::MAX);
        link(&mut self.open_next, &mut self.open_prev, ops.open.len() + 2);
        self.required_set.reset(n, 0);
        self.open_set.reset(ops.open.len(), 1 << 32);
        self.stack.clear();
        self.candidates.clear();
        self.cache.clear();
        self.dominance.clear();
        self.has_open = !ops.open.is_empty();
        self.supply.reset(ops);
    }

    /// Appends the candidates of the current node, stuck at return node `stuck`, to
    /// `candidates` in the order to try them (reduction 2).
    fn expand(&mut self, stuck: u32, ops: &KeyOps, state: u32) {
        let due = self.node_op[stuck as usize];
        let due_op = &ops.required[due as usize];
        let needed = due_op.needs();
        let produces_needed = |op: &Op| needed.is_some() && op.produces() == needed;
        // Ranks: 0 the first return's operation, 1 and 2 the producers of the value it needs
        // (required, then open), 3 and 4 the rest. `producer`: whether anything that may come
        // before the first return produces that value, legal now or not (a cas may become
        // legal after others).
        let mut producer = false;
        self.ranked.clear();
        let mut node = self.next[HEAD as usize];
        while node != stuck {
            let i = self.node_op[node as usize];
            let op = &ops.required[i as usize];
            producer |= produces_needed(op);
            if !op.observes() && (!op.blind || i == due) && op.step(state).is_some() {
                let rank = match (i == due, produces_needed(op)) {
                    (true, _) => 0,
                    (false, true) => 1,
                    (false, false) => 3,
                };
                self.ranked
                    .push(Candidate::new(op, rank, op.return_ns, Pick::Required(i)));
            }
            node = self.next[node as usize];
        }
        let open_tail = ops.open.len() as u32 + 1;
        let mut node = self.open_next[HEAD as usize];
        while node != open_tail && ops.open[node as usize - 1].call_ns <= self.node_time_ns[stuck as usize] {
            let op = &ops.open[node as usize - 1];
            producer |= produces_needed(op);
            if op.step(state).is_some() {
                let rank = if produces_needed(op) { 2 } else { 4 };
                self.ranked
                    .push(Candidate::new(op, rank, op.call_ns, Pick::Open(node - 1)));
            }
            node = self.open_next[node as usize];
        }
        // The first return's operation needs a value that neither the state has nor anything
        // that may come before it produces: it can never come, so neither can anything after.
        if needed.is_some() && due_op.step(state).is_none() && !producer {
            return;
        }
        // Of the writes (and deletes) that leave the same value, only the one with the earliest
        // return needs trying: a linearization that starts with another can swap the two (both
        // may come now, leave the same state, and the earlier return fits wherever the later
        // one stood), and an open one can stand in for another or be left out.
        self.ranked
            .sort_unstable_by_key(|c| (c.class, c.return_ns, pick_order(c.pick)));
        self.ranked.dedup_by_key(|c| c.class);
        self.ranked
            .sort_unstable_by_key(|c| (c.rank, c.time_ns, pick_order(c.pick)));
        self.candidates.extend(self.ranked.iter().map(|c| c.pick));
    }

    fn op<'o>(&self, pick: Pick, ops: &'o KeyOps) -> &'o Op {
        match pick {
            Pick::Required(i) => &ops.required[i as usize],
            Pick::Open(i) => &ops.open[i as usize],
        }
    }

    /// Fills `absorbed` with the blind writes other than `pick` that may come now.
    fn collect_blind(&mut self, pick: Pick, ops: &KeyOps) {
        let mut node = self.next[HEAD as usize];
        while self.node_is_call[node as usize] {
            let i = self.node_op[node as usize];
            if ops.required[i as usize].blind && pick != Pick::Required(i) {
                self.absorbed.push(i);
            }
            node = self.next[node as usize];
        }
    }

    /// Linearizes the blind writes in `absorbed`, then `pick`, if `pick`'s step is legal and
    /// the resulting (set, state) is new; `(kind, base, next)` go into `pick`'s frame.
    fn try_pick(&mut self, pick: Pick, ops: &KeyOps, walk: &mut Walk, frame: (FrameKind, u32, u32)) -> bool {
        let op = self.op(pick, ops);
        let Some(new_state) = op.step(walk.state) else {
            return false;
        };
        for k in 0..self.absorbed.len() {
            self.required_set.insert(self.absorbed[k] as usize);
        }
        self.set_of(pick).insert(pick_bit(pick));
        if !self.remember(new_state) {
            for k in 0..self.absorbed.len() {
                self.required_set.remove(self.absorbed[k] as usize);
            }
            self.set_of(pick).remove(pick_bit(pick));
            return false;
        }
        for k in 0..self.absorbed.len() {
            let absorbed = Pick::Required(self.absorbed[k]);
            self.push(absorbed, ops, walk, (FrameKind::Absorbed, 0, 0));
            walk.state = self
                .op(absorbed, ops)
                .produces()
                .expect("blind picks are writes or deletes");
        }
        self.push(pick, ops, walk, frame);
        walk.state = new_state;
        true
    }

    /// Records `pick` (the caller sets the state it leaves) and takes it out of the lists.
    fn push(&mut self, pick: Pick, ops: &KeyOps, walk: &mut Walk, (kind, base, next): (FrameKind, u32, u32)) {
        walk.linearized += usize::from(matches!(pick, Pick::Required(_)));
        self.stack.push(Frame {
            pick,
            state: walk.state,
            kind,
            base,
            next,
        });
        self.lift(pick);
        self.supply
            .take(self.op(pick, ops), matches!(pick, Pick::Required(_)));
    }

    /// Undoes a pick (popped from the stack) but keeps it in the memo.
    fn undo(&mut self, frame: Frame, ops: &KeyOps, walk: &mut Walk) {
        let required = matches!(frame.pick, Pick::Required(_));
        self.set_of(frame.pick).remove(pick_bit(frame.pick));
        self.unlift(frame.pick);
        self.supply.give_back(self.op(frame.pick, ops), required);
        walk.state = frame.state;
        walk.linearized -= usize::from(required);
    }

    fn set_of(&mut self, pick: Pick) -> &mut Segment {
        match pick {
            Pick::Required(_) => &mut self.required_set,
            Pick::Open(_) => &mut self.open_set,
        }
    }

    /// Adds (current sets, `state`) to the memo; false if it was there.
    fn remember(&mut self, state: u32) -> bool {
        let (required, open) = (&self.required_set, &self.open_set);
        let hash = required.hash ^ open.hash ^ mix(u64::from(state) | 2 << 32);
        self.key.clear();
        self.key.push(u64::from(state) << 32 | required.full as u64);
        self.key
            .push((open.full as u64) << 32 | required.words().len() as u64);
        self.key.extend_from_slice(required.words());
        self.key.extend_from_slice(open.words());
        if !self.cache.insert(hash, &self.key) {
            return false;
        }
        if !self.has_open {
            return true;
        }
        let required_key = &self.key[..2 + required.words().len()];
        let required_hash = required.hash ^ mix(u64::from(state) | 3 << 32);
        !self
            .dominance
            .dominated(required_hash, required_key, open.full, open.words())
    }

    /// Memory that grows with the search: the memo and the candidate lists.
    fn bytes(&self) -> usize {
        self.cache.bytes() + self.dominance.bytes() + self.candidates.capacity() * size_of::<Pick>()
    }

    fn lift(&mut self, pick: Pick) {
        match pick {
            Pick::Required(i) => {
                let (call, ret) = (self.call_node[i as usize], self.return_node[i as usize]);
                unlink(&mut self.next, &mut self.prev, call);
                unlink(&mut self.next, &mut self.prev, ret);
            }
            Pick::Open(i) => unlink(&mut self.open_next, &mut self.open_prev, i + 1),
        }
    }

    fn unlift(&mut self, pick: Pick) {
        match pick {
            Pick::Required(i) => {
                let (call, ret) = (self.call_node[i as usize], self.return_node[i as usize]);
                relink(&mut self.next, &mut self.prev, ret);
                relink(&mut self.next, &mut self.prev, call);
            }
            Pick::Open(i) => relink(&mut self.open_next, &mut self.open_prev, i + 1),
        }
    }
}

/// A child of a node, to rank and deduplicate.
struct Candidate {
    rank: u8,
    /// Orders candidates of one rank: the return for required operations, the call for open.
    time_ns: u64,
    /// Return time, infinite for open operations.
    return_ns: u64,
    /// Candidates of one class are interchangeable: writes and deletes by the value they
    /// leave, every other operation a class of its own.
    class: (bool, u32, bool),
    pick: Pick,
}

impl Candidate {
    fn new(op: &Op, rank: u8, time_ns: u64, pick: Pick) -> Candidate {
        let (open, index) = pick_order(pick);
        let class = match op.effect {
            Effect::Write | Effect::Delete => (true, op.produces().unwrap_or(ABSENT), false),
            Effect::Read | Effect::Cas | Effect::CasFail => (false, index, open),
        };
        Candidate {
            rank,
            time_ns,
            return_ns: if open { u64::MAX } else { op.return_ns },
            class,
            pick,
        }
    }
}

fn pick_bit(pick: Pick) -> usize {
    match pick {
        Pick::Required(i) | Pick::Open(i) => i as usize,
    }
}

/// A total order among picks of equal rank and time, so that the search is deterministic.
fn pick_order(pick: Pick) -> (bool, u32) {
    match pick {
        Pick::Required(i) => (false, i),
        Pick::Open(i) => (true, i),
    }
}
