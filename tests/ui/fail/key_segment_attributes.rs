use microdcs_valkey::KeySegment;

#[derive(KeySegment)]
#[microdcs(rename_al = "lowercase")]
#[microdcs(rename_all = "lowercase", rename_all = "UPPERCASE")]
enum TaskStatus {
    #[microdcs(renam = "run")]
    Running,
    #[microdcs(rename = "held", rename = "paused")]
    Held,
}

fn main() {}
