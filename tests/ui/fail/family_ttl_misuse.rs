use microdcs_valkey::keyspace;

// A lifetime on a family: a duration of at least 1ms, on a family whose
// keys hold data (not a stream, channel, content or rate limit), and the
// only thing after the template.
keyspace! {
    Bad {
        work: stream("work:{scope}", ttl = "1h"),
        wake: channel("wake:{scope}", ttl = "1h"),
        seen: set("seen:{scope}", ttl = "soon"),
        gone: set("gone:{scope}", ttl = "0s"),
    }
}

keyspace! {
    Odd {
        odd: set("odd:{scope}", max = "3"),
    }
}

fn main() {}
