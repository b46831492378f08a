//! The commands the server answers itself, whatever the store: the ones redis-cli and
//! redis-benchmark send besides data commands (docs/redis.md lists them).

use bytes::Bytes;

use crate::reply::Reply;
use crate::store::StoreInfo;

/// What the server answers to a command of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AdminAnswer {
    Reply(Reply),
    /// A Redis error line (`ERR ...`).
    Error(String),
    /// `+OK`, then the connection closes.
    Quit,
}

/// What the admin commands read about the server and the connection.
pub(crate) struct AdminContext<'a> {
    /// Called only by `INFO`: it takes the server's lock.
    pub connections: &'a dyn Fn() -> usize,
    pub connections_max: usize,
    /// Called only by `INFO`: it may cost the store a lock.
    pub describe: &'a dyn Fn() -> StoreInfo,
    /// The connection's `CLIENT SETNAME`.
    pub client_name: &'a mut Option<Bytes>,
}

/// Answers `args` if it names a server command; `None` otherwise.
pub(crate) fn answer(args: &[Bytes], context: AdminContext<'_>) -> Option<AdminAnswer> {
    let name = args.first()?.to_ascii_uppercase();
    let rest = &args[1..];
    let answer = match name.as_slice() {
        b"PING" => match rest {
            [] => AdminAnswer::Reply(Reply::Status("PONG".into())),
            [message] => AdminAnswer::Reply(Reply::Bulk(message.clone())),
            _ => arity("ping"),
        },
        b"ECHO" => match rest {
            [message] => AdminAnswer::Reply(Reply::Bulk(message.clone())),
            _ => arity("echo"),
        },
        b"QUIT" => AdminAnswer::Quit,
        b"SELECT" => select(rest),
        b"INFO" => AdminAnswer::Reply(Reply::Bulk(info_text(&context).into())),
        b"COMMAND" => command(rest),
        b"CONFIG" => config(rest),
        b"CLIENT" => client(rest, context.client_name),
        _ => return None,
    };
    Some(answer)
}

/// Redis's answer to a command nobody knows: the name and the first arguments, 128 bytes each at most.
pub(crate) fn unknown_command(args: &[Bytes]) -> String {
    let name = args.first().map_or(String::new(), |name| clip(name, 128));
    let mut beginning = String::new();
    for arg in args.iter().skip(1) {
        if beginning.len() >= 128 {
            break;
        }
        beginning.push_str(&format!("'{}' ", clip(arg, 128 - beginning.len())));
    }
    format!("ERR unknown command '{name}', with args beginning with: {beginning}")
}

fn clip(bytes: &[u8], len_max: usize) -> String {
    String::from_utf8_lossy(&bytes[..bytes.len().min(len_max)]).into_owned()
}

fn arity(name: &str) -> AdminAnswer {
    AdminAnswer::Error(format!("ERR wrong number of arguments for '{name}' command"))
}

fn unknown_subcommand(subcommand: &[u8], command: &str) -> AdminAnswer {
    let subcommand = clip(subcommand, 128);
    AdminAnswer::Error(format!(
        "ERR unknown subcommand '{subcommand}'. Try {command} HELP."
    ))
}

/// There is one database, number 0.
fn select(rest: &[Bytes]) -> AdminAnswer {
    let [index] = rest else {
        return arity("select");
    };
    match std::str::from_utf8(index)
        .ok()
        .and_then(|text| text.parse::<i64>().ok())
    {
        Some(0) => AdminAnswer::Reply(Reply::Ok),
        Some(_) => AdminAnswer::Error("ERR DB index is out of range".into()),
        None => AdminAnswer::Error("ERR value is not an integer or out of range".into()),
    }
}

/// redis-cli asks for `COMMAND DOCS` at start to show hints: it does without them.
fn command(rest: &[Bytes]) -> AdminAnswer {
    match rest.first().map(|sub| sub.to_ascii_uppercase()) {
        Some(sub) if sub == b"COUNT" => AdminAnswer::Reply(Reply::Integer(0)),
        _ => AdminAnswer::Reply(Reply::Array(Vec::new())),
    }
}

/// Only `CONFIG GET`, answering what a Redis without persistence answers for `save` and
/// `appendonly` (redis-benchmark asks for both) and nothing for other parameters.
fn config(rest: &[Bytes]) -> AdminAnswer {
    let Some(sub) = rest.first() else {
        return arity("config");
    };
    if sub.to_ascii_uppercase() != b"GET" {
        return unknown_subcommand(sub, "CONFIG");
    }
    let parameters = &rest[1..];
    if parameters.is_empty() {
        return arity("config|get");
    }
    let mut pairs = Vec::new();
    for parameter in parameters {
        let value: &'static [u8] = match parameter.to_ascii_lowercase().as_slice() {
            b"save" => b"",
            b"appendonly" => b"no",
            _ => continue,
        };
        pairs.push(Reply::Bulk(parameter.to_ascii_lowercase().into()));
        pairs.push(Reply::Bulk(Bytes::from_static(value)));
    }
    AdminAnswer::Reply(Reply::Array(pairs))
}

fn client(rest: &[Bytes], client_name: &mut Option<Bytes>) -> AdminAnswer {
    let Some(sub) = rest.first() else {
        return arity("client");
    };
    match (sub.to_ascii_uppercase().as_slice(), &rest[1..]) {
        (b"SETNAME", [name]) => {
            *client_name = (!name.is_empty()).then(|| name.clone());
            AdminAnswer::Reply(Reply::Ok)
        }
        (b"SETNAME", _) => arity("client|setname"),
        (b"GETNAME", []) => AdminAnswer::Reply(Reply::from(client_name.clone())),
        (b"GETNAME", _) => arity("client|getname"),
        // Library name and version: accepted, not kept.
        (b"SETINFO", [_, _]) => AdminAnswer::Reply(Reply::Ok),
        (b"SETINFO", _) => arity("client|setinfo"),
        _ => unknown_subcommand(sub, "CLIENT"),
    }
}

