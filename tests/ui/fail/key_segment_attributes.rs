use microdcs_valkey::KeySegment;

#[derive(KeySegment)]
#[microdcs(rename_al = "lowercase")]
enum TaskStatus {
    #[microdcs(renam = "run")]
    Running,
    #[microdcs(rename = "held", rename = "paused")]
    Held,
}

fn main() {}
