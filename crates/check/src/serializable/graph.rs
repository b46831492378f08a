//! Without a claimed order: a dependency graph of the edges the history makes certain, and its
//! cycles.
//!
//! Nodes are the applied transactions (plus helper nodes, below). Edges `a -> b` mean "a took
//! effect before b in every serialization":
//! - write-read: b read a value a wrote (values are unique per key, so a is the only writer);
//! - read-write: b overwrote the version a read. Known in two cases. A transaction that read a
//!   version and then wrote the key installed the very next version, so every other reader of
//!   that version precedes it. A read of absent on a key that no transaction that may have
//!   taken effect ever deletes saw the initial state, so it precedes every writer of the key;
//! - write-write: a transaction that read the initial state and wrote the key precedes every
//!   other writer of it;
//! - real time (when strict): a committed a returned before b was called.
//!
//! To stay linear, "every reader of the initial state precedes every writer" goes through one
//! helper node per key, and real-time order through a chain of helper nodes, one per return in
//! time order. A helper node lies on no cycle of helper nodes alone, so every cycle passes
//! through transactions, and listing those transactions gives the cycle.
//!
//! What it misses: version orders that only follow from reasoning over several keys (a read
//! that sees one transaction's write on one key and an older version on another), blind
//! writes whose order nobody observed, and anything involving transactions of unknown outcome
//! whose writes nobody read. A history with no cycle here may still not be serializable.

use crate::history::Outcome;

use super::txns::{ABSENT, Txns};
use super::writes::{OwnWrites, Source, Writes, classify};
use super::{CYCLE_STEPS_MAX, CycleStep, Dependency, TxnViolation, Violations};

/// No key: a real-time edge.
const NO_KEY: u32 = u32::MAX;
const UNVISITED: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Edge {
    from: u32,
    to: u32,
    dependency: Dependency,
    key: u32,
}

/// Edges as they are found; nodes `0..txns` are transactions, the rest helpers.
struct Builder {
    nodes: usize,
    edges: Vec<Edge>,
}

impl Builder {
    fn helper(&mut self) -> u32 {
        self.nodes += 1;
        // RECORDS_MAX keeps transactions plus helpers below u32::MAX.
        u32::try_from(self.nodes - 1).expect("helper nodes are bounded by the records")
    }

    fn edge(&mut self, from: u32, to: u32, dependency: Dependency, key: u32) {
        assert_ne!(from, to, "a dependency of a node on itself");
        self.edges.push(Edge {
            from,
            to,
            dependency,
            key,
        });
    }
}

/// A committed read of a version: `(key, value, reader, whether the reader then writes the key)`.
type VersionRead = (u32, u32, u32, bool);

/// Checks the committed reads, builds the graph and reports its cycles (one per strongly
/// connected component). Returns the number of reads checked.
pub(super) fn check_graph(
    txns: &Txns,
    writes: &Writes,
    applied: &[bool],
    strict: bool,
    violations: &mut Violations,
) -> u64 {
    let mut builder = Builder {
        nodes: txns.txns.len(),
        edges: Vec::new(),
    };
    let (reads_checked, mut version_reads) = read_edges(txns, writes, violations, &mut builder);
    version_edges(txns, applied, &mut version_reads, &mut builder);
    if strict {
        real_time_edges(txns, applied, &mut builder);
    }
    let graph = Csr::new(builder.nodes, builder.edges);
    report_cycles(txns, &graph, violations);
    reads_checked
}

/// Write-read edges, the reads that name a version, and the violations a read shows alone.
fn read_edges(
    txns: &Txns,
    writes: &Writes,
    violations: &mut Violations,
    builder: &mut Builder,
) -> (u64, Vec<VersionRead>) {
    // Absent is the initial version only on keys nobody that may have taken effect deletes.
    let deleted = super::writes::deleted_by(txns, |t| txns.txns[t as usize].outcome != Outcome::Fail);
    let mut own = OwnWrites::new(txns.keys.len());
    let mut writes_key = OwnWrites::new(txns.keys.len());
    let mut reads_checked = 0;
    let mut version_reads = Vec::new();
    for (t, txn) in txns.txns.iter().enumerate() {
        if txn.outcome != Outcome::Ok {
            continue;
        }
        let t = t as u32;
        let ops = &txns.ops[txn.ops.clone()];
        writes_key.begin(t);
        for op in ops.iter().filter(|op| op.write) {
            writes_key.write(op.key, op.value);
        }
        own.begin(t);
        for &op in ops {
            if op.write {
                own.write(op.key, op.value);
                continue;
            }
            reads_checked += 1;
            let overwrites = writes_key.get(op.key).is_some();
            match classify(txns, writes, t, op, own.get(op.key)) {
                Err(bad) => violations.push(|| bad.violation(txns, t, op)),
                Ok(Source::Own) => {}
                Ok(Source::Absent) if deleted[op.key as usize] => {}
                Ok(Source::Absent) => version_reads.push((op.key, ABSENT, t, overwrites)),
                Ok(Source::Writer(w)) => {
                    builder.edge(w, t, Dependency::WriteRead, op.key);
                    version_reads.push((op.key, op.value, t, overwrites));
                }
            }
        }
    }
    (reads_checked, version_reads)
}

