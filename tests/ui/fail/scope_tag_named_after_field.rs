use microdcs_valkey::Document;

// The scope field is named `tenant`, but templates name the scope `{scope}`
// (`{#scope}` as the hash tag) whatever its field is called.
#[derive(Document)]
#[microdcs(kind = "order", key = "order:{#tenant}:{id}")]
struct Order {
    id: String,
    #[microdcs(scope)]
    tenant: String,
}

fn main() {}
