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
            _ => return None,
        };
        Some(parsed)
    }

    /// The Redis name of the command, upper case (for `CAS` forms: `CAS`, `CASNX` or `CAD`).
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
            Command::DbSize => Ok(()),
        }
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
    }
}
