//! The store commands, typed, and their parsing from a request's arguments.
//!
//! Adding a command is local: a variant here, its arm in [`Command::parse`] and [`Command::name`],
//! and the stores that implement it (the others answer [`StoreError::Unsupported`] from their `_`
//! arm, which `#[non_exhaustive]` makes them have).

use bytes::Bytes;

use crate::store::{StoreError, StoreInfo};

/// A command for a [`Store`](crate::Store), parsed from RESP.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Command {
    /// `GET key`: the value, or nil.
    Get { key: Bytes },
    /// `SET key value [NX|XX]`: `OK`, or nil when the condition did not hold.
    Set {
        key: Bytes,
        value: Bytes,
        condition: SetCondition,
    },
    /// `DEL key [key ...]`: the number of keys that existed.
    Del { keys: Vec<Bytes> },
    /// `MGET key [key ...]`: an array of values or nils, read key by key.
    MGet { keys: Vec<Bytes> },
    /// Compare and swap, compare and delete (docs/redis.md):
    /// - `CAS key expect new`: `expect: Some, new: Some`;
    /// - `CASNX key new` (set if absent): `expect: None, new: Some`;
    /// - `CAD key expect` (delete if equal): `expect: Some, new: None`.
    ///
    /// Swaps when the current value equals `expect` (`None`: the key is absent); `new: None`
    /// deletes. Reply: [`Reply::cas_swapped`](crate::Reply::cas_swapped) or
    /// [`Reply::cas_failed`](crate::Reply::cas_failed) with the current value.
    Cas {
        key: Bytes,
        expect: Option<Bytes>,
        new: Option<Bytes>,
    },
    /// `DBSIZE`: the number of keys.
    DbSize,
    /// `MSET key value [key value ...]`: `OK`. Atomic across its keys in the stores that say so
    /// (every store that implements [`Store::transaction`](crate::Store::transaction) should).
    MSet { pairs: Vec<(Bytes, Bytes)> },
    /// `INCR key` (`delta` 1), `DECR key` (-1), `INCRBY key n` (n), `DECRBY key n` (-n): adds
    /// `delta` to the decimal integer the key holds (0 when absent) and replies the new value;
    /// [`StoreError::NotAnInteger`] or [`StoreError::Overflow`] otherwise.
    IncrBy { key: Bytes, delta: i64 },
    /// `SNAPSHOT` (`dump: false`) and `SNAPSHOT DUMP` (`dump: true`): the whole store at one
    /// point, answered by [`Snapshot::to_reply`](crate::Snapshot::to_reply).
    Snapshot { dump: bool },
}

/// When a `SET` takes effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetCondition {
    /// Plain `SET`.
    Always,
    /// `SET ... NX`: only if the key is absent.
    IfAbsent,
    /// `SET ... XX`: only if the key is present.
    IfPresent,
}