/// Read-write and write-write edges from the versions read (see the module comment).
fn version_edges(txns: &Txns, applied: &[bool], reads: &mut [VersionRead], builder: &mut Builder) {
    reads.sort_unstable();
    let writers = writers_by_key(txns, applied);
    for group in reads.chunk_by(|a, b| (a.0, a.1) == (b.0, b.1)) {
        let (key, value) = (group[0].0, group[0].1);
        // A transaction may read one version twice; count it once.
        let mut overwriters = group.iter().filter(|r| r.3).map(|r| r.2);
        let first = overwriters.next();
        // Two overwriters of one version is already a cycle (a lost update): more add nothing.
        let second = overwriters.find(|&o| Some(o) != first);
        let overwriters = [first, second];
        for &(_, _, reader, _) in group {
            for o in overwriters.into_iter().flatten().filter(|&o| o != reader) {
                builder.edge(reader, o, Dependency::ReadWrite, key);
            }
        }
        if value != ABSENT {
            continue;
        }
        let start = writers.partition_point(|&(k, _)| k < key);
        let end = writers.partition_point(|&(k, _)| k <= key);
        let key_writers = &writers[start..end];
        let initial = builder.helper();
        let mut last_reader = None;
        for &(_, _, reader, overwrites) in group {
            if !overwrites && last_reader != Some(reader) {
                builder.edge(reader, initial, Dependency::ReadWrite, key);
                last_reader = Some(reader);
            }
        }
        for &(_, w) in key_writers {
            builder.edge(initial, w, Dependency::ReadWrite, key);
            for o in overwriters.into_iter().flatten().filter(|&o| o != w) {
                builder.edge(o, w, Dependency::WriteWrite, key);
            }
        }
    }
}

/// `(key, transaction)` for every applied transaction that writes the key, sorted.
fn writers_by_key(txns: &Txns, applied: &[bool]) -> Vec<(u32, u32)> {
    let mut writers = Vec::new();
    for (t, txn) in txns.txns.iter().enumerate() {
        if applied[t] {
            let keys = txns.ops[txn.ops.clone()]
                .iter()
                .filter(|op| op.write)
                .map(|op| (op.key, t as u32));
            writers.extend(keys);
        }
    }
    writers.sort_unstable();
    writers.dedup();
    writers
}

/// `a -> b` whenever committed `a` returned before applied `b` was called, through a chain of
/// helper nodes, one per committed return in time order.
fn real_time_edges(txns: &Txns, applied: &[bool], builder: &mut Builder) {
    let mut returns: Vec<(u64, u32)> = Vec::new();
    let mut calls: Vec<(u64, u32)> = Vec::new();
    for (t, txn) in txns.txns.iter().enumerate() {
        if txn.outcome == Outcome::Ok {
            returns.push((txn.return_ns, t as u32));
        }
        if applied[t] {
            calls.push((txn.call_ns, t as u32));
        }
    }
    returns.sort_unstable();
    let chain: Vec<u32> = returns.iter().map(|_| builder.helper()).collect();
    for (i, &(_, t)) in returns.iter().enumerate() {
        builder.edge(t, chain[i], Dependency::RealTime, NO_KEY);
        if i > 0 {
            builder.edge(chain[i - 1], chain[i], Dependency::RealTime, NO_KEY);
        }
    }
    for (call_ns, b) in calls {
        let returned = returns.partition_point(|&(return_ns, _)| return_ns < call_ns);
        if returned > 0 {
            builder.edge(chain[returned - 1], b, Dependency::RealTime, NO_KEY);
        }
    }
}

/// Adjacency lists in one array.
struct Csr {
    starts: Vec<usize>,
    edges: Vec<Edge>,
}

impl Csr {
    fn new(nodes: usize, mut edges: Vec<Edge>) -> Self {
        edges.sort_unstable_by_key(|e| e.from);
        let mut starts = vec![0; nodes + 1];
        for e in &edges {
            starts[e.from as usize + 1] += 1;
        }
        for i in 0..nodes {
            starts[i + 1] += starts[i];
        }
        Csr { starts, edges }
    }

    fn nodes(&self) -> usize {
        self.starts.len() - 1
    }

    fn out(&self, node: u32) -> std::ops::Range<usize> {
        self.starts[node as usize]..self.starts[node as usize + 1]
    }
}

/// Tarjan's state: per node, its visit index, its low link, whether it is on the stack.
struct Tarjan<'g> {
    graph: &'g Csr,
    index: Vec<u32>,
    low: Vec<u32>,
    on_stack: Vec<bool>,
    component: Vec<u32>,
    stack: Vec<u32>,
    /// The explicit call stack: a node and the position of the next edge to follow.
    calls: Vec<(u32, usize)>,
    next_index: u32,
    count: u32,
}

