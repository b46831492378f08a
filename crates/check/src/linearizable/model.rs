//! The register model, and one key's records turned into its operations.

use std::collections::HashMap;

use crate::history::{HistoryRecord, OpKind, Outcome};

/// The interned id of "absent"; values are interned from 1.
pub(super) const ABSENT: u32 = 0;

/// An operation's effect on the register, once its outcome is taken into account.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Effect {
    /// Requires the state to be `value`.
    Read,
    /// Sets the state to `value`.
    Write,
    /// Sets the state to absent.
    Delete,
    /// Requires the state to be `expect`, then sets it to `value`.
    Cas,
    /// A cas whose compare failed: requires the state not to be `expect`.
    CasFail,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Op {
    pub effect: Effect,
    pub value: u32,
    pub expect: u32,
    pub call_ns: u64,
    /// Unused for open operations.
    pub return_ns: u64,
    /// Position of the record in the caller's slice.
    pub record: usize,
    /// A write or delete whose resulting value no operation needs, in a key without failed
    /// cas: nothing can tell it happened except that it must fit in its interval.
    pub blind: bool,
}

impl Op {
    /// The state after this operation, or `None` if it cannot happen in `state`.
    pub(super) fn step(&self, state: u32) -> Option<u32> {
        match self.effect {
            Effect::Read => (state == self.value).then_some(state),
            Effect::Write => Some(self.value),
            Effect::Delete => Some(ABSENT),
            Effect::Cas => (state == self.expect).then_some(self.value),
            Effect::CasFail => (state != self.expect).then_some(state),
        }
    }

    /// Reads and failed cas: they change nothing.
    pub(super) fn observes(&self) -> bool {
        matches!(self.effect, Effect::Read | Effect::CasFail)
    }

    /// Writes and deletes: legal in any state.
    pub(super) fn unconditional(&self) -> bool {
        matches!(self.effect, Effect::Write | Effect::Delete)
    }

    /// The state it leaves when it takes effect (observers: none).
    pub(super) fn produces(&self) -> Option<u32> {
        match self.effect {
            Effect::Write | Effect::Cas => Some(self.value),
            Effect::Delete => Some(ABSENT),
            Effect::Read | Effect::CasFail => None,
        }
    }

    /// The one state it needs, if it needs one.
    pub(super) fn needs(&self) -> Option<u32> {
        match self.effect {
            Effect::Read => Some(self.value),
            Effect::Cas => Some(self.expect),
            Effect::Write | Effect::Delete | Effect::CasFail => None,
        }
    }
}

/// One key's operations, each list sorted by `call_ns`: those with a known outcome
/// ("required": every one must be linearized) and those with an unknown one ("open": each may
/// take effect at any point after its call, or never).
#[derive(Default)]
pub(super) struct KeyOps {
    pub required: Vec<Op>,
    pub open: Vec<Op>,
    /// Values are below this (absent included).
    pub values: u32,
}

impl KeyOps {
    /// Fills `prefix` with the history up to the return of `required[last]`: the operations
    /// that returned by then (in the return order `by_return`, up to `last`) stay required,
    /// those still running become open (observers among them are left out: they may not
    /// have happened yet). Herlihy and Wing: every prefix of a linearizable history is.
    pub(super) fn prefix(&self, by_return: &[u32], last: usize, prefix: &mut KeyOps) {
        let end_ns = self.required[by_return[last] as usize].return_ns;
        prefix.required.clear();
        prefix.open.clear();
        prefix.values = self.values;
        let mut returned = vec![false; self.required.len()];
        for &i in &by_return[..=last] {
            returned[i as usize] = true;
        }
        for (op, returned) in self.required.iter().zip(returned) {
            if returned {
                prefix.required.push(*op);
            } else if op.call_ns <= end_ns && !op.observes() {
                prefix.open.push(Op { blind: false, ..*op });
            }
        }
        prefix
            .open
            .extend(self.open.iter().filter(|op| op.call_ns <= end_ns));
        prefix.open.sort_by_key(|op| op.call_ns);
    }
}

/// Turns one key's records into operations, values interned to u32 ids.
#[derive(Default)]
pub(super) struct OpsBuilder<'a> {
    values: HashMap<&'a str, u32>,
    ops: KeyOps,
    needed: Vec<bool>,
}