/// Why a request's arguments are not a well-formed store command (answered with a Redis error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// Redis's arity error, with the command name in lower case as Redis prints it.
    #[error("ERR wrong number of arguments for '{0}' command")]
    WrongArity(&'static str),
    #[error("ERR syntax error")]
    Syntax,
    /// An option Redis has but this front does not (e.g. `SET ... EX`).
    #[error("ERR option '{option}' of '{command}' is not supported")]
    UnsupportedOption { command: &'static str, option: String },
    /// An argument that must be a decimal `i64` is not one (Redis's text).
    #[error("ERR value is not an integer or out of range")]
    NotAnInteger,
    /// `DECRBY key -9223372036854775808`: its negation is not an `i64` (Redis's text).
    #[error("ERR decrement would overflow")]
    DecrementOverflow,
}

impl Command {
    /// Parses a request whose first argument names a store command. `None`: not a store command
    /// (the server then tries its own). `args` holds the name too.
    pub fn parse(args: &[Bytes]) -> Option<Result<Command, CommandError>> {
        let name = args.first()?;
        let rest = &args[1..];
        let parsed = match name.to_ascii_uppercase().as_slice() {
            b"GET" => exact(rest, 1, "get").map(|_| Command::Get { key: rest[0].clone() }),
            b"SET" => parse_set(rest),
            b"DEL" => at_least(rest, 1, "del").map(|_| Command::Del { keys: rest.to_vec() }),
            b"MGET" => at_least(rest, 1, "mget").map(|_| Command::MGet { keys: rest.to_vec() }),
            b"CAS" => exact(rest, 3, "cas").map(|_| Command::Cas {
                key: rest[0].clone(),
                expect: Some(rest[1].clone()),
                new: Some(rest[2].clone()),
            }),
            b"CASNX" => exact(rest, 2, "casnx").map(|_| Command::Cas {
                key: rest[0].clone(),
                expect: None,
                new: Some(rest[1].clone()),
            }),
            b"CAD" => exact(rest, 2, "cad").map(|_| Command::Cas {
                key: rest[0].clone(),
                expect: Some(rest[1].clone()),
                new: None,
            }),
            b"DBSIZE" => exact(rest, 0, "dbsize").map(|_| Command::DbSize),
            b"MSET" => parse_mset(rest),
            b"INCR" => exact(rest, 1, "incr").map(|_| incr_by(rest, 1)),
            b"DECR" => exact(rest, 1, "decr").map(|_| incr_by(rest, -1)),
            b"INCRBY" => exact(rest, 2, "incrby")
                .and_then(|_| parse_integer(&rest[1]).ok_or(CommandError::NotAnInteger))
                .map(|delta| incr_by(rest, delta)),
            b"DECRBY" => exact(rest, 2, "decrby")
                .and_then(|_| parse_integer(&rest[1]).ok_or(CommandError::NotAnInteger))
                .and_then(|n| n.checked_neg().ok_or(CommandError::DecrementOverflow))
                .map(|delta| incr_by(rest, delta)),
            b"SNAPSHOT" => parse_snapshot(rest),
            _ => return None,
        };
        Some(parsed)
    }

    /// The Redis name of the command, upper case (for `CAS` forms: `CAS`, `CASNX` or `CAD`; for
    /// `INCR`, `DECR`, `INCRBY`, `DECRBY`: `INCRBY`, which they all are).
    pub fn name(&self) -> &'static str {
        match self {
            Command::Get { .. } => "GET",
            Command::Set { .. } => "SET",
            Command::Del { .. } => "DEL",
            Command::MGet { .. } => "MGET",
            Command::Cas { expect: None, .. } => "CASNX",
            Command::Cas { new: None, .. } => "CAD",
            Command::Cas { .. } => "CAS",
            Command::DbSize => "DBSIZE",
            Command::MSet { .. } => "MSET",
            Command::IncrBy { .. } => "INCRBY",
            Command::Snapshot { .. } => "SNAPSHOT",
        }
    }

    /// Checks every key and value of the command against the store's limits.
    pub fn check_limits(&self, info: &StoreInfo) -> Result<(), StoreError> {
        let key = |key: &Bytes| {
            if key.len() > info.key_bytes_max {
                return Err(StoreError::KeyTooLarge {
                    len_bytes: key.len(),
                    max_bytes: info.key_bytes_max,
                });
            }
            Ok(())
        };
        let value = |value: &Bytes| {
            if value.len() > info.value_bytes_max {
                return Err(StoreError::ValueTooLarge {
                    len_bytes: value.len(),
                    max_bytes: info.value_bytes_max,
                });
            }
            Ok(())
        };
        match self {
            Command::Get { key: k } => key(k),
            Command::Set { key: k, value: v, .. } => key(k).and_then(|_| value(v)),
            Command::Del { keys } | Command::MGet { keys } => keys.iter().try_for_each(key),
            Command::Cas { key: k, expect, new } => {
                key(k)?;
                expect.iter().chain(new.iter()).try_for_each(value)
            }
            Command::MSet { pairs } => pairs.iter().try_for_each(|(k, v)| key(k).and_then(|_| value(v))),
            Command::IncrBy { key: k, .. } => key(k),
            Command::DbSize | Command::Snapshot { .. } => Ok(()),
        }
    }
}

/// The integer in `bytes` if it is one as Redis writes integers (`string2ll`): an optional `-`,
/// then digits with no leading zero (or `0` alone), within `i64`. No `+`, spaces or `-0`: a value
/// is an integer exactly when it is the canonical decimal form of one, which is what the stores
/// write back, so `INCR` never changes how an untouched digit string reads.
pub(crate) fn parse_integer(bytes: &[u8]) -> Option<i64> {
    // The longest i64 is 20 bytes (`-9223372036854775808`): no need to look at longer input.
    if bytes.len() > 20 {
        return None;
    }
    let value: i64 = std::str::from_utf8(bytes).ok()?.parse().ok()?;
    (value.to_string().as_bytes() == bytes).then_some(value)
}

