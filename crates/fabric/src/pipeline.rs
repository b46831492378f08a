//! A software switch as a pipeline of programs: each frame goes, by its protocol
//! (`onepipe_wire::protocol`), to the one program that runs that protocol, and every program
//! shares the switch's ports, its routing and its clock (`now`, passed in). 1Pipe's barrier
//! aggregation is one program; NetChain's chain, Paxos's coordinator and acceptors and cosy's
//! reservations are others. Adding a program touches none of the others.
//!
//! A program has the shape of any [`Node`], for the frames of its protocol only: `classify`
//! and `handle_frame` see only its frames, `poll_transmit` is asked for its own frames on a
//! port, and its timers run on the pipeline's. A host can run a pipeline too (an endpoint of
//! each system it speaks), since a host is a node with one port.
//!
//! What programs share is their ports' capacity: on each port, [`Pipeline::poll_transmit`] asks
//! them in turn, starting after the one that last sent there, so that one program's traffic
//! cannot starve another's.

use crate::node::{Hints, Node, PRIORITY_CLASSES, PortId, Route};
use onepipe_wire::Instant;
use onepipe_wire::protocol::{PROTOCOLS, Protocol};

/// Marks a protocol no program takes, in [`Pipeline`]'s dispatch table.
const NONE: u8 = u8::MAX;

/// Why a pipeline could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PipelineError {
    #[error("protocol {0} is not a protocol number (0-15)")]
    NoSuchProtocol(Protocol),
    #[error("two programs claim protocol {0}")]
    Claimed(Protocol),
    #[error("a pipeline needs at least one program")]
    Empty,
}

/// Frames the pipeline dropped before any program saw them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PipelineCounters {
    /// Empty frames.
    pub empty: u64,
    /// Frames of a protocol no program runs here.
    pub unknown_protocol: u64,
}

/// Programs `P` (one type: a concrete program, an enum of them, or `Box<dyn Node>`), each
/// with the protocol it takes.
pub struct Pipeline<P> {
    programs: Vec<P>,
    protocols: Vec<Protocol>,
    /// Program index by protocol number, [`NONE`] where none runs it.
    dispatch: [u8; PROTOCOLS],
    /// Per port, the program `poll_transmit` asks first there; grown as ports are asked.
    turns: Vec<u8>,
    counters: PipelineCounters,
}

impl<P: Node> Pipeline<P> {
    /// A pipeline of `programs`, each taking the frames of its protocol.
    pub fn new(programs: Vec<(Protocol, P)>) -> Result<Pipeline<P>, PipelineError> {
        if programs.is_empty() {
            return Err(PipelineError::Empty);
        }
        let mut dispatch = [NONE; PROTOCOLS];
        let mut protocols = Vec::with_capacity(programs.len());
        let mut nodes = Vec::with_capacity(programs.len());
        for (index, (protocol, program)) in programs.into_iter().enumerate() {
            let slot = dispatch
                .get_mut(protocol as usize)
                .ok_or(PipelineError::NoSuchProtocol(protocol))?;
            if *slot != NONE {
                return Err(PipelineError::Claimed(protocol));
            }
            *slot = index as u8;
            protocols.push(protocol);
            nodes.push(program);
        }
        assert!(nodes.len() <= PROTOCOLS, "at most one program per protocol");
        Ok(Pipeline {
            programs: nodes,
            protocols,
            dispatch,
            turns: Vec::new(),
            counters: PipelineCounters::default(),
        })
    }

    /// A pipeline running one program.
    pub fn single(protocol: Protocol, program: P) -> Result<Pipeline<P>, PipelineError> {
        Pipeline::new(vec![(protocol, program)])
    }