impl Tarjan<'_> {
    fn visit(&mut self, v: u32) {
        self.index[v as usize] = self.next_index;
        self.low[v as usize] = self.next_index;
        self.next_index += 1;
        self.stack.push(v);
        self.on_stack[v as usize] = true;
        self.calls.push((v, self.graph.out(v).start));
    }

    fn run(&mut self, root: u32) {
        self.visit(root);
        while let Some(&(v, position)) = self.calls.last() {
            if position < self.graph.out(v).end {
                let w = self.graph.edges[position].to;
                self.calls.last_mut().expect("not empty").1 += 1;
                if self.index[w as usize] == UNVISITED {
                    self.visit(w);
                } else if self.on_stack[w as usize] {
                    self.low[v as usize] = self.low[v as usize].min(self.index[w as usize]);
                }
                continue;
            }
            self.calls.pop();
            if let Some(&(u, _)) = self.calls.last() {
                self.low[u as usize] = self.low[u as usize].min(self.low[v as usize]);
            }
            if self.low[v as usize] == self.index[v as usize] {
                self.pop_component(v);
            }
        }
    }

    fn pop_component(&mut self, root: u32) {
        loop {
            let w = self.stack.pop().expect("the root is on the stack");
            self.on_stack[w as usize] = false;
            self.component[w as usize] = self.count;
            if w == root {
                break;
            }
        }
        self.count += 1;
    }
}

/// The strongly connected component of every node (Tarjan's algorithm with an explicit stack,
/// so a path of a million transactions needs no deep recursion), and how many components.
fn components(graph: &Csr) -> (Vec<u32>, u32) {
    let nodes = graph.nodes();
    let mut tarjan = Tarjan {
        graph,
        index: vec![UNVISITED; nodes],
        low: vec![0; nodes],
        on_stack: vec![false; nodes],
        component: vec![UNVISITED; nodes],
        stack: Vec::new(),
        calls: Vec::new(),
        next_index: 0,
        count: 0,
    };
    for root in 0..nodes as u32 {
        if tarjan.index[root as usize] == UNVISITED {
            tarjan.run(root);
        }
    }
    debug_assert!(tarjan.stack.is_empty() && tarjan.component.iter().all(|&c| c < tarjan.count));
    (tarjan.component, tarjan.count)
}

/// One cycle violation per component with more than one node.
fn report_cycles(txns: &Txns, graph: &Csr, violations: &mut Violations) {
    let (component, count) = components(graph);
    let mut sizes = vec![0u32; count as usize];
    for &c in &component {
        sizes[c as usize] += 1;
    }
    let transactions = txns.txns.len() as u32;
    let mut reported = vec![false; count as usize];
    let mut parent_edge = vec![usize::MAX; graph.nodes()];
    for node in 0..transactions {
        let c = component[node as usize] as usize;
        if sizes[c] < 2 || reported[c] {
            continue;
        }
        reported[c] = true;
        violations.push(|| {
            let cycle = shortest_cycle(graph, &component, node, &mut parent_edge);
            cycle_violation(txns, graph, &cycle)
        });
    }
}

/// The edges of a shortest cycle through `start` within its component (breadth-first search).
fn shortest_cycle(graph: &Csr, component: &[u32], start: u32, parent_edge: &mut [usize]) -> Vec<usize> {
    let c = component[start as usize];
    let mut queue = std::collections::VecDeque::from([start]);
    let mut visited = vec![start];
    while let Some(v) = queue.pop_front() {
        for e in graph.out(v) {
            let w = graph.edges[e].to;
            if component[w as usize] != c {
                continue;
            }
            if w == start {
                let mut cycle = vec![e];
                let mut node = v;
                while node != start {
                    let back = parent_edge[node as usize];
                    cycle.push(back);
                    node = graph.edges[back].from;
                }
                cycle.reverse();
                for &u in &visited {
                    parent_edge[u as usize] = usize::MAX;
                }
                return cycle;
            }
            if parent_edge[w as usize] == usize::MAX {
                parent_edge[w as usize] = e;
                visited.push(w);
                queue.push_back(w);
            }
        }
    }
    unreachable!("a node of a strongly connected component of two or more nodes lies on a cycle")
}

/// The cycle as transactions, each with the dependency on the next; helper nodes are elided.
fn cycle_violation(txns: &Txns, graph: &Csr, cycle: &[usize]) -> TxnViolation {
    let transactions = txns.txns.len() as u32;
    let steps: Vec<&Edge> = cycle
        .iter()
        .map(|&e| &graph.edges[e])
        .filter(|e| e.from < transactions)
        .collect();
    TxnViolation::Cycle {
        length: steps.len(),
        steps: steps
            .iter()
            .take(CYCLE_STEPS_MAX)
            .map(|e| CycleStep {
                txn: txns.txn_ref(e.from),
                dependency: e.dependency,
                key: (e.key != NO_KEY).then(|| txns.key_text(e.key)),
            })
            .collect(),
    }
}