fn incr_by(rest: &[Bytes], delta: i64) -> Command {
    Command::IncrBy {
        key: rest[0].clone(),
        delta,
    }
}

/// `MSET key value [key value ...]`: pairs in order (a key given twice ends with its last value).
fn parse_mset(rest: &[Bytes]) -> Result<Command, CommandError> {
    if rest.is_empty() || rest.len() % 2 != 0 {
        return Err(CommandError::WrongArity("mset"));
    }
    let pairs = rest
        .chunks_exact(2)
        .map(|pair| (pair[0].clone(), pair[1].clone()))
        .collect();
    Ok(Command::MSet { pairs })
}

/// `SNAPSHOT [DUMP]`.
fn parse_snapshot(rest: &[Bytes]) -> Result<Command, CommandError> {
    match rest {
        [] => Ok(Command::Snapshot { dump: false }),
        [option] if option.eq_ignore_ascii_case(b"DUMP") => Ok(Command::Snapshot { dump: true }),
        [_] => Err(CommandError::Syntax),
        _ => Err(CommandError::WrongArity("snapshot")),
    }
}

fn exact(rest: &[Bytes], count: usize, name: &'static str) -> Result<(), CommandError> {
    if rest.len() == count {
        Ok(())
    } else {
        Err(CommandError::WrongArity(name))
    }
}

fn at_least(rest: &[Bytes], count: usize, name: &'static str) -> Result<(), CommandError> {
    if rest.len() >= count {
        Ok(())
    } else {
        Err(CommandError::WrongArity(name))
    }
}

