use microdcs_valkey::KeySegment;

#[derive(KeySegment)]
enum TaskStatus {
    #[microdcs(rename = "")]
    Unknown,
    Running,
}

fn main() {}