impl<'a> OpsBuilder<'a> {
    pub(super) fn build(&mut self, records: &'a [HistoryRecord], indices: &[u32]) -> &KeyOps {
        self.values.clear();
        self.ops.required.clear();
        self.ops.open.clear();
        for &i in indices {
            let r = &records[i as usize];
            let effect = match (r.op, r.outcome) {
                (OpKind::Read, Outcome::Ok) => Effect::Read,
                (OpKind::Cas, Outcome::Fail) => Effect::CasFail,
                (_, Outcome::Fail) | (OpKind::Read, _) => continue,
                (OpKind::Write | OpKind::Insert, _) => Effect::Write,
                (OpKind::Delete, _) => Effect::Delete,
                (OpKind::Cas, _) => Effect::Cas,
            };
            let op = Op {
                effect,
                value: self.intern(r.value.as_deref()),
                expect: self.intern(r.expect.as_deref()),
                call_ns: r.call_ns,
                return_ns: r.return_ns,
                record: i as usize,
                blind: false,
            };
            match r.outcome {
                Outcome::Unknown => self.ops.open.push(op),
                Outcome::Ok | Outcome::Fail => self.ops.required.push(op),
            }
        }
        self.ops.values = self.values.len() as u32 + 1;
        self.ops.required.sort_by_key(|op| op.call_ns);
        self.ops.open.sort_by_key(|op| op.call_ns);
        self.drop_trivial_cas_fail();
        if !self.ops.required.iter().any(|op| op.effect == Effect::CasFail) {
            self.mark_needed();
            self.drop_unneeded_open();
            self.mark_blind();
        }
        &self.ops
    }

    fn intern(&mut self, value: Option<&'a str>) -> u32 {
        let Some(value) = value else {
            return ABSENT;
        };
        let next = self.values.len() as u32 + 1;
        *self.values.entry(value).or_insert(next)
    }

    /// Drops the failed cas whose expect the key can never hold (no operation writes it, and it
    /// is not "absent", the initial state): they are legal in every state, so they constrain
    /// nothing, and without them the reductions that failed cas turn off apply.
    fn drop_trivial_cas_fail(&mut self) {
        let produced = &mut self.needed;
        produced.clear();
        produced.resize(self.values.len() + 1, false);
        produced[ABSENT as usize] = true;
        for op in self.ops.required.iter().chain(&self.ops.open) {
            if let Some(value) = op.produces() {
                produced[value as usize] = true;
            }
        }
        self.ops
            .required
            .retain(|op| op.effect != Effect::CasFail || produced[op.expect as usize]);
    }

    /// Which values some operation needs (a read's value, a cas's expect).
    fn mark_needed(&mut self) {
        self.needed.clear();
        self.needed.resize(self.values.len() + 1, false);
        for op in self.ops.required.iter().chain(&self.ops.open) {
            if let Some(value) = op.needs() {
                self.needed[value as usize] = true;
            }
        }
    }

    /// Drops the open operations whose resulting value nothing needs. Sound without failed
    /// cas: then every operation that depends on the state names the value it needs, so after
    /// such an operation only writes and deletes can follow until the state changes again, and
    /// they would follow its predecessor just as well. Without this, each lost write would
    /// double the orders the search may try.
    fn drop_unneeded_open(&mut self) {
        let needed = &self.needed;
        self.ops
            .open
            .retain(|op| op.produces().is_none_or(|value| needed[value as usize]));
    }

    /// Marks the required writes and deletes whose value nothing needs (see `search`).
    fn mark_blind(&mut self) {
        for op in &mut self.ops.required {
            op.blind = op.unconditional() && op.produces().is_some_and(|value| !self.needed[value as usize]);
        }
    }
}

/// Per value: how many operations not linearized yet need it (required reads and cas) and how
/// many produce it; tells when some operation can no longer come at all.
#[derive(Default)]
pub(super) struct Supply {
    needers: Vec<u32>,
    producers: Vec<u32>,
    /// Values with needers and no producers left.
    starved: u32,
    /// The xor of those values: the value itself when there is one.
    starved_xor: u32,
}

impl Supply {
    pub(super) fn reset(&mut self, ops: &KeyOps) {
        self.needers.clear();
        self.needers.resize(ops.values as usize, 0);
        self.producers.clear();
        self.producers.resize(ops.values as usize, 0);
        (self.starved, self.starved_xor) = (0, 0);
        for op in &ops.required {
            self.give_back(op, true);
        }
        for op in &ops.open {
            self.give_back(op, false);
        }
    }

    /// `op` (`required` or open) is linearized.
    pub(super) fn take(&mut self, op: &Op, required: bool) {
        self.change(op, required, |count| *count -= 1);
    }

    /// `op` is no longer linearized.
    pub(super) fn give_back(&mut self, op: &Op, required: bool) {
        self.change(op, required, |count| *count += 1);
    }

    fn change(&mut self, op: &Op, required: bool, f: impl Fn(&mut u32)) {
        let needs = op.needs().filter(|_| required);
        for (value, counts) in [(needs, 0), (op.produces(), 1)] {
            let Some(value) = value else { continue };
            let v = value as usize;
            let before = self.needers[v] > 0 && self.producers[v] == 0;
            f(if counts == 0 {
                &mut self.needers[v]
            } else {
                &mut self.producers[v]
            });
            let after = self.needers[v] > 0 && self.producers[v] == 0;
            if before != after {
                self.starved = if after { self.starved + 1 } else { self.starved - 1 };
                self.starved_xor ^= value;
            }
        }
    }

    /// Whether an operation left needs a value that is not `state` and that nothing left
    /// produces: it can never come, so no linearization extends this one.
    pub(super) fn starved(&self, state: u32) -> bool {
        self.starved > 1 || (self.starved == 1 && self.starved_xor != state)
    }
}