/// `SET key value [NX|XX]`. Redis's other options (expiry, `GET`, `KEEPTTL`) are refused by name.
fn parse_set(rest: &[Bytes]) -> Result<Command, CommandError> {
    at_least(rest, 2, "set")?;
    let mut condition = SetCondition::Always;
    for option in &rest[2..] {
        let next = match option.to_ascii_uppercase().as_slice() {
            b"NX" => SetCondition::IfAbsent,
            b"XX" => SetCondition::IfPresent,
            b"EX" | b"PX" | b"EXAT" | b"PXAT" | b"KEEPTTL" | b"GET" | b"IFEQ" => {
                let option = String::from_utf8_lossy(option).to_ascii_uppercase();
                return Err(CommandError::UnsupportedOption {
                    command: "set",
                    option,
                });
            }
            _ => return Err(CommandError::Syntax),
        };
        // NX and XX together, like Redis, is a syntax error; repeating one is accepted.
        if condition != SetCondition::Always && condition != next {
            return Err(CommandError::Syntax);
        }
        condition = next;
    }
    Ok(Command::Set {
        key: rest[0].clone(),
        value: rest[1].clone(),
        condition,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<Bytes> {
        words
            .iter()
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    fn parse(words: &[&str]) -> Option<Result<Command, CommandError>> {
        Command::parse(&args(words))
    }

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn names_are_case_insensitive() {
        assert_eq!(parse(&["get", "k"]), Some(Ok(Command::Get { key: b("k") })));
        assert_eq!(parse(&["GeT", "k"]), Some(Ok(Command::Get { key: b("k") })));
    }

    #[test]
    fn set_conditions() {
        let set = |condition| {
            Some(Ok(Command::Set {
                key: b("k"),
                value: b("v"),
                condition,
            }))
        };
        assert_eq!(parse(&["SET", "k", "v"]), set(SetCondition::Always));
        assert_eq!(parse(&["SET", "k", "v", "nx"]), set(SetCondition::IfAbsent));
        assert_eq!(parse(&["SET", "k", "v", "XX"]), set(SetCondition::IfPresent));
        assert_eq!(
            parse(&["SET", "k", "v", "NX", "XX"]),
            Some(Err(CommandError::Syntax))
        );
        assert_eq!(
            parse(&["SET", "k", "v", "bogus"]),
            Some(Err(CommandError::Syntax))
        );
        assert_eq!(
            parse(&["SET", "k", "v", "ex", "10"]),
            Some(Err(CommandError::UnsupportedOption {
                command: "set",
                option: "EX".into()
            }))
        );
        assert_eq!(parse(&["SET", "k"]), Some(Err(CommandError::WrongArity("set"))));
    }

    #[test]
    fn cas_forms() {
        let cas = |expect: Option<&str>, new: Option<&str>| {
            Some(Ok(Command::Cas {
                key: b("k"),
                expect: expect.map(b),
                new: new.map(b),
            }))
        };
        assert_eq!(parse(&["CAS", "k", "old", "new"]), cas(Some("old"), Some("new")));
        assert_eq!(parse(&["CASNX", "k", "new"]), cas(None, Some("new")));
        assert_eq!(parse(&["CAD", "k", "old"]), cas(Some("old"), None));
        assert_eq!(
            parse(&["CAS", "k", "old"]),
            Some(Err(CommandError::WrongArity("cas")))
        );
        let names: Vec<_> = [
            &["CAS", "k", "a", "b"][..],
            &["CASNX", "k", "a"],
            &["CAD", "k", "a"],
        ]
        .iter()
        .map(|w| parse(w).unwrap().unwrap().name())
        .collect();
        assert_eq!(names, ["CAS", "CASNX", "CAD"]);
    }

    #[test]
    fn arity_errors_print_like_redis() {
        assert_eq!(
            parse(&["GET"]).unwrap().unwrap_err().to_string(),
            "ERR wrong number of arguments for 'get' command"
        );
        assert_eq!(parse(&["DEL"]), Some(Err(CommandError::WrongArity("del"))));
        assert_eq!(parse(&["MGET"]), Some(Err(CommandError::WrongArity("mget"))));
        assert_eq!(
            parse(&["DBSIZE", "x"]),
            Some(Err(CommandError::WrongArity("dbsize")))
        );
    }

    #[test]
    fn other_names_are_not_store_commands() {
        assert_eq!(parse(&["PING"]), None);
        assert_eq!(parse(&[]), None);
    }

    #[test]
    fn limits_cover_keys_and_values() {
        let info = StoreInfo {
            name: "t".into(),
            key_bytes_max: 2,
            value_bytes_max: 3,
            fields: vec![],
        };
        let check = |words: &[&str]| parse(words).unwrap().unwrap().check_limits(&info);
        assert_eq!(check(&["SET", "kk", "vvv"]), Ok(()));
        assert_eq!(
            check(&["SET", "kkk", "v"]),
            Err(StoreError::KeyTooLarge {
                len_bytes: 3,
                max_bytes: 2
            })
        );
        assert_eq!(
            check(&["SET", "k", "vvvv"]),
            Err(StoreError::ValueTooLarge {
                len_bytes: 4,
                max_bytes: 3
            })
        );
        assert_eq!(
            check(&["MGET", "a", "bbb"]),
            Err(StoreError::KeyTooLarge {
                len_bytes: 3,
                max_bytes: 2
            })
        );
        assert_eq!(
            check(&["CAD", "k", "vvvv"]),
            Err(StoreError::ValueTooLarge {
                len_bytes: 4,
                max_bytes: 3
            })
        );
        assert_eq!(check(&["DBSIZE"]), Ok(()));
        assert_eq!(
            check(&["MSET", "a", "vvv", "b", "vvvv"]),
            Err(StoreError::ValueTooLarge {
                len_bytes: 4,
                max_bytes: 3
            })
        );
        assert_eq!(
            check(&["MSET", "a", "v", "bbb", "v"]),
            Err(StoreError::KeyTooLarge {
                len_bytes: 3,
                max_bytes: 2
            })
        );
        assert_eq!(check(&["MSET", "a", "vvv", "bb", "v"]), Ok(()));
        assert_eq!(
            check(&["INCR", "kkk"]),
            Err(StoreError::KeyTooLarge {
                len_bytes: 3,
                max_bytes: 2
            })
        );
        assert_eq!(check(&["SNAPSHOT", "DUMP"]), Ok(()));
    }

    #[test]
    fn mset_takes_pairs() {
        assert_eq!(
            parse(&["mset", "a", "1", "b", "2", "a", "3"]),
            Some(Ok(Command::MSet {
                pairs: vec![(b("a"), b("1")), (b("b"), b("2")), (b("a"), b("3"))]
            }))
        );
        for words in [&["MSET"][..], &["MSET", "a"], &["MSET", "a", "1", "b"]] {
            assert_eq!(
                parse(words),
                Some(Err(CommandError::WrongArity("mset"))),
                "{words:?}"
            );
        }
        assert_eq!(
            CommandError::WrongArity("mset").to_string(),
            "ERR wrong number of arguments for 'mset' command"
        );
    }

    #[test]
    fn incr_decr_forms() {
        let incr = |delta| Some(Ok(Command::IncrBy { key: b("k"), delta }));
        assert_eq!(parse(&["INCR", "k"]), incr(1));
        assert_eq!(parse(&["decr", "k"]), incr(-1));
        assert_eq!(parse(&["INCRBY", "k", "-7"]), incr(-7));
        assert_eq!(parse(&["DECRBY", "k", "7"]), incr(-7));
        assert_eq!(parse(&["DECRBY", "k", "-7"]), incr(7));
        assert_eq!(parse(&["INCRBY", "k", "9223372036854775807"]), incr(i64::MAX));
        assert_eq!(parse(&["INCRBY", "k", "-9223372036854775808"]), incr(i64::MIN));
        assert_eq!(parse(&["DECRBY", "k", "9223372036854775807"]), incr(-i64::MAX));
        let names: Vec<_> = [&["INCR", "k"][..], &["DECR", "k"], &["DECRBY", "k", "1"]]
            .iter()
            .map(|w| parse(w).unwrap().unwrap().name())
            .collect();
        assert_eq!(names, ["INCRBY"; 3]);
    }

    #[test]
    fn incr_decr_arity_and_bad_integers() {
        assert_eq!(parse(&["INCR"]), Some(Err(CommandError::WrongArity("incr"))));
        assert_eq!(
            parse(&["DECR", "k", "1"]),
            Some(Err(CommandError::WrongArity("decr")))
        );
        assert_eq!(
            parse(&["INCRBY", "k"]),
            Some(Err(CommandError::WrongArity("incrby")))
        );
        assert_eq!(
            parse(&["DECRBY", "k", "1", "2"]),
            Some(Err(CommandError::WrongArity("decrby")))
        );
        for bad in [
            "",
            "x",
            "1.5",
            "+1",
            " 1",
            "1 ",
            "01",
            "-0",
            "-",
            "0x10",
            "9223372036854775808",
            "-9223372036854775809",
            "99999999999999999999999",
        ] {
            for name in ["INCRBY", "DECRBY"] {
                assert_eq!(
                    parse(&[name, "k", bad]),
                    Some(Err(CommandError::NotAnInteger)),
                    "{name} {bad:?}"
                );
            }
        }
        assert_eq!(
            parse(&["DECRBY", "k", "-9223372036854775808"]),
            Some(Err(CommandError::DecrementOverflow))
        );
        assert_eq!(
            CommandError::NotAnInteger.to_string(),
            "ERR value is not an integer or out of range"
        );
        assert_eq!(
            CommandError::DecrementOverflow.to_string(),
            "ERR decrement would overflow"
        );
    }

    #[test]
    fn snapshot_forms() {
        assert_eq!(parse(&["SNAPSHOT"]), Some(Ok(Command::Snapshot { dump: false })));
        assert_eq!(
            parse(&["snapshot", "dump"]),
            Some(Ok(Command::Snapshot { dump: true }))
        );
        assert_eq!(parse(&["SNAPSHOT", "ALL"]), Some(Err(CommandError::Syntax)));
        assert_eq!(
            parse(&["SNAPSHOT", "DUMP", "x"]),
            Some(Err(CommandError::WrongArity("snapshot")))
        );
        assert_eq!(parse(&["SNAPSHOT"]).unwrap().unwrap().name(), "SNAPSHOT");
    }

    /// Redis's `string2ll`, written from its rules rather than by formatting: `0`, or an optional
    /// `-` then a digit 1-9 then digits, within `i64`.
    fn string2ll(text: &str) -> Option<i64> {
        let digits = text.strip_prefix('-').unwrap_or(text);
        let shape = text == "0"
            || (digits.starts_with(|c: char| ('1'..='9').contains(&c))
                && digits.bytes().all(|b| b.is_ascii_digit()));
        if !shape {
            return None;
        }
        text.parse::<i128>().ok().and_then(|v| i64::try_from(v).ok())
    }

    proptest::proptest! {
        /// Every i64 parses back from its decimal form, and every other string is judged as
        /// Redis judges it.
        #[test]
        fn integers_as_redis_reads_them(value: i64, text in "[-+ 0-9]{0,22}") {
            proptest::prop_assert_eq!(parse_integer(value.to_string().as_bytes()), Some(value));
            proptest::prop_assert_eq!(parse_integer(text.as_bytes()), string2ll(&text));
        }
    }
}
