//! What goes on the wire: client-side rendering, collections, multi-turn sessions, and
//! `specperf render`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use serde_json::{json, Value};
use specperf::sim::SimConfig;

use crate::common::{fast, sim, tokenizer_path, Replay, Replayed};

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Wrapper-level vectors a SPEED-Bench row can express: one user message, kwargs, no tools.
fn wrapper_vectors(file: &str) -> Vec<(Value, String)> {
    let text = std::fs::read_to_string(
        manifest()
            .join("tokenizer-encoders/tests/vectors")
            .join(file),
    )
    .unwrap();
    text.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["level"] == "wrapper" && v["expected"].is_string())
        .filter(|v| {
            let input = v["input"].as_object().unwrap();
            let m = input["messages"].as_array().unwrap();
            m.len() == 1
                && m[0].as_object().unwrap().len() == 2
                && m[0]["role"] == "user"
                && m[0]["content"].as_str().is_some_and(|c| !c.is_empty())
                && input
                    .keys()
                    .all(|k| k == "messages" || k == "chat_template_kwargs")
        })
        .map(|v| {
            (
                v["input"].clone(),
                v["expected"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_replay_sends_prompts_byte_identical_to_the_wrapper_vectors() {
    let s = sim(SimConfig {
        record_requests: 1000,
        ..fast()
    });
    let dir = tempfile::tempdir().unwrap();
    let mut want = Vec::new();
    let mut runs = 0;
    for (file, encoder) in [("dsv4.jsonl", "dsv4"), ("dsv41.jsonl", "dsv41")] {
        // One replay per distinct kwargs, each over a SPEED-Bench-format file of those prompts.
        let mut groups: BTreeMap<String, Vec<(Value, String)>> = BTreeMap::new();
        for (input, expected) in wrapper_vectors(file) {
            let key = input
                .get("chat_template_kwargs")
                .map(|k| k.to_string())
                .unwrap_or_default();
            groups.entry(key).or_default().push((input, expected));
        }
        for (kwargs, rows) in groups {
            let path = dir.path().join(format!("rows{runs}.jsonl"));
            let mut jsonl = String::new();
            for (i, (input, expected)) in rows.iter().enumerate() {
                let row = json!({"question_id": format!("q{i}"), "category": "t", "messages": input["messages"]});
                jsonl.push_str(&format!("{row}\n"));
                want.push(expected.clone());
            }
            std::fs::write(&path, jsonl).unwrap();
            let mut flags = format!(
                "--model specperf-sim --endpoint-type completions --encoder {encoder} --input-file {} \
                 --no-shuffle --concurrency 1 --osl 2 --no-server-metrics",
                path.display()
            );
            let out_dir = dir.path().join(format!("out{runs}"));
            let mut argv: Vec<String> = flags.split_whitespace().map(str::to_owned).collect();
            if !kwargs.is_empty() {
                argv.push("--chat-template-kwargs".into());
                argv.push(kwargs.clone());
            }
            flags = argv.join("\u{1}");
            let out = crate::common::run(crate::common::config(
                &[
                    vec![
                        "--url",
                        &s.url(),
                        "--artifact-dir",
                        out_dir.to_str().unwrap(),
                    ],
                    flags.split('\u{1}').collect(),
                ]
                .concat(),
            ))
            .await;
            assert_eq!(
                out.summary.counts.success,
                rows.len() as u64,
                "{kwargs} {:?}",
                std::fs::read_to_string(out_dir.join("records.jsonl"))
            );
            runs += 1;
        }
    }
    let got: Vec<String> = s
        .requests()
        .iter()
        .map(|b| b["prompt"].as_str().unwrap().to_owned())
        .collect();
    assert!(want.len() >= 30, "{} vectors", want.len());
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(
            g, w,
            "the simulator received exactly the vector's expected prompt"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_turn_sessions_thread_the_replies_into_the_next_turn() {
    let s = sim(SimConfig {
        record_requests: 100,
        ..fast()
    });
    let sessions = "{\"session_id\": \"a\", \"turns\": [{\"text\": \"a1\"}, {\"text\": \"a2\", \"delay\": 50}, {\"text\": \"a3\", \"max_tokens\": 3}]}\n\
         {\"session_id\": \"b\", \"turns\": [{\"text\": \"b1\"}, {\"text\": \"b2\"}]}\n";
    let Replayed { out, dir: d } = Replay::at(&s.url())
        .input_file("sessions.jsonl", sessions)
        .args("--custom-dataset-type multi_turn --concurrency 2 --osl 5 --temperature 0.5")
        .run()
        .await;
    assert_eq!(out.summary.counts.success, 5, "every turn of both sessions");
    let reqs = s.requests();
    let session_a: Vec<&Value> = reqs
        .iter()
        .filter(|r| r["messages"][0]["content"] == "a1")
        .collect();
    assert_eq!(session_a.len(), 3);
    let last = session_a
        .iter()
        .find(|r| r["messages"].as_array().unwrap().len() == 5)
        .expect("the third turn carries two exchanges");
    let m = last["messages"].as_array().unwrap();
    let roles: Vec<&str> = m.iter().map(|x| x["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant", "user"]);
    assert!(
        !m[1]["content"].as_str().unwrap().is_empty(),
        "the server's reply, not a placeholder"
    );
    assert_eq!(m[4]["content"], "a3");
    assert_eq!(last["max_completion_tokens"], 3);
    assert_eq!(last["temperature"], 0.5);
    let recs = d.records();
    let mut turns: Vec<(u64, u64)> = recs
        .iter()
        .map(|r| (r["id"].as_u64().unwrap(), r["turn"].as_u64().unwrap()))
        .collect();
    turns.sort();
    assert_eq!(turns, [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharegpt_first_human_turn_is_the_prompt() {
    let s = sim(SimConfig {
        record_requests: 10,
        ..fast()
    });
    let conversations = r#"[{"id": "x", "conversations": [{"from": "human", "value": "hello"}, {"from": "gpt", "value": "hi"}]},
            {"id": "lonely", "conversations": [{"from": "human", "value": "no reply"}]}]"#;
    let out = Replay::at(&s.url())
        .input_file("sg.json", conversations)
        .args("--custom-dataset-type sharegpt --osl 4")
        .run()
        .await
        .out;
    assert_eq!(
        out.summary.counts.success, 1,
        "conversations without a reply are skipped"
    );
    assert_eq!(s.requests()[0]["messages"][0]["content"], "hello");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synthetic_prompts_have_exact_token_lengths_and_client_counts_match() {
    let tok_path = tokenizer_path();
    let tok = tokenizer_encoders::Tokenizer::from_path(&tok_path).unwrap();
    let s = sim(SimConfig {
        record_requests: 100,
        ..fast()
    });
    let out = Replay::at(&s.url())
        .args(&format!(
            "--synthetic --tokenizer {} --isl 300 --isl-stddev 40 --num-dataset-entries 12 \
             --random-seed 3 --endpoint-type completions --osl 4",
            tok_path.display()
        ))
        .run()
        .await
        .out;
    assert_eq!(out.summary.counts.success, 12);
    let reqs = s.requests();
    let lens: Vec<usize> = reqs
        .iter()
        .map(|r| tok.count(r["prompt"].as_str().unwrap()).unwrap())
        .collect();
    assert!(
        lens.iter().any(|&n| n != 300),
        "the stddev spreads lengths: {lens:?}"
    );
    // The client-side counts the summary reports are the counts of what was sent.
    let client = &out.summary.metrics["client_input_sequence_length"];
    assert_eq!(client.count, 12);
    let sum: usize = lens.iter().sum();
    assert!(
        (client.sum - sum as f64).abs() < 1e-9,
        "{} vs {sum}",
        client.sum
    );
    // Without spread, every prompt is exactly --isl tokens.
    let out = Replay::at(&s.url())
        .args(&format!(
            "--synthetic --tokenizer {} --isl 257 --num-dataset-entries 5 \
             --endpoint-type completions --osl 4",
            tok_path.display()
        ))
        .run()
        .await
        .out;
    let c = &out.summary.metrics["client_input_sequence_length"];
    assert_eq!((c.min, c.max, c.count), (257.0, 257.0, 5));
    for r in &s.requests()[12..] {
        assert_eq!(tok.count(r["prompt"].as_str().unwrap()).unwrap(), 257);
    }
}

#[test]
fn render_subcommand_checks_vector_files_and_prints_bodies() {
    let bin = env!("CARGO_BIN_EXE_specperf");
    let ok = Command::new(bin)
        .args(["render", "--check-vectors"])
        .arg(manifest().join("tokenizer-encoders/tests/vectors/dsv4.jsonl"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert!(ok.status.success(), "{stdout}");
    assert_eq!(stdout.lines().last(), Some("158 passed, 0 failed"));
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(
        &bad,
        r#"{"id": "x", "encoder": "dsv4", "level": "wrapper", "input": {"messages": [{"role": "user", "content": "hi"}]}, "expected": "not what it renders"}"#,
    )
    .unwrap();
    let fail = Command::new(bin)
        .args(["render", "--check-vectors"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(fail.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&fail.stdout);
    assert!(stdout.ends_with("0 passed, 1 failed\n"), "{stdout}");
    let bodies = Command::new(bin)
        .args([
            "render",
            "--count",
            "2",
            "--endpoint-type",
            "completions",
            "--encoder",
            "dsv41",
            "--chat-template-kwargs",
            r#"{"thinking": true}"#,
            "--category",
            "coding",
        ])
        .output()
        .unwrap();
    assert!(bodies.status.success());
    let text = String::from_utf8_lossy(&bodies.stdout);
    let de = serde_json::Deserializer::from_str(&text).into_iter::<Value>();
    let all: Vec<Value> = de.map(Result::unwrap).collect();
    assert_eq!(all.len(), 2);
    assert!(all[0]["prompt"]
        .as_str()
        .unwrap()
        .starts_with("<｜begin▁of▁sentence｜>"));
}

#[test]
fn render_takes_request_count_and_names_the_flags_it_ignores() {
    // `--request-count 80` printed 3 bodies (render read only --count), and flags that only
    // matter to a run (--url, --concurrency) passed without a word.
    let bin = env!("CARGO_BIN_EXE_specperf");
    let run = |args: &[&str]| Command::new(bin).arg("render").args(args).output().unwrap();
    let count = |o: &std::process::Output| {
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        serde_json::Deserializer::from_str(&text)
            .into_iter::<Value>()
            .count()
    };
    let o = run(&["--request-count", "7"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(count(&o), 7);
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    let o = run(&[
        "--count",
        "2",
        "--url",
        "http://127.0.0.1:9",
        "--concurrency",
        "8",
    ]);
    assert!(o.status.success());
    assert_eq!(count(&o), 2);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(e.lines().count(), 1, "one warning line: {e}");
    assert!(
        e.starts_with("warning:") && e.contains("--url") && e.contains("--concurrency"),
        "{e}"
    );

    let o = run(&["--count", "2", "--request-count", "5"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("give one"));
}
