//! Seed corpora: the golden vectors of crates/wire (every packet kind, valid and each way of
//! being invalid), datagrams packing them, encodings of real control messages and log
//! records, the repository's topology files, and seeded random recipes for the structured
//! targets. Every seed is built here, so that the stable harness and `onepipe-fuzz seeds`
//! (which writes cargo-fuzz's corpus directories) start from the same inputs.

use crate::fixture::START;
use crate::frames::Draw;
use crate::targets::{control, controller_log};
use onepipe_fabric::node::FRAME_MAX;
use onepipe_runtime::udp::auth::Auth;
use onepipe_runtime::udp::datagram::{self, Header, Packer};
use std::net::SocketAddr;

/// Random recipes per structured target.
const RECIPES: usize = 32;

/// The golden vectors (crates/wire/vectors/packets.json), valid ones first.
pub fn golden() -> Vec<Vec<u8>> {
    let text = include_str!("../../wire/vectors/packets.json");
    let vectors: serde_json::Value = serde_json::from_str(text).expect("the vectors file is JSON");
    let mut out = Vec::new();
    for kind in ["valid", "invalid"] {
        for v in vectors[kind].as_array().expect("a list of vectors") {
            out.push(hex(v["hex"].as_str().expect("hex")));
        }
    }
    out
}

fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| b.is_ascii_hexdigit()).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).expect("ascii"), 16).expect("hex digits"))
        .collect()
}

/// Seeded random bytes: recipes for the targets that draw structured input.
fn random(n: usize, len_max: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = fastrand::Rng::with_seed(seed);
    (0..n)
        .map(|_| {
            let len = rng.usize(1..=len_max);
            (0..len).map(|_| rng.u8(..)).collect()
        })
        .collect()
}

/// `mode` followed by each of `bodies`.
fn with_mode(mode: u8, bodies: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    bodies
        .into_iter()
        .map(|b| {
            let mut v = vec![mode];
            v.extend(b);
            v
        })
        .collect()
}

pub fn frame() -> Vec<Vec<u8>> {
    let mut out = golden();
    out.extend(random(RECIPES, 128, 1));
    out
}

pub fn datagram() -> Vec<Vec<u8>> {
    let vectors = golden();
    let mut packed = Vec::new();
    let mut p = Packer::new(9_000);
    let to = SocketAddr::from(([127, 0, 0, 1], 9));
    let header = |seq: Option<u32>, limit: Option<u32>| Header {
        epoch: 1,
        peer_epoch: 0,
        sent_at_ns: 1,
        seq,
        limit,
    };
    for (i, v) in vectors.iter().enumerate() {
        p.push(v);
        let h = header(Some(i as u32), (i % 2 == 0).then_some(i as u32 + 16));
        packed.push(p.seal(&h, &Auth::Off, to).to_vec());
    }
    p.clear();
    let (credit, len) = datagram::control(&header(None, Some(7)), &Auth::Off, to);
    packed.push(credit[..len].to_vec());
    let mut out = with_mode(0, packed);
    out.extend(with_mode(1, random(RECIPES, 512, 2)));
    out
}

/// For the switch and endpoint targets, whose whole input is a recipe of steps.
pub fn structured() -> Vec<Vec<u8>> {
    let mut out = random(RECIPES, 1024, 3);
    // Golden frames as recipes too: their bytes make other frames.
    out.extend(golden());
    out
}

/// For the txkv target: the structured recipes, and longer ones, since a store's step (a
/// transaction, an answer with its results) draws more bytes than a frame's.
pub fn txkv() -> Vec<Vec<u8>> {
    let mut out = structured();
    out.extend(random(RECIPES, 4096, 5));
    out
}

pub fn control() -> Vec<Vec<u8>> {
    let mut encoded = Vec::new();
    let mut buf = vec![0u8; FRAME_MAX];
    for recipe in random(RECIPES, 64, 4) {
        let mut d = Draw::new(&recipe);
        let msg = control::message(&mut d, START);
        if let Ok(len) = msg.encode(&mut buf) {
            encoded.push(buf[..len].to_vec());
        }
    }
    let mut out = with_mode(0, encoded);
    for mode in 1..4 {
        out.extend(with_mode(mode, random(RECIPES / 2, 1024, 4 + mode as u64)));
    }
    out
}

pub fn topology() -> Vec<Vec<u8>> {
    let files = [
        include_str!("../../../topologies/two-machines.toml"),
        include_str!("../../../topologies/two-racks.toml"),
        include_str!("../../../topologies/two-racks-controller.toml"),
        include_str!("../../../topologies/two-racks-replicas.toml"),
    ];
    let mut out = with_mode(0, files.iter().map(|f| f.as_bytes().to_vec()).collect());
    out.extend(with_mode(1, random(RECIPES, 256, 8)));
    out
}

pub fn controller_log() -> Vec<Vec<u8>> {
    let logs = random(RECIPES / 2, 512, 9)
        .into_iter()
        .map(|recipe| controller_log::lines(&controller_log::records(&mut Draw::new(&recipe))))
        .collect();
    let mut out = with_mode(0, logs);
    out.extend(with_mode(1, random(RECIPES, 512, 10)));
    out
}

/// Client histories: lines of the documented format (docs/histories.md), then random bytes.
pub fn history() -> Vec<Vec<u8>> {
    let good = concat!(
        r#"{"client":1,"op":"write","key":"k","value":"v1","expect":null,"outcome":"ok","call_ns":1,"return_ns":5}"#,
        "\n",
        r#"{"client":2,"op":"read","key":"k","value":"v1","expect":null,"outcome":"ok","call_ns":2,"return_ns":6}"#,
        "\n",
        r#"{"client":3,"op":"cas","key":"k","value":"v2","expect":"v1","outcome":"fail","call_ns":7,"return_ns":9}"#,
        "\n",
        r#"{"client":1,"op":"delete","key":"k","value":null,"expect":null,"outcome":"unknown","call_ns":8,"return_ns":9}"#,
        "\n",
    );
    let mut out = vec![good.as_bytes().to_vec()];
    out.extend(random(RECIPES, 512, 11));
    out
}
