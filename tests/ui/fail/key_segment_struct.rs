use microdcs_valkey::KeySegment;

#[derive(KeySegment)]
struct OrderCode {
    text: String,
}

#[derive(KeySegment)]
union Raw {
    n: u32,
}

fn main() {}
