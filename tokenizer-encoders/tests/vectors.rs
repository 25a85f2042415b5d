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
