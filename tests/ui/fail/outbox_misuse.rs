use microdcs_valkey::Document;

// An outbox needs a stream with exactly `{scope}`; an event marker needs
// the event's `{id}` and knows no other placeholder; `event_ttl` needs
// `events`; the keys of `outbox(...)` are checked like any attribute.
#[derive(Document)]
#[microdcs(outbox(events = "ev:{id}"))]
struct NoStream {
    id: String,
    scope: String,
}

#[derive(Document)]
#[microdcs(outbox(stream = "work:{scope}:{kind}", events = "ev:{scope}:{source}"))]
struct BadTemplates {
    id: String,
    scope: String,
}

#[derive(Document)]
#[microdcs(outbox(stream = "work:{scope}", events = "ev:{line}|{id}"))]
struct UnknownEventPart {
    id: String,
    scope: String,
}

#[derive(Document)]
#[microdcs(outbox(stream = "work:{scope}", event_ttl = "1h"))]
struct TtlWithoutEvents {
    id: String,
    scope: String,
}

#[derive(Document)]
#[microdcs(outbox(stream = "work:{scope}", events = "ev:{id}", event_ttl = "0s", evnets = "x"))]
struct ZeroTtlAndTypo {
    id: String,
    scope: String,
}

fn main() {}
