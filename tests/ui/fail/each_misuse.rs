use microdcs_valkey::Document;

// One value is no collection: `each` takes a `Vec`, a set or a slice.
#[derive(Document)]
#[microdcs(kind = "one", each(key = "one:bytag:{scope}:{tag}", tag = tag, name = "by_tag"))]
struct One {
    id: String,
    scope: String,
    tag: String,
}

// Two value placeholders: the keys would be a product of two collections.
#[derive(Document)]
#[microdcs(kind = "two", each(key = "two:by:{scope}:{tag}:{state}", tag = tags, name = "by_tag"))]
struct Two {
    id: String,
    scope: String,
    tags: Vec<String>,
    state: String,
}

// `{id}` in the key: a set per id would hold one id.
#[derive(Document)]
#[microdcs(kind = "three", each(key = "three:by:{id}:{tag}", tag = tags, name = "by_tag"))]
struct Three {
    id: String,
    scope: String,
    tags: Vec<String>,
}

// `when` belongs to `member(...)`.
#[derive(Document)]
#[microdcs(kind = "four", each(key = "four:by:{scope}:{tag}", tag = tags, when = open(), name = "by_tag"))]
struct Four {
    id: String,
    scope: String,
    tags: Vec<String>,
}

fn main() {}
