use microdcs_valkey::KeySegment;

#[derive(KeySegment)]
#[microdcs(rename_all = "snakecase")]
enum TaskStatus {
    NotStarted,
    Running,
}

#[derive(KeySegment)]
#[microdcs(rename_all = "Title Case")]
enum Priority {
    Low,
    High,
}

fn main() {}
