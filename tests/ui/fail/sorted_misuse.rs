use microdcs_valkey::Document;

// A score that is not a number, a bound of 0, a sorted index without a score.
#[derive(Document)]
#[microdcs(sorted(key = "job:due:{scope}", score = label, name = "due"))]
struct Job {
    id: String,
    scope: String,
    label: String,
}

#[derive(Document)]
#[microdcs(sorted(key = "run:recent:{scope}", score = at, max = 0, name = "recent"))]
struct Run {
    id: String,
    scope: String,
    at: i64,
}

#[derive(Document)]
#[microdcs(sorted(key = "task:due:{scope}", name = "due"))]
struct Task {
    id: String,
    scope: String,
}

fn main() {}