    /// The programs, in the order they were given, with their protocols.
    pub fn programs(&self) -> impl Iterator<Item = (Protocol, &P)> + '_ {
        self.protocols.iter().copied().zip(&self.programs)
    }

    pub fn programs_mut(&mut self) -> impl Iterator<Item = (Protocol, &mut P)> + '_ {
        self.protocols.iter().copied().zip(&mut self.programs)
    }

    /// The program that runs `protocol`.
    pub fn program(&self, protocol: Protocol) -> Option<&P> {
        self.index_of(protocol).map(|i| &self.programs[i])
    }

    pub fn program_mut(&mut self, protocol: Protocol) -> Option<&mut P> {
        self.index_of(protocol).map(|i| &mut self.programs[i])
    }

    pub fn counters(&self) -> &PipelineCounters {
        &self.counters
    }

    fn index_of(&self, protocol: Protocol) -> Option<usize> {
        match self.dispatch.get(protocol as usize) {
            Some(&i) if i != NONE => Some(i as usize),
            _ => None,
        }
    }

    /// The program `frame` goes to. On every frame at every hop: the nibble indexes the
    /// 16-entry table directly, with no bounds to check.
    #[inline]
    fn target(&self, frame: &[u8]) -> Option<usize> {
        let &first = frame.first()?;
        match self.dispatch[(first >> 4) as usize] {
            NONE => None,
            i => Some(i as usize),
        }
    }

    /// Checks the dispatch table against the programs: every program is reached by exactly its
    /// protocol, and nothing else is reached.
    pub fn invariants(&self) {
        assert_eq!(self.programs.len(), self.protocols.len());
        assert!(self.turns.iter().all(|&t| (t as usize) < self.programs.len()));
        let mut reached = 0;
        for (protocol, &index) in self.dispatch.iter().enumerate() {
            if index != NONE {
                assert_eq!(self.protocols[index as usize] as usize, protocol);
                reached += 1;
            }
        }
        assert_eq!(reached, self.programs.len(), "each program has its own protocol");
    }
}

impl<P: Node> Node for Pipeline<P> {
    fn classify(&self, now: Instant, port: PortId, frame: &[u8]) -> Route {
        match self.target(frame) {
            Some(i) => self.programs[i].classify(now, port, frame),
            None => Route::Drop,
        }
    }

    fn handle_frame(&mut self, now: Instant, port: PortId, frame: &mut [u8], route: Route) {
        match self.target(frame) {
            Some(i) => self.programs[i].handle_frame(now, port, frame, route),
            None if frame.is_empty() => self.counters.empty += 1,
            None => self.counters.unknown_protocol += 1,
        }
    }

    fn handle_stalled(&mut self, now: Instant, port: PortId, frame: &[u8]) {
        if let Some(i) = self.target(frame) {
            self.programs[i].handle_stalled(now, port, frame);
        }
    }

    fn mark_congestion(&self, frame: &mut [u8]) {
        if let Some(i) = self.target(frame) {
            self.programs[i].mark_congestion(frame);
        }
    }

    fn poll_transmit(&mut self, now: Instant, port: PortId, buf: &mut [u8]) -> Option<usize> {
        let count = self.programs.len();
        if count == 1 {
            // Asked for every port on every visit of a switch: no turns to keep.
            return self.programs[0].poll_transmit(now, port, buf);
        }
        let p = port as usize;
        if p >= self.turns.len() {
            self.turns.resize(p + 1, 0);
        }
        let next = |i: usize| if i + 1 == count { 0 } else { i + 1 };
        let mut i = self.turns[p] as usize;
        for _ in 0..count {
            if let Some(len) = self.programs[i].poll_transmit(now, port, buf) {
                self.turns[p] = next(i) as u8;
                return Some(len);
            }
            i = next(i);
        }
        None
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.programs.iter().filter_map(|p| p.poll_timeout()).min()
    }

    fn handle_timeout(&mut self, now: Instant) {
        for p in &mut self.programs {
            if p.poll_timeout().is_some_and(|t| t <= now) {
                p.handle_timeout(now);
            }
        }
    }
}

