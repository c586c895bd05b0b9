use super::{AskOrder, Named, Parsed, Primary, moves_to, parse_named, share};
use redis::Value;
use std::time::Duration;

fn primary(port: u16, epoch: u64) -> Primary {
    Primary { host: "10.0.0.1".into(), port, epoch, generation: 7 }
}

fn named(port: u16, epoch: u64) -> Named {
    Named { host: "10.0.0.1".into(), port, epoch, replicas: 2 }
}

#[test]
fn a_call_ended_by_a_switch_is_told_from_other_lost_connections() {
    let switch: redis::RedisError =
        std::io::Error::new(std::io::ErrorKind::ConnectionAborted, super::follower::PrimaryChanged).into();
    assert!(super::is_switch(&switch));
    assert!(crate::error::is_unknown_outcome(&switch), "still an unknown outcome");
    let aborted: redis::RedisError = std::io::Error::from(std::io::ErrorKind::ConnectionAborted).into();
    assert!(!super::is_switch(&aborted));
}

#[test]
fn a_handle_moves_only_to_a_primary_of_a_later_switch() {
    let following = primary(6380, 3);
    assert!(moves_to(&following, &named(6381, 4), false), "a later switch is followed");
    // An answer to a question asked before the switch, or from a
    // Sentinel that has not heard of it: the deposed primary, which
    // may still say it is one, is never followed again.
    assert!(!moves_to(&following, &named(6379, 2), false), "an older switch is not followed");
    assert!(!moves_to(&following, &named(6379, 3), false), "nor another node of the same switch");
    assert!(!moves_to(&following, &named(6380, 9), false), "the same node is no move");
    // The current primary refused a write as a replica: any node that
    // says it is a primary is better (Sentinels whose epochs started
    // again).
    assert!(moves_to(&following, &named(6379, 0), true));
    assert!(!moves_to(&following, &named(6380, 0), true), "still not a move to itself");
}

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

fn master(fields: &[(&str, &str)]) -> Value {
    Value::Array(fields.iter().flat_map(|(k, v)| [bulk(k), bulk(v)]).collect())
}

#[test]
fn a_sentinels_answer_gives_the_address_the_epoch_and_the_replicas() {
    let addr = Value::Array(vec![bulk("127.0.0.1"), bulk("6381")]);
    let fields = [("name", "svc"), ("ip", "127.0.0.1"), ("config-epoch", "4"), ("num-slaves", "2")];
    let got = parse_named(&[master(&fields), addr.clone()]);
    assert_eq!(got, Parsed::Named { host: "127.0.0.1".into(), port: 6381, epoch: 4, replicas: 2 });
    // RESP3 maps read alike.
    let map = Value::Map(fields.iter().map(|(k, v)| (bulk(k), bulk(v))).collect());
    assert!(matches!(parse_named(&[map, addr.clone()]), Parsed::Named { epoch: 4, .. }));
    // No such service.
    let refused = redis::parse_redis_value(b"-ERR No such master with that name\r\n").unwrap();
    assert!(matches!(refused, Value::ServerError(_)));
    assert_eq!(parse_named(&[refused, Value::Nil]), Parsed::Unknown);
    // Nothing guessed: a missing epoch or count, a bad port.
    let no_epoch = master(&[("num-slaves", "2")]);
    assert_eq!(parse_named(&[no_epoch, addr.clone()]), Parsed::Bad("no `config-epoch`"));
    let no_count = master(&[("config-epoch", "1")]);
    assert_eq!(parse_named(&[no_count, addr]), Parsed::Bad("no `num-slaves`"));
    let bad_port = Value::Array(vec![bulk("h"), bulk("99999")]);
    assert!(matches!(parse_named(&[master(&fields), bad_port]), Parsed::Bad(_)));
    assert!(matches!(parse_named(&[]), Parsed::Bad(_)));
}

#[test]
fn each_sentinel_gets_an_equal_share_of_the_bound() {
    let ms = Duration::from_millis;
    assert_eq!(share(ms(1000), 4), ms(250));
    assert_eq!(share(ms(5000), 3), ms(1666) + Duration::from_nanos(666_666));
    assert_eq!(share(ms(5000), 1), ms(5000));
    // Never below the least share, never above the whole bound.
    assert_eq!(share(ms(1000), 10), ms(250));
    assert_eq!(share(ms(100), 3), ms(100));
    assert_eq!(share(ms(100), 0), ms(100));
}

fn round(o: &AskOrder) -> Vec<usize> {
    o.round(3).collect()
}

#[test]
fn a_round_begins_with_the_sentinel_that_answered_last() {
    let o = AskOrder::default();
    assert_eq!(round(&o), [0, 1, 2]);
    o.asking(0, 3);
    o.asking(1, 3);
    o.answered(1);
    assert_eq!(round(&o), [1, 2, 0], "the one that answered is asked first next time");
    // Asked, then cut off by the caller's bound (no answer recorded):
    // the next round does not begin with the silent one again.
    o.asking(1, 3);
    assert_eq!(round(&o), [2, 0, 1]);
    o.asking(2, 3);
    o.asking(0, 3);
    assert_eq!(round(&o), [1, 2, 0]);
    // A round with no Sentinel is empty, never a division by zero.
    assert_eq!(o.round(0).count(), 0);
}
