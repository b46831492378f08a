//! The rules the controller installs at a failed switch's neighbours (paper Algorithms 2 and 3):
//! what to do with a query whose next chain hop is that switch. A rule for one virtual group
//! (recovery: stop, then replace) takes priority over a rule for all of them (failover: skip),
//! as the paper's recovery rules "override the rules of fast failover (by using higher rule
//! priorities)". Each lookup is two exact matches, as a switch's match-action tables do.

use std::collections::HashMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Go on to the chain's next switch; the reply if there is none (Algorithm 2).
    Skip,
    /// Drop writes (Algorithm 3, phase 1, head or middle).
    StopWrites,
    /// Drop reads and writes (Algorithm 3, phase 1, tail).
    StopAll,
    /// Send to this switch instead (Algorithm 3, phase 2).
    Replace(u16),
}

/// The table is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RulesFull;

pub struct Rules {
    every_group: HashMap<u16, Action>,
    per_group: HashMap<(u16, u16), Action>,
    rules_max: usize,
}

impl Rules {
    pub fn new(rules_max: usize) -> Rules {
        Rules {
            every_group: HashMap::new(),
            per_group: HashMap::new(),
            rules_max,
        }
    }

    /// The action for queries of `group` bound for `switch`, if any.
    pub fn lookup(&self, switch: u16, group: u16) -> Option<Action> {
        if self.every_group.is_empty() && self.per_group.is_empty() {
            return None;
        }
        self.per_group
            .get(&(switch, group))
            .or_else(|| self.every_group.get(&switch))
            .copied()
    }

    /// Sets the rule for `switch` and `group` (`None`: every group).
    pub fn set(&mut self, switch: u16, group: Option<u16>, action: Action) -> Result<(), RulesFull> {
        let full = self.len() >= self.rules_max;
        match group {
            None if full && !self.every_group.contains_key(&switch) => return Err(RulesFull),
            None => self.every_group.insert(switch, action),
            Some(g) if full && !self.per_group.contains_key(&(switch, g)) => return Err(RulesFull),
            Some(g) => self.per_group.insert((switch, g), action),
        };
        Ok(())
    }

    pub fn clear(&mut self, switch: u16, group: Option<u16>) {
        match group {
            None => self.every_group.remove(&switch),
            Some(g) => self.per_group.remove(&(switch, g)),
        };
    }

    pub fn len(&self) -> usize {
        self.every_group.len() + self.per_group.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Paper 5.2: recovery rules for a group override the failover rule for all groups.
    #[test]
    fn a_group_rule_overrides_the_rule_for_every_group() {
        let mut r = Rules::new(3);
        r.set(1, None, Action::Skip).unwrap();
        r.set(1, Some(7), Action::StopWrites).unwrap();
        assert_eq!(r.lookup(1, 7), Some(Action::StopWrites));
        assert_eq!(r.lookup(1, 8), Some(Action::Skip));
        assert_eq!(r.lookup(2, 7), None);
        r.set(1, Some(7), Action::Replace(3)).unwrap();
        assert_eq!(r.lookup(1, 7), Some(Action::Replace(3)));
        r.set(2, None, Action::Skip).unwrap();
        assert_eq!(r.set(3, None, Action::Skip), Err(RulesFull));
        assert_eq!(
            r.set(2, None, Action::StopAll),
            Ok(()),
            "replacing a rule needs no room"
        );
        r.clear(1, Some(7));
        assert_eq!(r.lookup(1, 7), Some(Action::Skip));
    }
}
