use microdcs_valkey::KeySegment;

#[derive(KeySegment)]
struct OrderCode {
    text: String,
}

fn main() {}
