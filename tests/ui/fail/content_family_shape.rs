// A content family is named by the text's digest and nothing else.
microdcs_valkey::keyspace! {
    Plant {
        recipes: content("recipe:{scope}:{hash}"),
    }
}

fn main() {}
