//! A Sentinel's answers about a service, read: where the primary is, at
//! which epoch, with how many replicas.

use redis::Value;

/// A Sentinel's answers to `SENTINEL MASTER` and
/// `SENTINEL GET-MASTER-ADDR-BY-NAME`, read.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Parsed {
    Named {
        host: String,
        port: u16,
        epoch: u64,
        replicas: u32,
    },
    /// No such service (a nil address, or `SENTINEL MASTER` refused).
    Unknown,
    /// Something else: what, for the message.
    Bad(&'static str),
}

pub(super) fn parse_named(replies: &[Value]) -> Parsed {
    let [master, addr] = replies else { return Parsed::Bad("not two replies") };
    let text = |v: &Value| match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(n) => Some(n.to_string()),
        _ => None,
    };
    let (host, port) = match addr {
        Value::Nil => return Parsed::Unknown,
        Value::Array(hp) if hp.len() == 2 => match (text(&hp[0]), text(&hp[1]).and_then(|p| p.parse::<u16>().ok())) {
            (Some(h), Some(p)) => (h, p),
            _ => return Parsed::Bad("an address that is not host and port"),
        },
        Value::ServerError(_) => return Parsed::Unknown,
        _ => return Parsed::Bad("an address that is not host and port"),
    };
    let pairs: Vec<(String, String)> = match master {
        Value::Array(flat) => flat.chunks(2).filter_map(|kv| Some((text(kv.first()?)?, text(kv.get(1)?)?))).collect(),
        Value::Map(map) => map.iter().filter_map(|(k, v)| Some((text(k)?, text(v)?))).collect(),
        Value::ServerError(_) => return Parsed::Unknown,
        _ => return Parsed::Bad("a `SENTINEL MASTER` reply that is no map"),
    };
    let field = |name: &str| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    let Some(epoch) = field("config-epoch").and_then(|e| e.parse::<u64>().ok()) else {
        return Parsed::Bad("no `config-epoch`");
    };
    let Some(replicas) = field("num-slaves").and_then(|e| e.parse::<u32>().ok()) else {
        return Parsed::Bad("no `num-slaves`");
    };
    Parsed::Named { host, port, epoch, replicas }
}
