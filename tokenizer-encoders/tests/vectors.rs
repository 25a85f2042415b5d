//! Every shared DeepSeek vector, byte for byte, through the public vector runner.

use std::path::Path;

fn run(file: &str, expected_count: usize) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/vectors")
        .join(file);
    let report = tokenizer_encoders::check_vector_file(&path).expect("vector file readable");
    assert_eq!(
        report.outcomes.len(),
        expected_count,
        "vector count of {file}"
    );
    assert_eq!(report.failed(), 0, "{file}:\n{report}");
}

#[test]
fn dsv4_vectors_all_pass() {
    run("dsv4.jsonl", 158);
}

#[test]
fn dsv41_vectors_all_pass() {
    run("dsv41.jsonl", 198);
}

/// Issue 19 item 19: every place where the DeepSeek reference encoders treat a missing key and a
/// present-but-null key differently (user `content`, a text block's or a tool-result part's
/// `text`, a tool call's `name` and `arguments`, a tool message's `content`), in both versions.
/// The expected values were derived by reading the reference (`msg.get("content", "")`,
/// `block.get("text", "")`, `tool_call["function"]["name"]`, `str.format` of `None`), not by
/// running it, so they live here and not among the shared vectors.
#[test]
fn missing_vs_null_vectors_all_pass() {
    run("missing-vs-null.jsonl", 28);
}