/// The `INFO` text: every section whatever the arguments ask for.
fn info_text(context: &AdminContext<'_>) -> String {
    let store = (context.describe)();
    let mut lines = vec![
        "# Server".to_string(),
        // Client libraries that check a server's version for features read this field.
        "redis_version:7.0.0".to_string(),
        format!("onepipe_kv_version:{}", env!("CARGO_PKG_VERSION")),
        "redis_mode:standalone".to_string(),
        String::new(),
        "# Clients".to_string(),
        format!("connected_clients:{}", (context.connections)()),
        format!("maxclients:{}", context.connections_max),
        String::new(),
        "# Store".to_string(),
        format!("store:{}", store.name),
        format!("key_bytes_max:{}", store.key_bytes_max),
        format!("value_bytes_max:{}", store.value_bytes_max),
    ];
    lines.extend(store.fields.iter().map(|(name, value)| format!("{name}:{value}")));
    let mut text = lines.join("\r\n");
    text.push_str("\r\n");
    text
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

    fn run(words: &[&str]) -> Option<AdminAnswer> {
        let mut name = None;
        let describe = || StoreInfo {
            name: "memory".into(),
            key_bytes_max: 1,
            value_bytes_max: 2,
            fields: vec![("keys".into(), "3".into())],
        };
        let context = AdminContext {
            connections: &|| 4,
            connections_max: 5,
            describe: &describe,
            client_name: &mut name,
        };
        answer(&args(words), context)
    }

    fn error(text: &str) -> Option<AdminAnswer> {
        Some(AdminAnswer::Error(text.into()))
    }

    #[test]
    fn ping_echo_select() {
        assert_eq!(
            run(&["ping"]),
            Some(AdminAnswer::Reply(Reply::Status("PONG".into())))
        );
        assert_eq!(
            run(&["PING", "hi"]),
            Some(AdminAnswer::Reply(Reply::Bulk("hi".into())))
        );
        assert_eq!(
            run(&["PING", "a", "b"]),
            error("ERR wrong number of arguments for 'ping' command")
        );
        assert_eq!(
            run(&["ECHO", "x"]),
            Some(AdminAnswer::Reply(Reply::Bulk("x".into())))
        );
        assert_eq!(run(&["SELECT", "0"]), Some(AdminAnswer::Reply(Reply::Ok)));
        assert_eq!(run(&["SELECT", "1"]), error("ERR DB index is out of range"));
        assert_eq!(
            run(&["SELECT", "x"]),
            error("ERR value is not an integer or out of range")
        );
        assert_eq!(run(&["QUIT"]), Some(AdminAnswer::Quit));
        assert_eq!(run(&["GET", "k"]), None);
    }

    #[test]
    fn config_get_answers_what_redis_benchmark_asks() {
        let pairs = |words: &[&str]| {
            Some(AdminAnswer::Reply(Reply::Array(
                args(words).into_iter().map(Reply::Bulk).collect(),
            )))
        };
        assert_eq!(run(&["CONFIG", "GET", "save"]), pairs(&["save", ""]));
        assert_eq!(
            run(&["config", "get", "APPENDONLY", "maxmemory"]),
            pairs(&["appendonly", "no"])
        );
        assert_eq!(
            run(&["CONFIG", "SET", "x", "y"]),
            error("ERR unknown subcommand 'SET'. Try CONFIG HELP.")
        );
        assert_eq!(
            run(&["CONFIG", "GET"]),
            error("ERR wrong number of arguments for 'config|get' command")
        );
    }

    #[test]
    fn client_names_and_command_docs() {
        assert_eq!(
            run(&["CLIENT", "SETNAME", "x"]),
            Some(AdminAnswer::Reply(Reply::Ok))
        );
        assert_eq!(
            run(&["CLIENT", "SETINFO", "LIB-NAME", "redis-rs"]),
            Some(AdminAnswer::Reply(Reply::Ok))
        );
        assert_eq!(
            run(&["CLIENT", "KILL"]),
            error("ERR unknown subcommand 'KILL'. Try CLIENT HELP.")
        );
        assert_eq!(
            run(&["COMMAND", "DOCS"]),
            Some(AdminAnswer::Reply(Reply::Array(vec![])))
        );
    }

    #[test]
    fn info_has_the_store_and_the_clients() {
        let Some(AdminAnswer::Reply(Reply::Bulk(text))) = run(&["INFO"]) else {
            panic!("INFO is a bulk string")
        };
        let text = String::from_utf8(text.to_vec()).unwrap();
        for line in [
            "connected_clients:4",
            "maxclients:5",
            "store:memory",
            "key_bytes_max:1",
            "keys:3",
        ] {
            assert!(text.contains(&format!("{line}\r\n")), "{line} in {text}");
        }
    }

    #[test]
    fn unknown_commands_print_like_redis() {
        assert_eq!(
            unknown_command(&args(&["foo", "a", "b"])),
            "ERR unknown command 'foo', with args beginning with: 'a' 'b' "
        );
        let long = "x".repeat(300);
        let line = unknown_command(&args(&[&long, &long, "never"]));
        assert_eq!(
            line,
            format!(
                "ERR unknown command '{}', with args beginning with: '{}' ",
                &long[..128],
                &long[..128]
            )
        );
    }
}
