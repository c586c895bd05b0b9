use microdcs_valkey::KeySegment;

#[derive(KeySegment)]
enum TaskStatus {
    Running,
    Held(String),
    Failed { code: u32 },
}

fn main() {}