impl<P: Node> Hints for Pipeline<P> {
    /// Gone as soon as one program says so: only programs that watch their links (1Pipe's
    /// dead-link timeout) ever do.
    fn peer_gone(&self, port: PortId) -> bool {
        self.programs.iter().any(|p| p.peer_gone(port))
    }
    fn wants_transmit(&self) -> bool {
        self.programs.iter().any(|p| p.wants_transmit())
    }
    fn work_units(&self, frame: &[u8]) -> u32 {
        self.target(frame)
            .map_or(1, |i| self.programs[i].work_units(frame))
    }
    /// The class the program of the frame's protocol gives it; a frame no program runs here
    /// is best effort.
    fn priority(&self, frame: &[u8]) -> u8 {
        self.target(frame)
            .map_or((PRIORITY_CLASSES - 1) as u8, |i| self.programs[i].priority(frame))
    }
    fn end_visit(&mut self, now: Instant) -> usize {
        self.programs.iter_mut().map(|p| p.end_visit(now)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use onepipe_wire::protocol::{EXPERIMENTAL, NETCHAIN, ONEPIPE, first_byte, protocol_of};

    /// Counts what reaches it; originates `to_send` frames on its first `ports` ports (at least
    /// port 0), and times out at `timer`.
    #[derive(Default)]
    struct Probe {
        protocol: Protocol,
        taken: Vec<u8>,
        to_send: usize,
        ports: u16,
        timer: Option<u64>,
        timeouts: usize,
        /// The class it gives every frame it is asked about.
        class: u8,
    }

    impl Node for Probe {
        fn classify(&self, _: Instant, _: PortId, _: &[u8]) -> Route {
            Route::Consume
        }
        fn handle_frame(&mut self, _: Instant, _: PortId, frame: &mut [u8], _: Route) {
            self.taken.push(frame[0]);
        }
        fn poll_transmit(&mut self, _: Instant, port: PortId, buf: &mut [u8]) -> Option<usize> {
            if port >= self.ports.max(1) || self.to_send == 0 {
                return None;
            }
            self.to_send -= 1;
            buf[0] = first_byte(self.protocol, 0);
            Some(1)
        }
        fn poll_timeout(&self) -> Option<Instant> {
            self.timer.map(Instant::from_nanos)
        }
        fn handle_timeout(&mut self, _: Instant) {
            self.timeouts += 1;
        }
    }

    impl Hints for Probe {
        fn priority(&self, _frame: &[u8]) -> u8 {
            self.class
        }
    }

    fn probe(protocol: Protocol, to_send: usize, timer: Option<u64>) -> (Protocol, Probe) {
        let p = Probe {
            protocol,
            to_send,
            timer,
            ..Probe::default()
        };
        (protocol, p)
    }

    #[test]
    fn each_frame_reaches_the_program_of_its_protocol_and_no_other() {
        let mut p = Pipeline::new(vec![probe(ONEPIPE, 0, None), probe(EXPERIMENTAL, 0, None)]).unwrap();
        let now = Instant::ZERO;
        for byte in [
            first_byte(ONEPIPE, 1),
            first_byte(EXPERIMENTAL, 2),
            first_byte(ONEPIPE, 3),
        ] {
            let mut frame = [byte, 0, 0];
            let route = p.classify(now, 0, &frame);
            assert_eq!(route, Route::Consume);
            p.handle_frame(now, 0, &mut frame, route);
            p.invariants();
        }
        let taken = |proto| p.program(proto).unwrap().taken.clone();
        assert_eq!(taken(ONEPIPE), vec![0x21, 0x23]);
        assert_eq!(taken(EXPERIMENTAL), vec![0xf2]);
    }

    /// A frame no program runs, or an empty one, is dropped and counted, never handed on.
    #[test]
    fn frames_of_unknown_protocols_and_empty_frames_are_counted_drops() {
        let mut p = Pipeline::single(ONEPIPE, Probe::default()).unwrap();
        let now = Instant::ZERO;
        let mut unknown = [first_byte(EXPERIMENTAL, 0)];
        assert_eq!(p.classify(now, 0, &unknown), Route::Drop);
        p.handle_frame(now, 0, &mut unknown, Route::Drop);
        p.handle_frame(now, 0, &mut [], Route::Drop);
        assert_eq!(
            *p.counters(),
            PipelineCounters {
                empty: 1,
                unknown_protocol: 1
            }
        );
        assert!(p.program(ONEPIPE).unwrap().taken.is_empty());
    }

    /// A frame's class is the one the program of its protocol gives; a frame no program runs
    /// (or an empty one) is best effort.
    #[test]
    fn each_frame_gets_the_class_of_its_programs_choosing() {
        let (mut a, mut b) = (probe(ONEPIPE, 0, None), probe(EXPERIMENTAL, 0, None));
        (a.1.class, b.1.class) = (1, 2);
        let p = Pipeline::new(vec![a, b]).unwrap();
        assert_eq!(p.priority(&[first_byte(ONEPIPE, 0), 0]), 1);
        assert_eq!(p.priority(&[first_byte(EXPERIMENTAL, 0), 0]), 2);
        let best_effort = (PRIORITY_CLASSES - 1) as u8;
        assert_eq!(p.priority(&[first_byte(NETCHAIN, 0), 0]), best_effort);
        assert_eq!(p.priority(&[]), best_effort);
        let wrapped = crate::Either::<Box<Pipeline<Probe>>, Probe>::Left(Box::new(p));
        assert_eq!(
            wrapped.priority(&[first_byte(EXPERIMENTAL, 0)]),
            2,
            "wrappers forward it"
        );
    }

    #[test]
    fn protocols_are_claimed_once_and_exist() {
        let two = Pipeline::new(vec![probe(ONEPIPE, 0, None), probe(ONEPIPE, 0, None)]);
        assert_eq!(two.err(), Some(PipelineError::Claimed(ONEPIPE)));
        let big = Pipeline::new(vec![probe(16, 0, None)]);
        assert_eq!(big.err(), Some(PipelineError::NoSuchProtocol(16)));
        assert_eq!(Pipeline::<Probe>::new(vec![]).err(), Some(PipelineError::Empty));
    }

    /// Two programs with frames to send share a port in turns: neither starves the other.
    #[test]
    fn programs_take_turns_on_a_port() {
        let mut p = Pipeline::new(vec![probe(ONEPIPE, 3, None), probe(EXPERIMENTAL, 3, None)]).unwrap();
        let mut buf = [0u8; 4];
        let mut sent = Vec::new();
        while let Some(len) = p.poll_transmit(Instant::ZERO, 0, &mut buf) {
            assert_eq!(len, 1);
            sent.push(protocol_of(&buf).unwrap());
            p.invariants();
        }
        assert_eq!(
            sent,
            vec![
                ONEPIPE,
                EXPERIMENTAL,
                ONEPIPE,
                EXPERIMENTAL,
                ONEPIPE,
                EXPERIMENTAL
            ]
        );
        assert!(
            p.poll_transmit(Instant::ZERO, 1, &mut buf).is_none(),
            "nothing on port 1"
        );
    }

    /// Turns are kept per port: asked on two ports alternately, each program still gets every
    /// other frame on each port.
    #[test]
    fn programs_take_turns_on_each_port_of_their_own() {
        let mut p = Pipeline::new(vec![probe(ONEPIPE, 100, None), probe(EXPERIMENTAL, 100, None)]).unwrap();
        for (_, probe) in p.programs_mut() {
            probe.ports = 2;
        }
        let mut buf = [0u8; 4];
        let mut sent = [Vec::new(), Vec::new()];
        for k in 0..8u16 {
            let port = k % 2;
            p.poll_transmit(Instant::ZERO, port, &mut buf).unwrap();
            sent[port as usize].push(protocol_of(&buf).unwrap());
            p.invariants();
        }
        for on_port in sent {
            assert_eq!(on_port, vec![ONEPIPE, EXPERIMENTAL, ONEPIPE, EXPERIMENTAL]);
        }
    }

    /// The pipeline's timer is the earliest of its programs'; only a program that is due runs.
    #[test]
    fn timers_are_the_earliest_and_only_due_programs_run() {
        let mut p = Pipeline::new(vec![
            probe(ONEPIPE, 0, Some(50)),
            probe(EXPERIMENTAL, 0, Some(20)),
        ])
        .unwrap();
        assert_eq!(p.poll_timeout(), Some(Instant::from_nanos(20)));
        p.handle_timeout(Instant::from_nanos(30));
        assert_eq!(p.program(ONEPIPE).unwrap().timeouts, 0);
        assert_eq!(p.program(EXPERIMENTAL).unwrap().timeouts, 1);
        let empty = Pipeline::single(ONEPIPE, Probe::default()).unwrap();
        assert_eq!(empty.poll_timeout(), None);
    }
}
