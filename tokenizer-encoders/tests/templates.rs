//! Hugging Face chat templates through minijinja give the bytes Python Jinja2 gives
//! (expected strings recorded by tests/fixtures/templates/render_expected.py).

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};
use tokenizer_encoders::{ChatTemplate, EncodeError, Encoder};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/templates")
}

fn list(v: Option<&Value>) -> Vec<Value> {
    v.and_then(Value::as_array).cloned().unwrap_or_default()
}

#[test]
fn templates_render_what_python_jinja2_renders() {
    let cases: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(fixtures().join("expected.json")).unwrap())
            .unwrap();
    assert_eq!(cases.len(), 9);
    let mut failures = Vec::new();
    for case in &cases {
        let id = case["id"].as_str().unwrap();
        let template = ChatTemplate::from_path(&fixtures().join(case["fixture"].as_str().unwrap()))
            .unwrap_or_else(|e| panic!("{id}: {e}"));
        let kwargs: Map<String, Value> = case
            .get("kwargs")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let tools = case.get("tools").map(|t| list(Some(t)));
        let got = Encoder::Template(template).render(
            &list(case.get("messages")),
            &kwargs,
            tools.as_deref(),
        );
        match (case.get("expected").and_then(Value::as_str), got) {
            (Some(want), Ok(got)) if want == got => {}
            (Some(want), Ok(got)) => {
                failures.push(format!("{id}:\n--- want\n{want}\n--- got\n{got}"))
            }
            (Some(_), Err(e)) => failures.push(format!("{id}: unexpected error {e}")),
            (None, Err(EncodeError::Template(e))) => {
                let want = case["expected_error"].as_str().unwrap();
                assert!(e.to_string().contains(want), "{id}: {e}");
            }
            (None, other) => failures.push(format!("{id}: expected an error, got {other:?}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn strftime_now_is_todays_date_when_no_date_string_is_given() {
    let t = ChatTemplate::from_path(&fixtures().join("llama3.1/chat_template.jinja")).unwrap();
    let before = chrono::Local::now().format("%d %b %Y").to_string();
    let got = t
        .render(
            &[json!({"role": "user", "content": "Hi"})],
            &Map::new(),
            None,
        )
        .unwrap();
    let after = chrono::Local::now().format("%d %b %Y").to_string();
    assert!(
        got.contains(&format!("Today Date: {before}\n"))
            || got.contains(&format!("Today Date: {after}\n")),
        "{got}"
    );
    // bos_token comes from the tokenizer_config.json beside the .jinja file.
    assert!(
        got.starts_with("<|begin_of_text|><|start_header_id|>system"),
        "{got}"
    );
}

#[test]
fn config_file_and_source_load_the_same_template() {
    let dir = fixtures().join("qwen2.5");
    let msgs = [json!({"role": "user", "content": "Hello!"})];
    let from_dir = ChatTemplate::from_path(&dir).unwrap();
    let from_file = ChatTemplate::from_path(&dir.join("tokenizer_config.json")).unwrap();
    let config: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("tokenizer_config.json")).unwrap())
            .unwrap();
    let from_source = ChatTemplate::from_source(
        config["chat_template"].as_str().unwrap(),
        None,
        Some("<|im_end|>".into()),
    )
    .unwrap();
    let a = from_dir.render(&msgs, &Map::new(), None).unwrap();
    assert_eq!(a, from_file.render(&msgs, &Map::new(), None).unwrap());
    assert_eq!(a, from_source.render(&msgs, &Map::new(), None).unwrap());
}

#[test]
fn kwargs_reach_the_template_and_errors_are_typed() {
    let t = ChatTemplate::from_source(
        "{{ bos_token }}{{ greeting | upper }} {{ messages[0].content.strip() }}\
         {% if add_generation_prompt %}>{% endif %}",
        Some("<s>".into()),
        None,
    )
    .unwrap();
    let mut kwargs = Map::new();
    kwargs.insert("greeting".into(), json!("hi"));
    let msgs = [json!({"role": "user", "content": "  x  "})];
    assert_eq!(t.render(&msgs, &kwargs, None).unwrap(), "<s>HI x>");
    kwargs.insert("add_generation_prompt".into(), json!(false));
    assert_eq!(t.render(&msgs, &kwargs, None).unwrap(), "<s>HI x");

    let bad = ChatTemplate::from_source("{% if %}", None, None);
    assert!(matches!(bad, Err(EncodeError::Template(_))));
    let missing = ChatTemplate::from_path(&fixtures().join("no-such-model"));
    assert!(missing.unwrap_err().to_string().contains("no-such-model"));
}
