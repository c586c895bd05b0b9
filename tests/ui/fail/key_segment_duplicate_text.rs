use microdcs_valkey::KeySegment;

#[derive(KeySegment)]
#[microdcs(rename_all = "lowercase")]
enum TaskStatus {
    OnHold,
    Onhold,
    Running,
    #[microdcs(rename = "running")]
    Restarted,
}

fn main() {}
