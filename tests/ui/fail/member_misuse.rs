use microdcs_valkey::Document;

// `when` must be a `bool`; a `member` needs one.
#[derive(Document)]
#[microdcs(member(key = "job:running:{scope}", when = status_text(), name = "running"))]
struct Job {
    id: String,
    scope: String,
    status: String,
}

impl Job {
    fn status_text(&self) -> String {
        self.status.clone()
    }
}

#[derive(Document)]
#[microdcs(member(key = "task:open:{scope}", name = "open"))]
struct Task {
    id: String,
    scope: String,
}

fn main() {}
