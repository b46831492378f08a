//! Golden byte vectors shared with other languages: `vectors/packets.json`.

use onepipe_wire::Timestamp48;
use onepipe_wire::packet::{Opcode, Packet, Repr};
use serde_json::Value;

fn load() -> Value {
    let text = include_str!("../vectors/packets.json");
    serde_json::from_str(text).expect("vectors file is JSON")
}

fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    assert!(digits.len() % 2 == 0, "odd hex length");
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}

fn repr_of(fields: &Value) -> (Repr, Vec<u8>) {
    let u = |k: &str| fields[k].as_u64().unwrap_or_else(|| panic!("field {k}"));
    let b = |k: &str| fields[k].as_bool().unwrap_or_else(|| panic!("field {k}"));
    let opcode = match fields["opcode"].as_str().unwrap() {
        "data" => Opcode::Data,
        "beacon" => Opcode::Beacon,
        "nak" => Opcode::Nak,
        "prepare" => Opcode::Prepare,
        "ack" => Opcode::Ack,
        other => panic!("unknown opcode {other}"),
    };
    let payload = hex(fields["payload_hex"].as_str().unwrap());
    let repr = Repr {
        opcode,
        end_of_message: b("end_of_message"),
        ecn: b("ecn"),
        ack: fields["ack"].as_bool().unwrap_or(false),
        sack: fields["sack"].as_bool().unwrap_or(false),
        recall: fields["recall"].as_bool().unwrap_or(false),
        msg_ts: Timestamp48::new(u("msg_ts")),
        barrier: Timestamp48::new(u("barrier")),
        commit_barrier: Timestamp48::new(u("commit_barrier")),
        psn: u("psn") as u32,
        src: u("src") as u32,
        dst: u("dst") as u32,
        msg_id: u("msg_id"),
        frag_index: u("frag_index") as u16,
        frag_count: u("frag_count") as u16,
        link_id: u("link_id") as u16,
        payload_len: payload.len() as u16,
    };
    (repr, payload)
}

#[test]
fn valid_vectors_emit_and_parse() {
    let vectors = load();
    let valid = vectors["valid"].as_array().unwrap();
    assert!(!valid.is_empty());
    for v in valid {
        let name = v["name"].as_str().unwrap();
        let bytes = hex(v["hex"].as_str().unwrap());
        let (repr, payload) = repr_of(&v["fields"]);

        let mut out = vec![0u8; repr.buffer_len()];
        let mut p = Packet::new_unchecked(&mut out[..]);
        repr.emit(&mut p);
        p.payload_mut().copy_from_slice(&payload);
        assert_eq!(out, bytes, "emit of {name}");

        let p = Packet::new_checked(&bytes[..]).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(Repr::parse(&p).unwrap(), repr, "parse of {name}");
        assert_eq!(p.payload(), &payload[..], "payload of {name}");
    }
}

#[test]
fn invalid_vectors_fail_with_the_named_error() {
    let vectors = load();
    let invalid = vectors["invalid"].as_array().unwrap();
    assert!(!invalid.is_empty());
    for v in invalid {
        let name = v["name"].as_str().unwrap();
        let bytes = hex(v["hex"].as_str().unwrap());
        let err = Repr::parse(&Packet::new_unchecked(&bytes[..])).expect_err(name);
        assert_eq!(err.name(), v["error"].as_str().unwrap(), "error of {name}");
    }
}
